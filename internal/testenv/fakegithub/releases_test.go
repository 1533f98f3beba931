package fakegithub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	agentrunner "github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
)

// A release download answers as github.com does: a redirect to the asset's
// storage, then the bytes; the agent's installer follows it and checks the sum.
func TestARunnerReleaseDownloadsThroughARedirectAndInstalls(t *testing.T) {
	s := New("acme")
	t.Cleanup(s.Close)
	bin, err := BuildRunner()
	if err != nil {
		t.Fatal(err)
	}
	tgz, err := RunnerTarball(bin)
	if err != nil {
		t.Fatal(err)
	}
	s.ServeRunnerRelease("2.336.0", tgz)
	url := s.URL() + "/actions/runner/releases/download/v2.336.0/actions-runner-linux-arm64-2.336.0.tar.gz"

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") == "" {
		t.Fatalf("download answered %d (Location %q), want a 302 to the asset", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, missing := range []string{"v2.300.0/actions-runner-linux-x64-2.300.0.tar.gz", "v2.336.0/actions-runner-osx-x64-2.336.0.tar.gz"} {
		resp, err := http.Get(s.URL() + "/actions/runner/releases/download/" + missing)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", missing, resp.StatusCode)
		}
	}

	sum := sha256.Sum256(tgz)
	dir := filepath.Join(t.TempDir(), "runner")
	if err := agentrunner.Install(context.Background(), dir, url, hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.sh", "run.sh", "bin/Runner.Listener"} {
		if info, err := os.Stat(filepath.Join(dir, f)); err != nil || info.Mode().Perm()&0o100 == 0 {
			t.Errorf("%s: %v %v, want an executable file", f, info, err)
		}
	}
	if n := s.Count(CountReleaseDownload); n != 2 {
		t.Errorf("%d downloads counted, want 2 (one redirect followed, one not)", n)
	}
}

// DelayReleaseAssets holds every asset's bytes back for the delay asked
// (agent tests use it to see what an agent does while it downloads).
func TestReleaseAssetsAnswerAfterTheDelayAsked(t *testing.T) {
	s := New("acme")
	t.Cleanup(s.Close)
	s.ServeRunnerRelease("2.337.0", []byte("not a tarball"))
	url := s.URL() + "/actions/runner/releases/download/v2.337.0/actions-runner-linux-x64-2.337.0.tar.gz"
	get := func() time.Duration {
		start := time.Now()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("asset answered %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	if took := get(); took > 500*time.Millisecond {
		t.Fatalf("an undelayed asset took %s", took)
	}
	s.DelayReleaseAssets(time.Second)
	if took := get(); took < time.Second {
		t.Fatalf("an asset delayed by 1s answered after %s", took)
	}
}
