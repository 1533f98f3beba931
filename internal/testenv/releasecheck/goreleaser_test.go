// The tests here read .goreleaser.yml for what the Terraform Registry needs
// of a release, which goreleaser does not know; goreleaser itself validates
// the file in goreleaser_check_test.go, under the releasecheck build tag
// (make release-check), because building it from source takes minutes.
package releasecheck

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestGoreleaserConfig(t *testing.T) {
	raw, err := os.ReadFile("../../../.goreleaser.yml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != 2 {
		t.Errorf("version %d, want 2", c.Version)
	}
	// Set, not guessed from the git remote or the directory name: every file
	// name the registry reads starts with it.
	if c.ProjectName != "terraform-provider-ghrunner" {
		t.Errorf("project_name %q, want terraform-provider-ghrunner", c.ProjectName)
	}
	// Published at once: the registry does not see a draft, and the tag's
	// workflow tests before it releases.
	if c.Release.GitHub.Owner != "ghrunner" || c.Release.GitHub.Name != "terraform-provider-ghrunner" || c.Release.Draft {
		t.Errorf("release %+v: want a published release on ghrunner/terraform-provider-ghrunner", c.Release)
	}
	if !slices.Contains(c.Before.Hooks, "make bundle") {
		t.Errorf("before hooks %v: the provider embeds the bundle, so `make bundle` must run first", c.Before.Hooks)
	}
	if len(c.Builds) != 1 {
		t.Fatalf("%d builds, want the provider only", len(c.Builds))
	}
	b := c.Builds[0]
	if b.Binary != "{{ .ProjectName }}_v{{ .Version }}" {
		t.Errorf("binary %q: the registry wants terraform-provider-NAME_vVERSION", b.Binary)
	}
	if !slices.Contains(b.Env, "CGO_ENABLED=0") || !slices.Contains(b.Flags, "-trimpath") {
		t.Errorf("env %v, flags %v: want a static, path-free build", b.Env, b.Flags)
	}
	if len(b.Ldflags) == 0 || !strings.Contains(b.Ldflags[0], "-X main.version={{ .Version }}") {
		t.Errorf("ldflags %v: the provider must report its version", b.Ldflags)
	}
	main, err := os.ReadFile("../../../main.go")
	if err != nil || !strings.Contains(string(main), "var version = ") {
		t.Errorf("main.go has no `var version` for -X main.version to set (%v)", err)
	}
	for _, goos := range []string{"linux", "darwin", "windows", "freebsd"} {
		if !slices.Contains(b.Goos, goos) {
			t.Errorf("goos %v lacks %s", b.Goos, goos)
		}
	}
	for _, arch := range []string{"amd64", "arm64"} {
		if !slices.Contains(b.Goarch, arch) {
			t.Errorf("goarch %v lacks %s", b.Goarch, arch)
		}
	}
	if len(c.Archives) != 1 || !slices.Equal(c.Archives[0].Formats, []string{"zip"}) ||
		c.Archives[0].NameTemplate != "{{ .ProjectName }}_{{ .Version }}_{{ .Os }}_{{ .Arch }}" {
		t.Errorf("archives %+v: the registry wants NAME_VERSION_OS_ARCH.zip", c.Archives)
	}
	if c.Checksum.Algorithm != "sha256" || c.Checksum.NameTemplate != "{{ .ProjectName }}_{{ .Version }}_SHA256SUMS" {
		t.Errorf("checksum %+v: want NAME_VERSION_SHA256SUMS with sha256", c.Checksum)
	}
	// Only the zips are summed (and the manifest): goreleaser 2.15 would sum
	// the checksum file's own signature into the file it signed.
	if len(c.Archives) == 1 && (c.Archives[0].ID == "" || !slices.Equal(c.Checksum.IDs, []string{c.Archives[0].ID})) {
		t.Errorf("checksum ids %v: want the archives' id (%q) alone", c.Checksum.IDs, c.Archives[0].ID)
	}
	manifest := extraFile{Glob: "terraform-registry-manifest.json", NameTemplate: "{{ .ProjectName }}_{{ .Version }}_manifest.json"}
	if !slices.Contains(c.Checksum.ExtraFiles, manifest) || !slices.Contains(c.Release.ExtraFiles, manifest) {
		t.Errorf("the registry manifest must be released and summed: checksum %v, release %v", c.Checksum.ExtraFiles, c.Release.ExtraFiles)
	}
	if _, err := os.Stat("../../../terraform-registry-manifest.json"); err != nil {
		t.Error(err)
	}
	if len(c.Signs) != 1 || c.Signs[0].Artifacts != "checksum" || !slices.Contains(c.Signs[0].Args, "--detach-sign") ||
		!slices.Contains(c.Signs[0].Args, "{{ .Env.GPG_FINGERPRINT }}") {
		t.Errorf("signs %+v: want a detached GPG signature of the checksum file", c.Signs)
	}
}
