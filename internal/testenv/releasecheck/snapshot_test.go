//go:build releasecheck

package releasecheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A real goreleaser snapshot (release --snapshot --clean: every platform,
// SHA256SUMS signed with a throwaway key imported by
// scripts/release-gpg-setup, which leaves goreleaser's plain gpg signing
// without a prompt as the workflow's import action does) installs with terraform init from a filesystem
// mirror, verified against the zh: hash its SHA256SUMS states; the
// signature verifies. make test does the same with the provider make
// install built (modules/runner-pool, release_test.go).
func TestGoreleaserSnapshotSignsAndInstallsWithTerraformInit(t *testing.T) {
	if _, err := exec.LookPath("gpg"); err != nil {
		t.Fatal("gpg not found: install it (apt-get install gnupg)")
	}
	tmp := t.TempDir()
	keyring, signing := filepath.Join(tmp, "keyring"), filepath.Join(tmp, "signing")
	os.Mkdir(keyring, 0o700)
	gpg := func(home string, args ...string) string {
		cmd := exec.Command("gpg", append([]string{"--batch", "--pinentry-mode", "loopback", "--passphrase", "throwaway"}, args...)...)
		cmd.Env = append(os.Environ(), "GNUPGHOME="+home)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("gpg %v: %v", args, err)
		}
		return string(out)
	}
	gpg(keyring, "--quick-gen-key", "ghrunner release check <release@ghrunner.invalid>", "rsa3072", "sign", "1d")
	key := gpg(keyring, "--armor", "--export-secret-keys")
	setup := exec.Command("../../../scripts/release-gpg-setup")
	setup.Env = append(os.Environ(), "GNUPGHOME="+signing, "GPG_PRIVATE_KEY="+key, "GPG_PASSPHRASE=throwaway")
	fp, err := setup.Output()
	if err != nil {
		t.Fatalf("scripts/release-gpg-setup: %v", err)
	}
	t.Cleanup(func() {
		for _, home := range []string{keyring, signing} {
			kill := exec.Command("gpgconf", "--kill", "gpg-agent")
			kill.Env = append(os.Environ(), "GNUPGHOME="+home)
			kill.Run()
		}
	})

	snap := goreleaser(t, "release", "--snapshot", "--clean")
	snap.Env = append(os.Environ(), "GNUPGHOME="+signing, "GPG_FINGERPRINT="+strings.TrimSpace(string(fp)))
	if out, err := snap.CombinedOutput(); err != nil {
		t.Fatalf("goreleaser release --snapshot: %v\n%s", err, out)
	}
	dist := "../../../dist"
	sums, _ := filepath.Glob(filepath.Join(dist, "terraform-provider-ghrunner_*_SHA256SUMS"))
	if len(sums) != 1 {
		t.Fatalf("dist/ holds SHA256SUMS %v, want one", sums)
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(sums[0]), "terraform-provider-ghrunner_"), "_SHA256SUMS")
	verify := exec.Command("gpg", "--batch", "--verify", sums[0]+".sig", sums[0])
	verify.Env = append(os.Environ(), "GNUPGHOME="+signing)
	if out, err := verify.CombinedOutput(); err != nil {
		t.Fatalf("the SHA256SUMS signature does not verify: %v\n%s", err, out)
	}
	listed := Sums(t, sums[0])
	// The zips and the manifest, nothing else: a file summed after the
	// signature (the signature itself) would break it.
	if len(listed) != 9 {
		t.Errorf("SHA256SUMS lists %d files, want 8 zips and the manifest: %v", len(listed), listed)
	}
	for _, goos := range []string{"linux", "darwin", "windows", "freebsd"} {
		for _, arch := range []string{"amd64", "arm64"} {
			n, err := NamesFor("../../..", version, goos, arch)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := listed[n.Archive]; !ok {
				t.Errorf("SHA256SUMS lacks %s", n.Archive)
			}
			if goos == runtime.GOOS && arch == runtime.GOARCH {
				if _, ok := listed[n.Manifest]; !ok {
					t.Errorf("SHA256SUMS lacks the manifest %s", n.Manifest)
				}
			}
		}
	}

	cliConfig, zh := Mirror(t, "../../..", dist, version, filepath.Join(tmp, "mirror"))
	work := filepath.Join(tmp, "work")
	os.Mkdir(work, 0o755)
	// A snapshot is a prerelease (x.y.z-snapshot): terraform selects it only
	// when asked for it exactly, as here.
	root := "terraform {\n  required_providers {\n    ghrunner = { source = \"ghrunner/ghrunner\", version = \"" + version + "\" }\n  }\n}\n"
	if err := os.WriteFile(filepath.Join(work, "main.tf"), []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	out, lock, err := Init(t, work, cliConfig, version, zh)
	if err != nil {
		t.Fatalf("terraform init: %v\n%s", err, out)
	}
	if !strings.Contains(lock, zh) || !strings.Contains(lock, `"h1:`) {
		t.Errorf("lock file:\n%s", lock)
	}
	t.Logf("goreleaser snapshot %s installed with terraform init; lock:\n%s", version, lock)
}
