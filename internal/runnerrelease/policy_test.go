package runnerrelease

import (
	"strings"
	"testing"
	"time"
)

// body is a release body as actions/runner publishes it: its release
// notes with the checksum placeholders filled in by its release workflow.
func body(x64, arm64 string) string {
	return "## What's Changed\n* things\n\n## SHA-256 Checksums\n\nThe SHA-256 checksums for the packages included in this build are shown below:\n\n" +
		"- actions-runner-win-x64-2.337.0.zip <!-- BEGIN SHA win-x64 -->" + strings.Repeat("a", 64) + "<!-- END SHA win-x64 -->\n" +
		"- actions-runner-linux-x64-2.337.0.tar.gz <!-- BEGIN SHA linux-x64 -->" + x64 + "<!-- END SHA linux-x64 -->\n" +
		"- actions-runner-linux-arm64-2.337.0.tar.gz <!-- BEGIN SHA linux-arm64 -->" + arm64 + "<!-- END SHA linux-arm64 -->\n" +
		"- actions-runner-linux-arm-2.337.0.tar.gz <!-- BEGIN SHA linux-arm -->" + strings.Repeat("c", 64) + "<!-- END SHA linux-arm -->\n"
}

func TestAReleaseIsReadWithTheLinuxChecksumsOfItsNotes(t *testing.T) {
	x64, arm := strings.Repeat("1", 64), strings.Repeat("2", 64)
	at := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	r, err := FromRelease("v2.337.0", at, body(x64, arm))
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != "2.337.0" || r.PublishedAt != at.Unix() || r.SHA256["amd64"] != x64 || r.SHA256["arm64"] != arm {
		t.Fatalf("read %+v", r)
	}
}

func TestAReleaseWithoutALinuxChecksumIsRefused(t *testing.T) {
	_, err := FromRelease("v2.337.0", time.Now(), body(strings.Repeat("1", 64), "not-a-sum"))
	if err == nil || !strings.Contains(err.Error(), "linux-arm64") {
		t.Fatalf("want an error naming linux-arm64, got %v", err)
	}
	if _, err := FromRelease("latest", time.Now(), body(strings.Repeat("1", 64), strings.Repeat("2", 64))); err == nil || !strings.Contains(err.Error(), "tag_name") {
		t.Fatalf("want an error naming tag_name, got %v", err)
	}
}

func TestAVersionIsRefusedThirtyDaysAfterTheNextRelease(t *testing.T) {
	p := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	releases := []Release{
		{Version: "2.338.0", PublishedAt: p.Add(20 * 24 * time.Hour).Unix()},
		{Version: "2.337.0", PublishedAt: p.Unix()},
	}
	at, known := RefusedAt("2.336.0", releases)
	if !known || !at.Equal(p.Add(Grace)) {
		t.Fatalf("2.336.0: refused at %v (%v), want 30 days after 2.337.0's publication %v", at, known, p.Add(Grace))
	}
	if at, known := RefusedAt("2.337.0", releases); !known || !at.Equal(p.Add(20*24*time.Hour+Grace)) {
		t.Fatalf("2.337.0: refused at %v (%v)", at, known)
	}
	if _, known := RefusedAt("2.338.0", releases); known {
		t.Fatal("the newest release has no deadline")
	}
	if at, known := RefusedAt("2.320.0", releases); !known || at.After(p) {
		t.Fatalf("a version below the minimum is refused already, got %v (%v)", at, known)
	}
}

func TestAPoolResolvesLatestOrItsPin(t *testing.T) {
	x64, arm := strings.Repeat("1", 64), strings.Repeat("2", 64)
	releases := []Release{{Version: "2.337.0", PublishedAt: 1, SHA256: map[string]string{"amd64": x64, "arm64": arm}}}
	got, ok, err := Resolve(Latest, "", "", "arm64", releases, GitHubRepo)
	if err != nil || !ok || got.Version != "2.337.0" || got.SHA256 != arm || got.URL != URL("2.337.0", "arm64") {
		t.Fatalf("latest: %+v %v %v", got, ok, err)
	}
	if _, ok, err := Resolve(Latest, "", "", "amd64", nil, GitHubRepo); ok || err != nil {
		t.Fatalf("latest with nothing learned: %v %v", ok, err)
	}
	got, ok, err = Resolve("2.335.1", "https://mirror.example/r.tgz", x64, "amd64", releases, GitHubRepo)
	if err != nil || !ok || got.URL != "https://mirror.example/r.tgz" || got.SHA256 != x64 {
		t.Fatalf("mirror: %+v %v %v", got, ok, err)
	}
	got, ok, err = Resolve(Default, "", "", "amd64", nil, GitHubRepo)
	if err != nil || !ok || got.Version != Default || got.SHA256 != sha256s[Default]["amd64"] {
		t.Fatalf("pinned: %+v %v %v", got, ok, err)
	}
}

func TestARunnerVersionSpecIsCheckedAtPlanTime(t *testing.T) {
	for spec, want := range map[string]string{
		"latest": "", Default: "", "2.999.0": "not a release this provider pins", "v2.336.0": "must be",
		"2.300.0": "below " + Minimum,
	} {
		err := ValidateSpec(spec, false)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "runner_version")) {
			t.Errorf("%s: got %v, want %q", spec, err, want)
		}
	}
	if err := ValidateSpec("2.999.0", true); err != nil {
		t.Errorf("a mirrored version needs no pin: %v", err)
	}
}
