package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// installWorld is a world whose runner is not preinstalled: the agent
// downloads it from a local server (counting the downloads) after
// installing its libraries on an Ubuntu 24.04 (its real os-release), with
// stand-ins for dpkg-query, apt-cache and apt-get on PATH. aptGet is the
// body of the apt-get stand-in; installed the packages dpkg-query
// reports. The returned func counts apt-get's runs.
func installWorld(t *testing.T, installed []string, aptGet string, checksum func(sum string) string) (*world, *atomic.Int32, func() int) {
	w := newWorld(t, "")
	must(t, os.RemoveAll(filepath.Join(w.dir, "runner")))
	var tgz bytes.Buffer
	gz := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(gz)
	body := "#!/bin/sh\necho the tarball's runner\n"
	for _, name := range []string{"config.sh", "run.sh"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	downloads := &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		downloads.Add(1)
		rw.Write(tgz.Bytes())
	}))
	t.Cleanup(srv.Close)
	sum := sha256.Sum256(tgz.Bytes())
	osRelease, err := filepath.Abs(filepath.Join("runner", "testdata", "os-release", "ubuntu-24.04"))
	must(t, err)
	w.configure(func(c *config.Config) {
		c.RunnerTarballURL = srv.URL + "/actions-runner-linux-x64.tar.gz"
		c.RunnerTarballSHA256 = checksum(hex.EncodeToString(sum[:]))
		c.OSRelease = osRelease
	})

	bin := t.TempDir()
	calls := filepath.Join(bin, "apt-get.calls")
	list := " " + strings.Join(installed, " ") + " "
	tools := map[string]string{
		"dpkg-query": `p="${@: -1}"; case "` + list + `" in *" $p "*) printf 'install ok installed';; *) exit 1;; esac`,
		"apt-cache":  `echo "Package: ${@: -1}"`,
		"apt-get":    "echo \"$*\" >> " + calls + "\n" + aptGet,
	}
	for name, script := range tools {
		must(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/bash\n"+script+"\n"), 0o755))
	}
	w.env = append(w.env, "PATH="+bin+":"+os.Getenv("PATH"))
	return w, downloads, func() int {
		raw, _ := os.ReadFile(calls)
		return strings.Count(string(raw), "\n")
	}
}

// failedOnce checks that the agent answered the assignment with UD_FAILED
// naming why, wrote it once in all its starts, registered no runner, and
// stays up, heartbeating.
func failedOnce(t *testing.T, w *world, inst *state.Instance, reason string) {
	t.Helper()
	got := w.wait(inst, state.SignalFailed, state.SignalOK)
	if sig, ok := got.SignalFor(state.SignalFailed); !ok || !strings.Contains(sig.Detail, reason) {
		t.Fatalf("signals %v, want UD_FAILED with %q", got.Signals, reason)
	}
	beats := got.Heartbeats
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-w.exited:
			t.Fatalf("the agent exited after the failed install (%v): systemd would start it again into a download loop\n%s", err, w.logs.String())
		case <-time.After(300 * time.Millisecond):
		}
		rec, err := w.store.Get(ctx, w.key)
		must(t, err)
		if rec.Heartbeats > beats+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat after the failed install (%d, then %d)", beats, rec.Heartbeats)
		}
	}
	if n := strings.Count(w.logs.String(), `"signal":"UD_FAILED"`); n != 1 {
		t.Fatalf("UD_FAILED written %d times, want once\n%s", n, w.logs.String())
	}
	if rs := w.fake.Runners(); len(rs) != 0 {
		t.Fatalf("a runner registered on an instance without one: %+v", rs)
	}
}

// Issue 30 item 2: a runner install that fails (here apt-get cannot find
// ICU, as actions/runner's own script failed on Amazon Linux 2023) is said
// once, with the reason, in UD_FAILED, so provision replaces the instance
// at once; the agent stays up, and a restart (systemd's, or a reboot)
// installs and downloads nothing again. Shown to fail with the agent
// exiting on the failure, as before (no signal at all: "waiting for
// UD_FAILED: ... context deadline exceeded", provision's wait), and with
// the marker ignored ("a restarted agent ran apt-get again: 4 runs, 2
// before"; the download test: "2 downloads over two starts, want 1").
func TestAFailedDependencyInstallSignalsFailedOnceAndIsNotRetriedByARestart(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w, downloads, aptRuns := installWorld(t, nil, `case "$*" in *install*) echo "E: Unable to locate package libicu74" >&2; exit 100;; esac`,
		func(sum string) string { return sum })
	inst := w.create("run-a", "on-demand")
	w.start()
	failedOnce(t, w, inst, "E: Unable to locate package libicu74")
	before := aptRuns()
	if before == 0 || downloads.Load() != 0 {
		t.Fatalf("apt-get ran %d times, %d downloads: want apt-get, and no download before the libraries", before, downloads.Load())
	}

	w.kill()
	w.start()
	failedOnce(t, w, inst, "E: Unable to locate package libicu74")
	if n := aptRuns(); n != before {
		t.Fatalf("a restarted agent ran apt-get again: %d runs, %d before", n, before)
	}
	if n := downloads.Load(); n != 0 {
		t.Fatalf("a restarted agent downloaded the runner: %d downloads", n)
	}
}

// A download that fails (here: a tarball whose checksum is not the one
// configured) is said and kept the same way: one download, however often
// the agent starts. The libraries, all installed already, run no apt-get.
// The pool has a proxy (issue 40 item 6): the agent's own download goes
// through it, to a name only the proxy resolves.
func TestAFailedRunnerDownloadSignalsFailedOnceAndIsNotRetriedByARestart(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w, downloads, aptRuns := installWorld(t, []string{"libicu74", "libssl3t64", "libkrb5-3", "zlib1g", "liblttng-ust1t64"}, "exit 1",
		func(string) string { return strings.Repeat("0", 64) })
	proxy := w.viaProxy()
	w.configure(func(c *config.Config) {
		u, err := url.Parse(c.RunnerTarballURL)
		must(t, err)
		u.Host = proxy.Map("releases.proxytest", u.Host)
		c.RunnerTarballURL = u.String()
	})
	inst := w.create("run-a", "on-demand")
	w.start()
	failedOnce(t, w, inst, "runner tarball checksum mismatch")
	if n := aptRuns(); n != 0 {
		t.Fatalf("apt-get ran %d times with every library installed", n)
	}
	w.kill()
	w.start()
	failedOnce(t, w, inst, "runner tarball checksum mismatch")
	if n := downloads.Load(); n != 1 {
		t.Fatalf("%d downloads over two starts, want 1", n)
	}
	if hosts := proxy.Hosts(); hosts["releases.proxytest"] != 1 || len(hosts) != 1 {
		t.Fatalf("the proxy was asked for %v, want the download alone", hosts)
	}
}
