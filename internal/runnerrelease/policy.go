package runnerrelease

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// What GitHub serves, and what it stops serving.
//
// GitHub stops sending jobs to a self-hosted runner that has not taken an
// update within 30 days of its release ("Runner software updates on
// self-hosted runners", GitHub's docs; a runner configured with
// --disableupdate is then refused with "Runner version v<x> is deprecated
// and cannot receive messages.", actions/runner #3255, #3651, #4392). The
// listener gets a 403 (AccessDeniedException with ErrorCode 1) and exits
// with TerminatedError, 1, or RunnerVersionDeprecated, 7, when
// ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE is set
// (src/Runner.Listener/Program.cs, src/Runner.Common/Constants.cs); run.sh
// maps 1 to exit 0 (src/Misc/layoutroot/run-helper.sh.template). Since 2026
// GitHub also refuses to register a runner below a minimum version: the
// token exchange at /actions/runner-registration answers 404 with "Your
// runner version is out of date and can no longer register with GitHub.
// The minimum runner version required to register with GitHub Actions is
// now 2.329.0." (GitHub's changelog of 2026-02-05, as runners print it). The
// minimum is announced, not published through the API: Minimum is ours to
// move with it.

// Minimum is the lowest version GitHub registers (GitHub's changelog,
// 2026-02-05: 2.329.0).
const Minimum = "2.329.0"

// Grace is how long after the next release GitHub still sends jobs to a
// runner that did not update.
const Grace = 30 * 24 * time.Hour

// Release is one actions/runner release as the control plane learned it:
// its version, when GitHub published it, and the SHA-256 of its Linux
// tarballs by GOARCH, from the markers of its release notes.
type Release struct {
	Version     string            `dynamodbav:"version" json:"version"`
	PublishedAt int64             `dynamodbav:"publishedAt" json:"publishedAt"`
	SHA256      map[string]string `dynamodbav:"sha256" json:"sha256"`
}

// Target is what a pool's instances install: a version, the tarball for
// the pool's architecture and its checksum.
type Target struct {
	Version string `dynamodbav:"version" json:"version"`
	URL     string `dynamodbav:"url" json:"url"`
	SHA256  string `dynamodbav:"sha256" json:"sha256"`
}

// Latest names a pool that follows actions/runner's latest release.
const Latest = "latest"

var (
	versionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	hexRE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// The release notes carry one marker per platform, which
	// actions/runner's release workflow fills in:
	// <!-- BEGIN SHA linux-x64 -->…<!-- END SHA linux-x64 -->.
	shaMarkerRE = regexp.MustCompile(`<!--\s*BEGIN SHA ([a-z0-9-]+)\s*-->\s*([0-9a-fA-F]{64})\s*<!--\s*END SHA ([a-z0-9-]+)\s*-->`)
)

// ValidVersion says whether v is a release version (x.y.z, no "v").
func ValidVersion(v string) bool { return versionRE.MatchString(v) }

// Compare orders release versions: <0, 0, >0.
func Compare(a, b string) int { return compare(a, b) }

// platforms maps GOARCH to actions/runner's Linux platform names.
var platforms = map[string]string{"amd64": "x64", "arm64": "arm64"}

// URL is github.com's download of version's Linux tarball for goarch.
func URL(version, goarch string) string { return URLAt(GitHubRepo, version, goarch) }

// GitHubRepo is actions/runner on github.com.
const GitHubRepo = "https://github.com/actions/runner"

// URLAt is the download of version's Linux tarball for goarch from the
// actions/runner repository at repo (its web URL).
func URLAt(repo, version, goarch string) string {
	return fmt.Sprintf("%s/releases/download/v%s/actions-runner-linux-%s-%s.tar.gz", strings.TrimSuffix(repo, "/"), version, platforms[goarch], version)
}

// FromRelease reads a release from GitHub's answer: its tag (v2.337.0),
// its publication time and its body. It fails when the body lacks either
// Linux checksum: a release is installed only against a published one.
func FromRelease(tag string, published time.Time, body string) (Release, error) {
	v := strings.TrimPrefix(tag, "v")
	if !ValidVersion(v) {
		return Release{}, fmt.Errorf("actions/runner release %q: tag_name is not v<major>.<minor>.<patch>", tag)
	}
	r := Release{Version: v, PublishedAt: published.Unix(), SHA256: map[string]string{}}
	for _, m := range shaMarkerRE.FindAllStringSubmatch(body, -1) {
		if m[1] != m[3] {
			continue // a BEGIN of one platform closed by another's END
		}
		for arch, platform := range platforms {
			if m[1] == "linux-"+platform {
				r.SHA256[arch] = strings.ToLower(m[2])
			}
		}
	}
	for arch, platform := range platforms {
		if !hexRE.MatchString(r.SHA256[arch]) {
			return Release{}, fmt.Errorf("actions/runner %s: its release notes carry no SHA-256 for linux-%s (<!-- BEGIN SHA linux-%s -->)", v, platform, platform)
		}
	}
	return r, nil
}

