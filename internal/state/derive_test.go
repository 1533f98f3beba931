package state

import "testing"

func TestDeriveTimingsGivesTheProductionValuesForTheDefaultLifecycle(t *testing.T) {
	if got, want := DeriveTimings(DefaultLifecycle()), DefaultTimings(); got != want {
		t.Fatalf("DeriveTimings(default) = %+v, want DefaultTimings %+v", got, want)
	}
	if got, want := DeriveTimings(Lifecycle{}), DefaultTimings(); got != want {
		t.Fatalf("DeriveTimings(zero) = %+v, want DefaultTimings %+v", got, want)
	}
}

func TestDeriveTimingsFollowsTheRunningLeaseDownToEachFloor(t *testing.T) {
	d := DefaultTimings()
	for _, c := range []struct {
		name string
		in   Lifecycle
		want Timings
	}{
		{"a sandbox's one-minute lease takes every floor", Lifecycle{MaxRuntime: 60, IdleTTL: 600},
			Timings{MaxRuntime: 60, RuntimeCap: d.RuntimeCap, IdleTTL: 600, MaxAge: d.MaxAge, MaxUses: d.MaxUses,
				HeartbeatInterval: 1, StaleAfter: 10, CreatedTTL: 60, ClaimTTL: 60, BootTime: 10, MinRunningTime: 5, ReleaseWait: 30}},
		{"a ten-minute lease is a sixth of the production tempo", Lifecycle{MaxRuntime: 600},
			Timings{MaxRuntime: 600, RuntimeCap: d.RuntimeCap, IdleTTL: d.IdleTTL, MaxAge: d.MaxAge, MaxUses: d.MaxUses,
				HeartbeatInterval: 2, StaleAfter: 10, CreatedTTL: 100, ClaimTTL: 60, BootTime: 50, MinRunningTime: 50, ReleaseWait: 30}},
		{"a lease longer than an hour keeps the production tempo", Lifecycle{MaxRuntime: 4 * 3600, RuntimeCap: 8 * 3600, MaxUses: 1, MaxAge: 3600},
			Timings{MaxRuntime: 4 * 3600, RuntimeCap: 8 * 3600, IdleTTL: d.IdleTTL, MaxAge: 3600, MaxUses: 1,
				HeartbeatInterval: d.HeartbeatInterval, StaleAfter: d.StaleAfter, CreatedTTL: d.CreatedTTL, ClaimTTL: d.ClaimTTL,
				BootTime: d.BootTime, MinRunningTime: d.MinRunningTime, ReleaseWait: d.ReleaseWait}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := DeriveTimings(c.in)
			if got != c.want {
				t.Fatalf("DeriveTimings(%+v)\n got %+v\nwant %+v", c.in, got, c.want)
			}
			if got.StaleAfter < 2*got.HeartbeatInterval {
				t.Fatalf("stale after %d is under twice the heartbeat %d", got.StaleAfter, got.HeartbeatInterval)
			}
		})
	}
}

func TestLifecycleOfKeepsWhatTheUserSet(t *testing.T) {
	l := Lifecycle{MaxRuntime: 120, RuntimeCap: 7200, IdleTTL: 300, MaxAge: 600, MaxUses: 3}
	if got := LifecycleOf(DeriveTimings(l)); got != l {
		t.Fatalf("LifecycleOf(DeriveTimings(%+v)) = %+v", l, got)
	}
}
