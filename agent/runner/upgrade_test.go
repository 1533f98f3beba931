package runner_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// release serves the fake runner packed as version and returns its URL and
// checksum.
func release(t *testing.T, s *fakegithub.Server, version string) (string, string) {
	bin, err := fakegithub.BuildRunner()
	if err != nil {
		t.Fatal(err)
	}
	tgz, err := fakegithub.RunnerTarballOf(bin, version)
	if err != nil {
		t.Fatal(err)
	}
	s.ServeRunnerRelease(version, tgz)
	sum := sha256.Sum256(tgz)
	return s.URL() + "/actions/runner/releases/download/v" + version + "/actions-runner-linux-x64-" + version + ".tar.gz", hex.EncodeToString(sum[:])
}

func TestAStagedReleaseIsCheckedThenSwappedInWholeAndSealed(t *testing.T) {
	s := fakegithub.New("acme")
	t.Cleanup(s.Close)
	dir := t.TempDir()
	r := &runner.Runner{Install: filepath.Join(dir, "runner"), Dir: filepath.Join(dir, "run"), WorkDir: filepath.Join(dir, "work")}
	url, sum := release(t, s, "2.336.0")
	ctx := context.Background()
	if err := runner.Install(ctx, r.Install, url, sum); err != nil {
		t.Fatal(err)
	}
	newURL, newSum := release(t, s, "2.337.0")

	// A checksum that differs stages nothing and leaves the install alone.
	if _, err := r.Stage(ctx, newURL, strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("staging with a wrong checksum: %v", err)
	}
	if _, err := os.Stat(runner.StagedDir(r.Install)); err == nil {
		t.Fatal("a release that failed its checksum was left staged")
	}
	staged, err := r.Stage(ctx, newURL, newSum)
	if err != nil {
		t.Fatal(err)
	}
	if v := runner.Version(ctx, r.Install); v != "2.336.0" {
		t.Fatalf("staging changed the live install: it says %q", v)
	}
	if err := r.Swap(staged); err != nil {
		t.Fatal(err)
	}
	if v := runner.Version(ctx, r.Install); v != "2.337.0" {
		t.Fatalf("after the swap the install says %q, want 2.337.0", v)
	}
	for _, gone := range []string{staged, r.Install + ".old"} {
		if _, err := os.Stat(gone); err == nil {
			t.Errorf("%s is left after the swap", gone)
		}
	}
	if info, err := os.Stat(filepath.Join(r.Install, "config.sh")); err != nil || info.Mode().Perm()&0o022 != 0 {
		t.Fatalf("the new install is not sealed: %v %v", info, err)
	}
}
