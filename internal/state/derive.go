package state

// A pool's user decides five things about its instances' lives (Lifecycle):
// how long a run's lease lasts and how long a run may hold an instance at
// most, how long an idle instance waits for work, how old and how used an
// instance may get before it is retired. Every other timing is an internal
// of the control loop and derived here, in one place, from those five.
//
// Invariants:
//   - DeriveTimings(DefaultLifecycle()) == DefaultTimings(): the production
//     values are the derivation's, not a second table.
//   - The derived control-loop timings follow the running lease: at the
//     default lease (one hour) or longer they are the production values; a
//     shorter lease shortens each in proportion, down to a floor below which
//     the real thing does not work (a sandbox's 60 s lease gives 1 s
//     heartbeats and one-minute leases for new and claimed instances).
//   - StaleAfter is always at least twice the heartbeat, so a single late
//     heartbeat never retires a healthy instance.

// Lifecycle is what a pool's user sets about its instances' lives, in
// seconds (MaxUses in runs). Zero means the default.
type Lifecycle struct {
	MaxRuntime int64
	RuntimeCap int64
	IdleTTL    int64
	MaxAge     int64
	MaxUses    int
}

// DefaultLifecycle is the Lifecycle of a pool that sets none.
func DefaultLifecycle() Lifecycle {
	d := DefaultTimings()
	return Lifecycle{MaxRuntime: d.MaxRuntime, RuntimeCap: d.RuntimeCap, IdleTTL: d.IdleTTL, MaxAge: d.MaxAge, MaxUses: d.MaxUses}
}

// LifecycleOf is the part of t a user sets.
func LifecycleOf(t Timings) Lifecycle {
	return Lifecycle{MaxRuntime: t.MaxRuntime, RuntimeCap: t.RuntimeCap, IdleTTL: t.IdleTTL, MaxAge: t.MaxAge, MaxUses: t.MaxUses}
}

// Floors of the derived timings: the least each may be, whatever the lease.
const (
	// A heartbeat faster than a second only loads the table.
	minHeartbeat = 1
	// Below 10 s one slow DynamoDB write or a paused instance would read
	// as a silent agent.
	minStaleAfter = 10
	// A new instance boots, installs the agent and registers its runner:
	// under a minute even moto's instances and the fake GitHub need.
	minCreatedTTL = 60
	// A claimed instance's agent sees the claim on its next poll and
	// registers for the new run: a GitHub round trip or two.
	minClaimTTL = 60
	// No instance record exists before the user data starts the agent.
	minBootTime = 10
	// Scale-down keeps an instance at least this long.
	minMinRunningTime = 1
	// The agent's deregistration is a GitHub API call after the runner
	// stopped: release waits at least this long for it.
	minReleaseWait = 30
)

// DeriveTimings is the pool's full Timings from what its user set (zero
// fields take DefaultLifecycle's).
func DeriveTimings(l Lifecycle) Timings {
	d, u := DefaultTimings(), DefaultLifecycle()
	fill := func(v, def int64) int64 {
		if v == 0 {
			return def
		}
		return v
	}
	l.MaxRuntime, l.RuntimeCap, l.IdleTTL, l.MaxAge = fill(l.MaxRuntime, u.MaxRuntime), fill(l.RuntimeCap, u.RuntimeCap), fill(l.IdleTTL, u.IdleTTL), fill(l.MaxAge, u.MaxAge)
	if l.MaxUses == 0 {
		l.MaxUses = u.MaxUses
	}
	// scaled is def in proportion to the running lease against the
	// default one, never above def (longer leases keep the production
	// tempo: the loop's checks do not get slower for long jobs) nor below
	// floor.
	scaled := func(def, floor int64) int64 {
		return max(floor, def*min(l.MaxRuntime, d.MaxRuntime)/d.MaxRuntime)
	}
	t := Timings{MaxRuntime: l.MaxRuntime, RuntimeCap: l.RuntimeCap, IdleTTL: l.IdleTTL, MaxAge: l.MaxAge, MaxUses: l.MaxUses}
	// The agent renews the running lease on its heartbeat: a shorter
	// lease needs proportionally more frequent beats to be renewed as
	// many times before it runs out.
	t.HeartbeatInterval = scaled(d.HeartbeatInterval, minHeartbeat)
	// Four missed heartbeats (the production 60 s at 15 s beats).
	t.StaleAfter = max(minStaleAfter, 4*t.HeartbeatInterval)
	// The leases of new and claimed instances, the boot time that shields
	// unrecorded instances from orphan checks, the least age scale-down
	// keeps and release's wait for a clean deregistration: each waits on
	// the same loop the heartbeat paces, so each follows it.
	t.CreatedTTL = scaled(d.CreatedTTL, minCreatedTTL)
	t.ClaimTTL = scaled(d.ClaimTTL, minClaimTTL)
	t.BootTime = scaled(d.BootTime, minBootTime)
	t.MinRunningTime = scaled(d.MinRunningTime, minMinRunningTime)
	t.ReleaseWait = scaled(d.ReleaseWait, minReleaseWait)
	return t
}
