package runnerrelease

import (
	"regexp"
	"strings"
	"testing"
)

func TestTheDefaultIsPinnedForBothArchitectures(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		url, sum, err := Tarball(Default, arch)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(sum) {
			t.Errorf("%s: checksum %q is not 64 lowercase hex digits", arch, sum)
		}
		platform := map[string]string{"amd64": "x64", "arm64": "arm64"}[arch]
		want := "https://github.com/actions/runner/releases/download/v" + Default + "/actions-runner-linux-" + platform + "-" + Default + ".tar.gz"
		if url != want {
			t.Errorf("%s: url %s, want %s", arch, url, want)
		}
	}
}

func TestEveryPinnedReleaseHasTwoDistinctChecksums(t *testing.T) {
	seen := map[string]string{}
	for v, sums := range sha256s {
		if len(sums) != 2 || sums["amd64"] == "" || sums["arm64"] == "" {
			t.Errorf("%s: want amd64 and arm64 checksums, have %v", v, sums)
		}
		for arch, s := range sums {
			if other, dup := seen[s]; dup {
				t.Errorf("%s/%s has the checksum of %s", v, arch, other)
			}
			seen[s] = v + "/" + arch
		}
	}
}

func TestAnUnpinnedVersionIsRefusedNamingTheWayOut(t *testing.T) {
	_, _, err := Tarball("2.300.0", "amd64")
	if err == nil || !strings.Contains(err.Error(), "runner_version") || !strings.Contains(err.Error(), "runner_tarball_sha256") || !strings.Contains(err.Error(), Default) {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := Tarball(Default, "386"); err == nil {
		t.Fatal("386 accepted")
	}
}

func TestVersionsAreNewestFirst(t *testing.T) {
	v := Versions()
	if v[0] != Default {
		t.Errorf("Versions()[0] = %s, want the default %s", v[0], Default)
	}
	if compare("2.336.0", "2.335.1") <= 0 || compare("2.40.0", "2.336.0") >= 0 || compare("2.336.0", "2.336.0") != 0 {
		t.Error("compare does not order dotted numbers")
	}
}
