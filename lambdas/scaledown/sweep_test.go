package scaledown

import (
	"slices"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TestGhostSweep: which listed runners are candidates, and which of those
// the records read after the listing confirm as ghosts.
func TestGhostSweep(t *testing.T) {
	in := Input{
		Instances: []fleet.Instance{{ID: "i-live"}, {ID: "i-retired"}, {ID: "i-norecord"}, {ID: "i-claimed"}},
		Records: map[string]*state.Instance{
			"i-live":    {ID: "i-live", State: state.Running},
			"i-retired": {ID: "i-retired", State: state.Terminated},
			"i-claimed": {ID: "i-claimed", State: state.Idle},
		},
		Runners: map[string][]github.Runner{"acme": {
			{ID: 1, Name: "ghr-1-i-live", Status: "offline"},    // a live record's: its decision's business
			{ID: 2, Name: "ghr-1-i-retired", Status: "offline"}, // ghost
			{ID: 3, Name: "ghr-2-i-retired", Status: "online"},  // online: not a ghost
			{ID: 4, Name: "ghr-3-i-retired", Status: "offline", Busy: true},
			{ID: 5, Name: "ghr-1-i-gone", Status: "offline"},     // not in EC2
			{ID: 6, Name: "ghr-1-i-norecord", Status: "offline"}, // in EC2 without a record
			{ID: 7, Name: "build-box", Status: "offline"},        // not ghrunner's
			{ID: 8, Name: "ghr-1-i-unknown", Status: "offline"},  // neither in EC2 nor in the table
			{ID: 9, Name: "ghr-1-i-new", Status: "offline"},      // launched after the listing
			{ID: 10, Name: "ghr-1-i-claimed", Status: "offline"}, // idle when read: its decision's
		}},
	}
	var ids []int64
	cands := map[int64]Ghost{}
	for _, g := range GhostCandidates(in) {
		ids = append(ids, g.RunnerID)
		cands[g.RunnerID] = g
	}
	if want := []int64{2, 5, 6, 8, 9}; !slices.Equal(ids, want) {
		t.Fatalf("candidates %v, want %v", ids, want)
	}
	// Read again after the listing.
	fresh := map[string]*state.Instance{
		"i-retired": {ID: "i-retired", State: state.Terminated},
		"i-gone":    {ID: "i-gone", State: state.Terminated},
		"i-new":     {ID: "i-new", State: state.Created},
	}
	inEC2 := map[string]bool{"i-retired": true, "i-norecord": true}
	want := map[int64]bool{2: true, 5: true, 6: true}
	for id, g := range cands {
		if _, ok := ConfirmGhost(g, fresh[g.InstanceID], inEC2[g.InstanceID]); ok != want[id] {
			t.Errorf("runner %d (%s): ghost %v, want %v", id, g.Name, ok, want[id])
		}
	}
}
