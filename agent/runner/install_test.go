package runner

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func tarball(t *testing.T, files map[string]string, links map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	for name, target := range links {
		tw.WriteHeader(&tar.Header{Name: name, Linkname: target, Typeflag: tar.TypeSymlink})
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func serve(t *testing.T, body []byte) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
	t.Cleanup(srv.Close)
	return srv.URL + "/actions-runner.tar.gz"
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func TestInstallVerifiesAndUnpacks(t *testing.T) {
	tgz := tarball(t, map[string]string{"config.sh": "#!/bin/sh\n", "bin/Runner.Listener": "x"}, map[string]string{"run.sh": "bin/Runner.Listener"})
	dir := filepath.Join(t.TempDir(), "runner")
	if err := Install(context.Background(), dir, serve(t, tgz), sum(tgz)); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, "config.sh"))
	if err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("config.sh: %v %v", info, err)
	}
	// Installed already: nothing is downloaded again (the URL is gone).
	if err := Install(context.Background(), dir, "http://127.0.0.1:1/none", sum(tgz)); err != nil {
		t.Fatalf("second install: %v", err)
	}
}

func TestInstallRefusesBadTarballs(t *testing.T) {
	good := tarball(t, map[string]string{"config.sh": "x"}, nil)
	cases := []struct {
		name, want string
		body       []byte
		sha        string
	}{
		{"checksum", "checksum mismatch", good, strings.Repeat("0", 64)},
		{"escaping entry", "escapes", tarball(t, map[string]string{"../evil": "x"}, nil), ""},
		{"escaping link", "leaves the runner directory", tarball(t, nil, map[string]string{"config.sh": "../../etc/passwd"}), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sha := c.sha
			if sha == "" {
				sha = sum(c.body)
			}
			dir := filepath.Join(t.TempDir(), "runner")
			err := Install(context.Background(), dir, serve(t, c.body), sha)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Install = %v, want %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "config.sh")); err == nil && c.name == "checksum" {
				t.Fatal("a tarball with a wrong checksum was unpacked")
			}
		})
	}
	if err := Install(context.Background(), t.TempDir(), "", ""); err == nil {
		t.Fatal("no config.sh and no URL accepted")
	}
}

// An unpack that stops midway (here: an entry it refuses after config.sh;
// on an instance, a crash or a full disk) leaves no config.sh, so the next
// start installs again instead of taking half a runner for a whole one.
func TestAnInstallCutShortLeavesNothingTakenForAnInstalledRunner(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range []string{"config.sh", "../evil"} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: 1, Typeflag: tar.TypeReg})
		tw.Write([]byte("x"))
	}
	tw.Close()
	gz.Close()
	dir := filepath.Join(t.TempDir(), "runner")
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil { // left by an earlier try
		t.Fatal(err)
	}
	if err := Install(context.Background(), dir, serve(t, buf.Bytes()), sum(buf.Bytes())); err == nil {
		t.Fatal("a tarball with an escaping entry installed")
	}
	if _, err := os.Stat(filepath.Join(dir, "config.sh")); err == nil {
		t.Fatal("config.sh left behind by an unpack that failed: the next start would run half a runner")
	}
	good := tarball(t, map[string]string{"config.sh": "#!/bin/sh\n", "bin/Runner.Listener": "x"}, nil)
	if err := Install(context.Background(), dir, serve(t, good), sum(good)); err != nil {
		t.Fatalf("the next start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bin", "Runner.Listener")); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".runner-unpack-*")); len(left) > 0 {
		t.Fatalf("staging left behind: %v", left)
	}
}

// A download whose connection stalls (headers sent, then half the body and
// silence, as a stuck CDN edge or a dropped NAT mapping does) is abandoned
// after stallLimit and tried again, instead of holding the boot for good.
func TestAStalledDownloadIsAbandonedAndTriedAgain(t *testing.T) {
	defer func(d time.Duration) { stallLimit = d }(stallLimit)
	stallLimit = 300 * time.Millisecond
	tgz := tarball(t, map[string]string{"config.sh": "#!/bin/sh\n"}, nil)
	var calls atomic.Int32
	release := make(chan struct{})
	defer close(release)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Length", strconv.Itoa(len(tgz)))
			w.Write(tgz[:len(tgz)/2])
			w.(http.Flusher).Flush()
			select { // silence until the test ends
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Write(tgz)
	}))
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "runner")
	start := time.Now()
	if err := Install(context.Background(), dir, srv.URL+"/actions-runner.tar.gz", sum(tgz)); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 2 || time.Since(start) > 10*time.Second {
		t.Fatalf("%d requests in %v: want the stalled one abandoned and a second that installs", calls.Load(), time.Since(start))
	}
	if _, err := os.Stat(filepath.Join(dir, "config.sh")); err != nil {
		t.Fatal(err)
	}
}
