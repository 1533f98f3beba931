// Package releasecheck holds the checks of the release configuration, and
// what a test needs to prove a release installs: the file names
// .goreleaser.yml gives a release's artifacts (Names), a release's files
// for this machine's platform made from a built provider the way
// goreleaser makes them (Pack), and `terraform init` installing the
// provider from a filesystem mirror laid out from a release's files and
// verified against its SHA256SUMS (Mirror, Init), and the plugin protocols
// a registry manifest names and a provider binary serves (protocol.go).
package releasecheck

import (
	"archive/zip"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

type config struct {
	Version     int
	ProjectName string `yaml:"project_name"`
	Before      struct{ Hooks []string }
	Builds      []struct {
		Main    string
		Binary  string
		Env     []string
		Flags   []string
		Ldflags []string
		Goos    []string
		Goarch  []string
	}
	Archives []struct {
		ID           string
		Formats      []string
		NameTemplate string `yaml:"name_template"`
	}
	Checksum struct {
		NameTemplate string `yaml:"name_template"`
		Algorithm    string
		IDs          []string
		ExtraFiles   []extraFile `yaml:"extra_files"`
	}
	Signs []struct {
		ID        string
		Artifacts string
		Args      []string
	}
	Release struct {
		GitHub     struct{ Owner, Name string }
		ExtraFiles []extraFile `yaml:"extra_files"`
		Draft      bool
	}
}

type extraFile struct {
	Glob         string
	NameTemplate string `yaml:"name_template"`
}

func parseConfig(raw []byte) (config, error) {
	var c config
	if err := yaml.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf(".goreleaser.yml: %v", err)
	}
	if len(c.Builds) != 1 || len(c.Archives) != 1 || len(c.Checksum.ExtraFiles) != 1 {
		return c, fmt.Errorf(".goreleaser.yml: want one build, one archive and one checksummed extra file (the manifest)")
	}
	return c, nil
}

// Names are a release's file names for one version and platform, as
// .goreleaser.yml makes them.
type Names struct {
	Binary, Archive, Checksums, Manifest string
}

var field = regexp.MustCompile(`\{\{\s*\.(ProjectName|Version|Os|Arch)\s*\}\}`)

// NamesFor renders .goreleaser.yml (in root, the repository) for version
// on goos/goarch. Only the fields the name templates use are known; a
// template with anything else is an error, so the names cannot silently
// differ from goreleaser's.
func NamesFor(root, version, goos, goarch string) (Names, error) {
	raw, err := os.ReadFile(filepath.Join(root, ".goreleaser.yml"))
	if err != nil {
		return Names{}, err
	}
	c, err := parseConfig(raw)
	if err != nil {
		return Names{}, err
	}
	values := map[string]string{"ProjectName": c.ProjectName, "Version": version, "Os": goos, "Arch": goarch}
	render := func(tmpl string) (string, error) {
		out := field.ReplaceAllStringFunc(tmpl, func(m string) string { return values[field.FindStringSubmatch(m)[1]] })
		if strings.Contains(out, "{{") {
			return "", fmt.Errorf("template %q: fields beyond ProjectName, Version, Os and Arch", tmpl)
		}
		return out, nil
	}
	var n Names
	for _, f := range []struct {
		dst  *string
		tmpl string
	}{{&n.Binary, c.Builds[0].Binary}, {&n.Archive, c.Archives[0].NameTemplate}, {&n.Checksums, c.Checksum.NameTemplate},
		{&n.Manifest, c.Checksum.ExtraFiles[0].NameTemplate}} {
		if *f.dst, err = render(f.tmpl); err != nil {
			return n, err
		}
	}
	n.Archive += ".zip" // archives' formats: [zip] (TestGoreleaserConfig)
	return n, nil
}

// Pack makes in dist what goreleaser releases for this machine's platform
// from provider, a built provider binary: the zip holding the binary under
// its release name, the manifest, and SHA256SUMS over both.
func Pack(t testing.TB, root, provider, version, dist string) Names {
	t.Helper()
	n, err := NamesFor(root, version, runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(provider)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dist, n.Archive))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	// Stored, not deflated: terraform reads either, and storing the
	// provider (tens of MB) costs a copy instead of seconds of CPU.
	h := &zip.FileHeader{Name: n.Binary, Method: zip.Store}
	h.SetMode(0o755)
	w, err := zw.CreateHeader(h)
	if err == nil {
		_, err = w.Write(bin)
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(root, "terraform-registry-manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dist, n.Manifest), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	var sums strings.Builder
	for _, name := range []string{n.Archive, n.Manifest} {
		fmt.Fprintf(&sums, "%s  %s\n", fileSHA256(t, filepath.Join(dist, name)), name)
	}
	if err := os.WriteFile(filepath.Join(dist, n.Checksums), []byte(sums.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

func fileSHA256(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Sums reads a SHA256SUMS file: file name to hex digest.
func Sums(t testing.TB, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		digest, name, ok := strings.Cut(s.Text(), "  ")
		if !ok || len(digest) != 64 {
			t.Fatalf("%s: line %q is not \"<sha256>  <file>\"", path, s.Text())
		}
		sums[name] = digest
	}
	return sums
}

// Mirror lays out a filesystem mirror (the packed layout:
// HOST/NAMESPACE/TYPE/<archive>.zip) in dir from the release files in dist
// for this machine's platform, and writes a CLI configuration that installs
// the provider from it and from nowhere else. It returns the CLI
// configuration's path and the archive's zh: hash as SHA256SUMS states it.
func Mirror(t testing.TB, root, dist, version, dir string) (cliConfig, zh string) {
	t.Helper()
	n, err := NamesFor(root, version, runtime.GOOS, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	digest, ok := Sums(t, filepath.Join(dist, n.Checksums))[n.Archive]
	if !ok {
		t.Fatalf("%s does not list %s", n.Checksums, n.Archive)
	}
	pkg := filepath.Join(dir, "registry.terraform.io", "ghrunner", "ghrunner")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	zipped, err := os.ReadFile(filepath.Join(dist, n.Archive))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, n.Archive), zipped, 0o644); err != nil {
		t.Fatal(err)
	}
	cliConfig = filepath.Join(dir, "terraformrc")
	rc := fmt.Sprintf("provider_installation {\n  filesystem_mirror {\n    path    = %q\n    include = [\"registry.terraform.io/ghrunner/ghrunner\"]\n  }\n"+
		"  direct {\n    exclude = [\"registry.terraform.io/ghrunner/ghrunner\"]\n  }\n}\n", dir)
	if err := os.WriteFile(cliConfig, []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	return cliConfig, "zh:" + digest
}

// Init runs `terraform init` in dir, whose configuration requires the
// provider, with a dependency lock file that holds only zh (the hash
// SHA256SUMS states, as the Registry's signed checksums give it):
// terraform then installs the package only if its digest matches. It
// returns init's output and the lock file it left.
func Init(t testing.TB, dir, cliConfig, version, zh string) (out, lock string, err error) {
	t.Helper()
	lockFile := filepath.Join(dir, ".terraform.lock.hcl")
	os.RemoveAll(filepath.Join(dir, ".terraform"))
	locked := fmt.Sprintf("provider \"registry.terraform.io/ghrunner/ghrunner\" {\n  version = %q\n  hashes  = [%q]\n}\n", version, zh)
	if err := os.WriteFile(lockFile, []byte(locked), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("terraform", "init", "-input=false", "-no-color")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_PLUGIN_CACHE_DIR=")
	raw, err := cmd.CombinedOutput()
	l, _ := os.ReadFile(lockFile)
	return string(raw), string(l), err
}
