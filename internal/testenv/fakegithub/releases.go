package fakegithub

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
)

// Release downloads as github.com serves them: GET
// /actions/runner/releases/download/v<version>/<asset> answers 302 to the
// asset's storage URL (on github.com, a short-lived signed URL on
// release-assets.githubusercontent.com), which answers the bytes as
// application/octet-stream; an unknown tag or asset is a 404. Clients must
// follow the redirect, as curl -L and Go's http.Client do.

// CountReleaseDownload is the Count key of release downloads answered
// with a redirect to the asset.
const CountReleaseDownload = "GET /actions/runner/releases/download/{tag}/{asset}"

// ServeRunnerRelease makes the server answer actions/runner release
// version's Linux tarballs (x64 and arm64) with tarball.
func (s *Server) ServeRunnerRelease(version string, tarball []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.releases == nil {
		s.releases = map[string][]byte{}
	}
	for _, platform := range []string{"x64", "arm64"} {
		s.releases[fmt.Sprintf("v%s/actions-runner-linux-%s-%s.tar.gz", version, platform, version)] = tarball
	}
}

func (s *Server) releaseDownload(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("tag") + "/" + r.PathValue("asset")
	s.mu.Lock()
	_, ok := s.releases[name]
	if ok {
		s.counts[CountReleaseDownload]++
	}
	s.mu.Unlock()
	if !ok {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	http.Redirect(w, r, "/_fake/release-assets/"+name, http.StatusFound)
}

func (s *Server) releaseAsset(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, ok := s.releases[r.PathValue("tag")+"/"+r.PathValue("asset")]
	s.mu.Unlock()
	if !ok {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

// RunnerTarball packs the fake runner as actions/runner's tarball lays
// itself out: config.sh and run.sh at the top, the program under bin/.
func RunnerTarball(binary string) ([]byte, error) {
	prog, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	wrapper := func(command string) []byte {
		return []byte("#!/bin/bash\n# " + command + ".sh of the fake GitHub Actions runner (ghrunner tests).\n" +
			"DIR=\"$(cd -P \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\"\n" +
			"cd \"$DIR\" || exit 1\n" +
			"exec \"$DIR/bin/Runner.Listener\" " + command + " \"$@\"\n")
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	now := time.Now()
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"./bin/", 0o755, nil}, {"./bin/Runner.Listener", 0o755, prog}, {"./config.sh", 0o755, wrapper("config")}, {"./run.sh", 0o755, wrapper("run")}} {
		h := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: now, Typeflag: tar.TypeReg}
		if f.data == nil {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
