package provision

import (
	"regexp"
	"testing"
)

// A run's label is ghr-<runId>-<16 random characters>; two runs never
// share one.
func TestARunsLabelIsMintedAndNeverTwiceTheSame(t *testing.T) {
	shape := regexp.MustCompile(`^ghr-1234-[a-z2-7]{16}$`)
	seen := map[string]bool{}
	for range 2000 {
		l := newLabel("1234")
		if !shape.MatchString(l) || seen[l] {
			t.Fatalf("label %q: want ghr-1234-<16 base-32 characters>, never twice", l)
		}
		seen[l] = true
	}
}
