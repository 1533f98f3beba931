package lifecycle

import (
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// fixedMono is a monotonic clock the test moves.
type fixedMono struct{ now time.Duration }

func (m *fixedMono) read() time.Duration { return m.now }

func TestTheLeaseAnchorsAreSavedWhenTheyChangeAndOnlyWithABootToCountFrom(t *testing.T) {
	rec := running(1000, 60, 3600)
	for _, c := range []struct {
		name  string
		boot  string
		recs  []state.Instance
		saves int
	}{
		{"a new lease is saved", "b1", []state.Instance{rec}, 1},
		{"the same lease read again is not saved again", "b1", []state.Instance{rec, rec}, 1},
		{"an extension is saved", "b1", []state.Instance{rec, func() state.Instance { r := rec; r.Threshold += 30; r.Version++; return r }()}, 2},
		{"a record older than one seen is not saved", "b1", []state.Instance{func() state.Instance { r := rec; r.Version = 9; return r }(), rec}, 1},
		{"no boot id: nothing is saved", "", []state.Instance{rec}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			mono := &fixedMono{now: time.Hour}
			l := leaseMachine{mono: mono.read, boot: c.boot}
			var saved []anchors
			for _, r := range c.recs {
				l.see(&r, func(a anchors) { saved = append(saved, a) })
				mono.now += time.Second
			}
			if len(saved) != c.saves {
				t.Fatalf("%d saves, want %d: %+v", len(saved), c.saves, saved)
			}
			if c.saves > 0 && saved[0].Boot != c.boot {
				t.Errorf("anchors saved for boot %q, want %q", saved[0].Boot, c.boot)
			}
		})
	}
}

func TestARestartedAgentCountsTheLeaseFromWhereItsPredecessorDidButNotAcrossABoot(t *testing.T) {
	rec := running(1000, 60, 3600)
	mono := &fixedMono{now: time.Hour}
	first := leaseMachine{mono: mono.read, boot: "b1"}
	var file anchors
	first.see(&rec, func(a anchors) { file = a })

	mono.now += 50 * time.Second // the agent restarts 50 s into a 60 s lease
	load := func(a *anchors) bool { *a = file; return true }
	for _, c := range []struct {
		boot     string
		lapsesAt time.Duration // after the restart, without grace
	}{
		{"b1", 10 * time.Second}, // counted from the first sight
		{"b2", 60 * time.Second}, // another boot: counted afresh
	} {
		again := leaseMachine{mono: mono.read, boot: c.boot}
		again.restore(load)
		r := rec
		again.see(&r, func(anchors) {})
		held := func(*state.Instance) bool { return false }
		wall := time.Unix(1000, 0)
		m := mono.now
		mono.now = m + c.lapsesAt - time.Second
		if _, lapsed := again.lapsed(wall, 0, held); lapsed {
			t.Errorf("boot %s: the lease lapsed before %s after the restart", c.boot, c.lapsesAt)
		}
		mono.now = m + c.lapsesAt + time.Second
		if _, lapsed := again.lapsed(wall, 0, held); !lapsed {
			t.Errorf("boot %s: the lease had not lapsed %s after the restart", c.boot, c.lapsesAt)
		}
		mono.now = m
	}
}
