package state

import (
	"maps"
	"strings"
	"testing"
	"time"
)

// The decision behind a repository's provisions in flight, row by row:
// leases past their time do not count, the same lease asking again is
// renewed, and 0 is no limit.
func TestAProvisionLeaseIsRefusedOnlyWhenTheRepositoryHoldsItsLimitInForce(t *testing.T) {
	const now = 1000
	for _, c := range []struct {
		name   string
		leases map[string]int64
		max    int
		ok     bool
		kept   int
	}{
		{"the first lease", nil, 2, true, 1},
		{"below the limit", map[string]int64{"a": now + 60}, 2, true, 2},
		{"at the limit", map[string]int64{"a": now + 60, "b": now + 60}, 2, false, 2},
		{"leases past their time are dropped, not counted", map[string]int64{"a": now - 1, "b": now}, 1, true, 1},
		{"the same lease asking again is renewed", map[string]int64{"me": now + 5, "b": now + 60}, 2, true, 2},
		{"no limit", map[string]int64{"a": now + 60, "b": now + 60, "c": now + 60}, 0, true, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := maps.Clone(c.leases)
			kept, n, ok := admitProvision(c.leases, now, "me", now+300, c.max)
			if ok != c.ok || n != c.kept {
				t.Fatalf("admit = %v with %d in force, want %v with %d", ok, n, c.ok, c.kept)
			}
			if ok && kept["me"] != now+300 {
				t.Fatalf("the lease taken: %v", kept)
			}
			if !maps.Equal(before, c.leases) {
				t.Fatal("the decision changed its input")
			}
		})
	}
}

// Issue 36: another repository allowed to invoke could hold every provision
// slot. With the limit, a repository's third provision is refused naming
// max_provisions_per_repository while another repository's goes on; a
// lease given back, or past its time (a killed invocation), frees a slot.
// (With the limit disabled — TakeProvisionLease ignoring max — the third
// lease is taken: "acme/flood's third provision was admitted".)
func TestARepositoryHoldsNoMoreProvisionsInFlightThanItsPoolAllows(t *testing.T) {
	s, clk := newStore(t)
	until := clk.Now().Add(time.Minute)
	must(t, s.TakeProvisionLease(ctx, testPool, "111", "acme/flood", "i1", until, 2))
	must(t, s.TakeProvisionLease(ctx, testPool, "111", "acme/flood", "i2", until, 2))
	err := s.TakeProvisionLease(ctx, testPool, "111", "acme/flood", "i3", until, 2)
	if err == nil {
		t.Fatal("acme/flood's third provision was admitted")
	}
	if ClauseOf(err) != ClauseMaxProvisions || !strings.Contains(err.Error(), "max_provisions_per_repository (2)") || !strings.Contains(err.Error(), "acme/flood") {
		t.Fatalf("refusal %v, want the clause %s naming the limit and the repository", err, ClauseMaxProvisions)
	}
	must(t, s.TakeProvisionLease(ctx, testPool, "222", "acme/app", "j1", until, 2))
	must(t, s.ReturnProvisionLease(ctx, testPool, "111", "i1"))
	must(t, s.TakeProvisionLease(ctx, testPool, "111", "acme/flood", "i3", until, 2))
	clk.Add(2 * time.Minute)
	must(t, s.TakeProvisionLease(ctx, testPool, "111", "acme/flood", "i4", clk.Now().Add(time.Minute), 1))
}

// A repository holds at most max_queued_per_repository places in a pool's
// capacity queue; a run already in it keeps its place, and another
// repository still joins. (With the limit disabled — Queue ignoring
// maxPlaces — the flood's third run joins: "the third waiter of acme/flood
// joined the queue".)
func TestARepositoryHoldsNoMorePlacesInTheCapacityQueueThanItsPoolAllows(t *testing.T) {
	s, clk := newStore(t)
	t0 := clk.Now()
	deadline := t0.Add(10 * time.Minute)
	must(t, s.Queue(ctx, testPool, "f-1", "111", t0, deadline, 2))
	must(t, s.Queue(ctx, testPool, "f-2", "111", t0.Add(time.Second), deadline, 2))
	must(t, s.Queue(ctx, testPool, "f-1", "111", t0, deadline, 2)) // keeps its place
	err := s.Queue(ctx, testPool, "f-3", "111", t0.Add(2*time.Second), deadline, 2)
	if err == nil {
		t.Fatal("the third waiter of acme/flood joined the queue")
	}
	if ClauseOf(err) != ClauseMaxQueued || !strings.Contains(err.Error(), "max_queued_per_repository (2)") {
		t.Fatalf("refusal %v, want the clause %s naming the limit", err, ClauseMaxQueued)
	}
	must(t, s.Queue(ctx, testPool, "a-1", "222", t0.Add(3*time.Second), deadline, 2))
	if n, err := s.Ahead(ctx, testPool, "a-1", t0.Add(3*time.Second)); err != nil || n != 2 {
		t.Fatalf("ahead of acme/app's run: %d %v, want the flood's two places only", n, err)
	}
}

// The settings are checked where the functions read them.
func TestFairShareSettingsAreValidated(t *testing.T) {
	for _, c := range []struct {
		prov, queued int
		want         string
	}{
		{0, 0, ""}, {3, 2, ""}, {3, 3, ""}, {0, 5, ""},
		{-1, 0, "maxProvisionsPerRepository"},
		{2, 3, "maxQueuedPerRepository: 3 is more than maxProvisionsPerRepository (2)"},
		{0, MaxSharePerRepository + 1, "maxQueuedPerRepository"},
	} {
		err := PoolConfig{MaxProvisionsPerRepository: c.prov, MaxQueuedPerRepository: c.queued}.validateShare()
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("provisions %d, queued %d: %v, want %q", c.prov, c.queued, err, c.want)
		}
	}
}
