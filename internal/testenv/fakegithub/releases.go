package fakegithub

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
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

// CountLatestRelease is the Count key of reads of a repository's latest
// release (refresh reads actions/runner's).
const CountLatestRelease = "GET /repos/{owner}/{repo}/releases/latest"

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

// DelayReleaseAssets makes every release asset answer d after it was
// asked for: a download as slow as a real one (tens of megabytes), so a
// test sees what is done while it lasts.
func (s *Server) DelayReleaseAssets(d time.Duration) {
	s.mu.Lock()
	s.assetDelay = d
	s.mu.Unlock()
}

func (s *Server) releaseAsset(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	data, ok := s.releases[r.PathValue("tag")+"/"+r.PathValue("asset")]
	delay := s.assetDelay
	s.mu.Unlock()
	if !ok {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

// RunnerTarball packs the fake runner as actions/runner's tarball lays
// itself out: config.sh and run.sh at the top, the program under bin/,
// claiming to be the default release this provider pins.
func RunnerTarball(binary string) ([]byte, error) {
	return RunnerTarballOf(binary, runnerrelease.Default)
}

// RunnerTarballOf packs the fake runner as release version: the version is
// in bin/fakerunner.version, which the program reads as the real one reads
// its compiled-in version.
func RunnerTarballOf(binary, version string) ([]byte, error) {
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
	}{{"./bin/", 0o755, nil}, {"./bin/Runner.Listener", 0o755, prog}, {"./bin/fakerunner.version", 0o644, []byte(version + "\n")},
		{"./config.sh", 0o755, wrapper("config")}, {"./run.sh", 0o755, wrapper("run")}} {
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

// Releases GitHub published, and what it refuses.
//
// GET /repos/actions/runner/releases/latest answers the newest release
// (not a draft or a pre-release) as github.com does: tag_name v<version>,
// published_at, and a body as actions/runner's release workflow writes it:
// release notes with each tarball's SHA-256 between
// <!-- BEGIN SHA <platform> --> and <!-- END SHA <platform> -->. A test
// publishes a release with PublishRunnerRelease, also mid-run.
//
// What GitHub refuses, by the version a runner sends in its User-Agent
// (GitHubActionsRunner-<package>/<version>, HostContext.cs) and its polls'
// runnerVersion: registration below the minimum (404 at
// /actions/runner-registration, "Your runner version is out of date…",
// as runners print it; GitHub's changelog 2026-02-05), and messages to a
// version whose next release was published more than 30 days ago, or which
// is below the minimum (403 "Runner version v<x> is deprecated and cannot
// receive messages.", actions/runner #3255, #3651). Whether GitHub refuses
// a just-in-time runner below the minimum at its session or later is not
// documented: the fake refuses the session. A listener that did not
// configure --disableupdate and is behind the latest release is sent an
// update message instead of its next job (Runner.cs, RunnerRefreshMessage;
// CountUpdateMessages counts them).

// CountUpdateMessages is the Count key of update messages sent.
const CountUpdateMessages = "update messages"

type published struct {
	version string
	at      time.Time
	sha256  string
}

// PublishRunnerRelease publishes actions/runner version at the given time:
// its tarballs (both Linux platforms serve tarball) and its release notes.
func (s *Server) PublishRunnerRelease(version string, tarball []byte, at time.Time) {
	s.ServeRunnerRelease(version, tarball)
	sum := sha256.Sum256(tarball)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.published = slices.DeleteFunc(s.published, func(p published) bool { return p.version == version })
	s.published = append(s.published, published{version: version, at: at, sha256: hex.EncodeToString(sum[:])})
}

// SetMinimumRunnerVersion sets the lowest version GitHub registers and
// sends messages to ("" : runnerrelease.Minimum).
func (s *Server) SetMinimumRunnerVersion(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.minimumRunner = v
}

func (s *Server) latest() (published, bool) {
	var best published
	for _, p := range s.published {
		if best.version == "" || runnerrelease.Compare(p.version, best.version) > 0 {
			best = p
		}
	}
	return best, best.version != ""
}

func (s *Server) latestRelease(w http.ResponseWriter, r *http.Request) (int, any) {
	// Only actions/runner's releases are modelled, and only on
	// github.com: a GitHub Enterprise Server has no actions/runner
	// repository (404, as for any repository it lacks).
	if r.PathValue("owner")+"/"+r.PathValue("repo") != "actions/runner" || s.version != APIGitHubCom {
		return notFound()
	}
	s.mu.Lock()
	p, ok := s.latest()
	id := int64(1000 + len(s.published))
	s.mu.Unlock()
	if !ok {
		return notFound()
	}
	v := p.version
	body := "## What's Changed\n* Fake release for ghrunner tests\n\n## SHA-256 Checksums\n\nThe SHA-256 checksums for the packages included in this build are shown below:\n\n"
	for _, platform := range []string{"linux-x64", "linux-arm64"} {
		body += fmt.Sprintf("- actions-runner-%s-%s.tar.gz <!-- BEGIN SHA %s -->%s<!-- END SHA %s -->\n", platform, v, platform, p.sha256, platform)
	}
	api, web := apiRoot(r), webRoot(r)
	// The release schema's required fields (components/schemas/release).
	return http.StatusOK, map[string]any{
		"id": id, "node_id": nodeID("Release", id), "tag_name": "v" + v, "name": "v" + v, "draft": false, "prerelease": false,
		"created_at": p.at.UTC().Format(time.RFC3339), "published_at": p.at.UTC().Format(time.RFC3339), "body": body,
		"url":         fmt.Sprintf("%srepos/actions/runner/releases/%d", api, id),
		"assets_url":  fmt.Sprintf("%srepos/actions/runner/releases/%d/assets", api, id),
		"upload_url":  fmt.Sprintf("%srepos/actions/runner/releases/%d/assets{?name,label}", api, id),
		"html_url":    web + "actions/runner/releases/tag/v" + v,
		"tarball_url": api + "repos/actions/runner/tarball/v" + v, "zipball_url": api + "repos/actions/runner/zipball/v" + v,
		"target_commitish": "main", "assets": []any{}, "author": account(r, "github-actions[bot]", 41898282, "Bot"),
	}
}

// runnerVersion reads the version a runner's request carries.
func runnerVersion(r *http.Request) string {
	if v := r.URL.Query().Get("runnerVersion"); v != "" {
		return v
	}
	for _, product := range strings.Fields(r.Header.Get("User-Agent")) {
		if name, v, ok := strings.Cut(product, "/"); ok && strings.HasPrefix(name, "GitHubActionsRunner-") {
			return v
		}
	}
	return ""
}

func (s *Server) minimum() string { return cmp.Or(s.minimumRunner, runnerrelease.Minimum) }

// registrationRefused is the message of a registration GitHub refuses for
// its version ("" when it accepts it). s.mu is held.
func (s *Server) registrationRefused(r *http.Request) string {
	v := runnerVersion(r)
	if !runnerrelease.ValidVersion(v) || runnerrelease.Compare(v, s.minimum()) >= 0 {
		return ""
	}
	return "Your runner version is out of date and can no longer register with GitHub. The minimum runner version required to register with GitHub Actions is now " + s.minimum() + "."
}

// versionRefused is the message of a listener GitHub no longer sends
// messages to ("" when it does). s.mu is held.
func (s *Server) versionRefused(r *http.Request) string {
	v := runnerVersion(r)
	if !runnerrelease.ValidVersion(v) {
		return ""
	}
	refused := runnerrelease.Compare(v, s.minimum()) < 0
	for _, p := range s.published {
		refused = refused || runnerrelease.Compare(p.version, v) > 0 && s.now().Sub(p.at) > runnerrelease.Grace
	}
	if !refused {
		return ""
	}
	return "Runner version v" + v + " is deprecated and cannot receive messages."
}

// updateFor is the update message for the listener of runner rn in
// session ("" none): the latest release, for a listener behind it that may
// update, once per session. s.mu is held.
//
// The message is the broker's RunnerRefreshMessage as SelfUpdaterV2.cs
// reads it: the target version, the package's download URL and SHA-256
// (the listener downloads and checks it itself). Whether GitHub sends it
// again to a listener already updating is not documented (the listener
// ignores it: "skip autoupdate since a previous autoupdate is already
// running", Runner.cs); the fake sends one per session, so each counts
// one update. A just-in-time runner sent one may start one more listener
// (runnerproto.go): run.sh launches it again once the update is in place.
func (s *Server) updateFor(r *http.Request, rn *runner, session string) map[string]any {
	v := runnerVersion(r)
	latest, ok := s.latest()
	if !ok || !runnerrelease.ValidVersion(v) || r.URL.Query().Get("disableUpdate") == "true" || runnerrelease.Compare(v, latest.version) >= 0 {
		return nil
	}
	if rn.updateSession == session {
		return nil
	}
	rn.updateSession = session
	if rn.jit {
		rn.relaunches++
	}
	s.counts[CountUpdateMessages]++
	s.updates = append(s.updates, UpdateMessage{Runner: rn.name, From: v, To: latest.version, At: time.Now()})
	platform := "x64"
	if strings.Contains(strings.ToLower(r.Header.Get("User-Agent")), "arm64") {
		platform = "arm64"
	}
	return map[string]any{"type": "RunnerRefresh", "targetVersion": latest.version,
		"downloadUrl":    fmt.Sprintf("%sactions/runner/releases/download/v%s/actions-runner-linux-%s-%s.tar.gz", webRoot(r), latest.version, platform, latest.version),
		"sha256Checksum": latest.sha256}
}

// UpdateMessage is one update message the server sent: to which runner,
// from the version its listener announced, to which release, when.
type UpdateMessage struct {
	Runner   string
	From, To string
	At       time.Time
}

// UpdateMessages lists the update messages sent so far, oldest first: a
// job that waited on one is what ghrunner's idle upgrade exists to avoid.
func (s *Server) UpdateMessages() []UpdateMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.updates)
}
