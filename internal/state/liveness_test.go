package state

import (
	"strings"
	"testing"
	"time"
)

// What a record may claim of its life, row by row: an honest record of
// each state claims nothing beyond what the control plane gave; a forged
// state, lease, cap or an age beyond every lease is named. (With
// LifeNotGiven returning "" the forged rows fail, each naming its want.)
func TestARecordClaimsNoLifeTheControlPlaneDidNotGiveIt(t *testing.T) {
	tm := DefaultTimings()
	now := time.Unix(1_800_000_000, 0)
	n := now.Unix()
	// honest is a record as the control plane leaves it in st, its lease
	// set a minute ago.
	honest := func(st State) *Instance {
		lease := longestLease(st, false, tm)
		if st == Running {
			lease = tm.MaxRuntime
		}
		i := &Instance{Pool: "linux", RunID: "run-1", State: st, PoolState: PoolState("linux", st), LaunchedAt: n - 3600,
			LeaseAt: n - 60, Threshold: n - 60 + lease, LeaseLimit: n - 60 + lease}
		if st == Running {
			i.LeaseCap = n - 60 + tm.RuntimeCap
			i.LeaseLimit = i.LeaseCap
		}
		return i
	}
	for _, c := range []struct {
		name  string
		inst  func() *Instance
		wants string // "" for a record that claims nothing
	}{
		{"a created record", func() *Instance { return honest(Created) }, ""},
		{"a claimed record", func() *Instance { return honest(Claimed) }, ""},
		// Provision gives a pre-warmed instance (no run) PrewarmGrace more:
		// refresh retired every one of them before this row.
		{"a pre-warmed created record with its grace", func() *Instance {
			i := honest(Created)
			i.RunID, i.Threshold = "", n+tm.CreatedTTL+int64(PrewarmGrace/time.Second)
			i.LeaseLimit = i.Threshold
			return i
		}, ""},
		{"a created record of a run with a pre-warmed one's grace", func() *Instance {
			i := honest(Created)
			i.LeaseLimit, i.Threshold = 0, n+tm.CreatedTTL+int64(PrewarmGrace/time.Second)
			return i
		}, "more than the longest created lease"},
		{"an idle record", func() *Instance { return honest(Idle) }, ""},
		{"a running record", func() *Instance { return honest(Running) }, ""},
		{"a running lease the agent extended to its cap", func() *Instance {
			i := honest(Running)
			i.Threshold = i.LeaseCap
			return i
		}, ""},
		{"an expired lease", func() *Instance {
			i := honest(Idle)
			i.Threshold = n - 1
			return i
		}, ""},
		{"a record from before leaseLimit, extended", func() *Instance {
			i := honest(Running)
			i.LeaseLimit, i.Threshold = 0, n+tm.MaxRuntime
			return i
		}, ""},
		{"an instance as old as the pool's leases allow", func() *Instance {
			i := honest(Idle)
			i.LaunchedAt = n - int64(LongestLife(tm)/time.Second)
			return i
		}, ""},
		{"a state the control plane did not give", func() *Instance {
			i := honest(Idle)
			i.State = Running
			return i
		}, "its record says running, the control plane made it idle"},
		{"a lease past the one given", func() *Instance {
			i := honest(Running)
			i.Threshold = i.LeaseLimit + 1
			return i
		}, "after the"},
		{"a lease a year ahead on a record from before leaseLimit", func() *Instance {
			i := honest(Idle)
			i.LeaseLimit, i.Threshold = 0, n+365*86400
			return i
		}, "more than the longest idle lease (15m0s) ahead"},
		{"an idle lease judged by the given state, not the forged one", func() *Instance {
			i := honest(Idle)
			i.State, i.LeaseLimit, i.Threshold = Running, 0, n+tm.MaxRuntime
			return i
		}, "more than the longest idle lease"},
		{"a running cap beyond the runtime cap", func() *Instance {
			i := honest(Running)
			i.LeaseCap = n + 10*tm.RuntimeCap
			return i
		}, "lease cap"},
		{"an instance older than any life on leases", func() *Instance {
			i := honest(Running)
			i.LaunchedAt = n - int64(LongestLife(tm)/time.Second) - 3600
			return i
		}, "longer than any instance lives"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := LifeNotGiven(c.inst(), tm, now)
			if c.wants == "" && got != "" {
				t.Fatalf("an honest record judged forged: %s", got)
			}
			if c.wants != "" && !strings.Contains(got, c.wants) {
				t.Fatalf("LifeNotGiven = %q, want it to say %q", got, c.wants)
			}
		})
	}
}

// Every lease the control plane writes carries its own copy, out of the
// instance's reach, and a running record's copy is its cap.
func TestEveryLeaseTheControlPlaneWritesCarriesLeaseLimit(t *testing.T) {
	for _, attr := range AgentAttributes {
		if attr == AttrLeaseLimit {
			t.Fatalf("%s is among the attributes an instance may write", AttrLeaseLimit)
		}
	}
	set := withState(nil, "linux", Idle, 100, 400)
	if set[AttrLeaseLimit] != int64(400) {
		t.Fatalf("withState sets %v, want leaseLimit 400", set)
	}
}