// Known returns the releases this provider pins, as Releases (without a
// publication time: they are older than anything GitHub answers).
func Known() []Release {
	var out []Release
	for _, v := range Versions() {
		out = append(out, Release{Version: v, SHA256: sha256s[v]})
	}
	return out
}

// Merge adds r to releases (replacing one of its version), newest first,
// keeping at most keep.
func Merge(releases []Release, r Release, keep int) []Release {
	out := slices.DeleteFunc(slices.Clone(releases), func(o Release) bool { return o.Version == r.Version })
	out = append(out, r)
	slices.SortFunc(out, func(a, b Release) int { return compare(b.Version, a.Version) })
	if len(out) > keep {
		out = out[:keep]
	}
	return out
}

// RefusedAt is when GitHub stops serving version, judged from the
// releases the control plane knows (learned from releases/latest over
// time, so a gap between two it saw may hide one it did not): the first
// known release newer than version, published, plus Grace. A version
// below Minimum is refused already (refused true, at zero). known false:
// no newer release is known, so no deadline.
func RefusedAt(version string, releases []Release) (at time.Time, known bool) {
	if !ValidVersion(version) {
		return time.Time{}, false
	}
	if compare(version, Minimum) < 0 {
		return time.Unix(0, 0), true
	}
	var next *Release
	for i := range releases {
		r := &releases[i]
		if compare(r.Version, version) > 0 && r.PublishedAt != 0 && (next == nil || r.PublishedAt < next.PublishedAt) {
			next = r
		}
	}
	if next == nil {
		return time.Time{}, false
	}
	return time.Unix(next.PublishedAt, 0).Add(Grace), true
}

// Resolve is the target of a pool: spec is "latest" (the newest of
// releases, downloaded from repo, the web URL of actions/runner where the
// releases were learned) or a version, with url and sum for a tarball of
// the pool's own (a mirror); goarch is the pool's architecture. ok false:
// "latest" and no release known yet.
func Resolve(spec, url, sum, goarch string, releases []Release, repo string) (Target, bool, error) {
	if _, ok := platforms[goarch]; !ok {
		return Target{}, false, fmt.Errorf("architecture %q: actions/runner is installed for amd64 and arm64 only", goarch)
	}
	if spec == Latest || spec == "" {
		if len(releases) == 0 {
			return Target{}, false, nil
		}
		newest := slices.MaxFunc(releases, func(a, b Release) int { return compare(a.Version, b.Version) })
		return Target{Version: newest.Version, URL: URLAt(repo, newest.Version, goarch), SHA256: newest.SHA256[goarch]}, true, nil
	}
	if url != "" {
		return Target{Version: spec, URL: url, SHA256: sum}, true, nil
	}
	for _, r := range append(slices.Clone(releases), Known()...) {
		if r.Version == spec && r.SHA256[goarch] != "" {
			return Target{Version: spec, URL: URL(spec, goarch), SHA256: r.SHA256[goarch]}, true, nil
		}
	}
	u, s, err := Tarball(spec, goarch)
	if err != nil {
		return Target{}, false, err
	}
	return Target{Version: spec, URL: u, SHA256: s}, true, nil
}

// ValidateSpec checks a pool's runner_version at plan time: "latest", or a
// version GitHub still registers that this provider pins or that comes
// with a tarball of the pool's own (mirrored).
func ValidateSpec(spec string, mirrored bool) error {
	switch {
	case spec == Latest:
		return nil
	case !ValidVersion(spec):
		return fmt.Errorf("runner_version: %q must be %q or a release version such as %s", spec, Latest, Default)
	case compare(spec, Minimum) < 0:
		return fmt.Errorf("runner_version: %s is below %s, the lowest version GitHub registers: pick %q or a newer release", spec, Minimum, Latest)
	case mirrored:
		return nil
	}
	_, _, err := Tarball(spec, "amd64")
	return err
}
