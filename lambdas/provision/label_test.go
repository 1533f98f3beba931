package provision

import (
	"regexp"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// A run's label is ghr-<runId>-<16 random characters> unless its pool asks
// for the run id; two runs never share one, and a run item written before
// labels were minted answers its run id.
func TestARunsLabelIsMintedUnlessItsPoolAsksForTheRunID(t *testing.T) {
	shape := regexp.MustCompile(`^ghr-1234-[a-z2-7]{16}$`)
	seen := map[string]bool{}
	for _, mode := range []string{"", state.LabelMinted} {
		for range 1000 {
			l := newLabel("1234", mode)
			if !shape.MatchString(l) || seen[l] {
				t.Fatalf("label %q (mode %q): want ghr-1234-<16 base-32 characters>, never twice", l, mode)
			}
			seen[l] = true
		}
	}
	if l := newLabel("1234", state.LabelRunID); l != "1234" {
		t.Fatalf("run_id mode: %q", l)
	}
	if l := runLabel(&state.Run{ID: "77"}); l != "77" {
		t.Fatalf("a run item without a label: %q", l)
	}
}
