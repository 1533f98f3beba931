// Package runnerrelease names the actions/runner releases this provider can
// install on a stock AMI: where each tarball is downloaded from and the
// SHA-256 the agent checks it against before unpacking.
//
// The checksums are the ones actions/runner publishes in each release's
// notes (one per platform); a release is added here only with both Linux
// checksums, so that a pool of either architecture is pinned. GitHub stops
// sending jobs to runners that are too old and that were configured with
// --disableupdate (as ours are), so Default moves forward with provider
// releases and a pool can name a newer one with runner_tarball_url and
// runner_tarball_sha256.
package runnerrelease

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

// Default is the release a pool installs when it names none.
const Default = "2.336.0"

// sha256s: version → GOARCH → the tarball's SHA-256 from the release notes.
var sha256s = map[string]map[string]string{
	"2.336.0": {
		"amd64": "04cf0be1aff4c3ec3554466c39124ca250e3effd8873bb7e8d68535aa9505d5d",
		"arm64": "58b758e420b87093fbd4bfddd368074960053e2f1388f01848c82624b90f27d1",
	},
	"2.335.1": {
		"amd64": "4ef2f25285f0ae4477f1fe1e346db76d2f3ebf03824e2ddd1973a2819bf6c8cf",
		"arm64": "6d1e85bfd1a506a8b17c1f1b9b57dba458ffed90898799aaa9f599520b0d9207",
	},
}

// Versions lists the releases this provider pins, newest first.
func Versions() []string {
	return slices.SortedFunc(maps.Keys(sha256s), func(a, b string) int { return compare(b, a) })
}

// Tarball is the download URL and SHA-256 of version's Linux tarball for
// goarch (amd64 or arm64).
func Tarball(version, goarch string) (url, sha256 string, err error) {
	sums, ok := sha256s[version]
	if !ok {
		return "", "", fmt.Errorf("runner_version: %q is not a release this provider pins (%s); for another, set runner_tarball_url and runner_tarball_sha256",
			version, strings.Join(Versions(), ", "))
	}
	platform := map[string]string{"amd64": "x64", "arm64": "arm64"}[goarch]
	if platform == "" {
		return "", "", fmt.Errorf("architecture %q: actions/runner is pinned for amd64 and arm64 only", goarch)
	}
	return fmt.Sprintf("https://github.com/actions/runner/releases/download/v%s/actions-runner-linux-%s-%s.tar.gz", version, platform, version),
		sums[goarch], nil
}

// compare orders release versions (semantic versions without the "v").
func compare(a, b string) int { return semver.Compare("v"+a, "v"+b) }
