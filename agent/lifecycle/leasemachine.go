package lifecycle

import (
	"sync"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// leaseMachine is the agent's side of its record's lease: what it last
// saw of it (leaseClock, lease.go), the monotonic clock it counts the lease
// on, and the anchors it leaves in lease.json for an agent restarted in
// the same boot. The Agent's loops (leaseloop.go) act on its decisions:
// leaseLoop extends when it says an extension is due, selfTerminationLoop
// terminates when it says the lease lapsed.
//
// Invariants:
//   - the lease is counted on the monotonic clock since boot, never on the
//     wall clock (leaseClock says how); the wall clock only prompts an
//     earlier extension;
//   - a record older than one seen is ignored, so an answer that raced an
//     extension never moves the lease back;
//   - lease.json always holds the anchors of the newest record seen: saves
//     are made one at a time, each of what the clock holds at that moment;
//   - anchors saved in another boot (or with no boot id) are never used:
//     the monotonic clock restarts at boot.
//
// Synchronisation: one mutex per part. leaseClock's guards what was seen
// (the main loop, leaseLoop, selfTerminationLoop and spotLoop all read it);
// saveMu orders the writes of lease.json. mono and boot are set once,
// before the loops start, and only read afterwards.
type leaseMachine struct {
	clock leaseClock
	// mono is the clock leases are measured with (see monoClock); boot
	// names the boot it counts from ("": anchors are not kept).
	mono   func() time.Duration
	boot   string
	saveMu sync.Mutex
}

// monoClock returns the clock leases are measured with, time since boot,
// and the boot it counts from ("" when it cannot tell: then anchors are not
// kept across restarts).
func monoClock(bootIDFile string) (func() time.Duration, string) {
	origin, ok := sinceBoot()
	boot := bootID(bootIDFile)
	start := time.Now()
	if !ok || boot == "" {
		return func() time.Duration { return time.Since(start) }, ""
	}
	return func() time.Duration {
		if d, ok := sinceBoot(); ok {
			return d
		}
		return origin + time.Since(start) // Go's monotonic clock: never backwards
	}, boot
}

// see takes a record read from the store or returned by a write, and saves
// the anchors when they changed.
func (l *leaseMachine) see(rec *state.Instance, save func(anchors)) {
	if !l.clock.observe(rec, l.mono()) || l.boot == "" {
		return
	}
	l.saveMu.Lock()
	defer l.saveMu.Unlock()
	save(l.clock.anchors(l.boot))
}

// restore takes the anchors an earlier agent process of this boot saved;
// load reads lease.json, reporting whether it could.
func (l *leaseMachine) restore(load func(*anchors) bool) {
	var saved anchors
	if l.boot != "" && load(&saved) && saved.Boot == l.boot {
		l.clock.mu.Lock()
		l.clock.saved = &saved
		l.clock.mu.Unlock()
	}
}

// current is the newest record seen, nil before the first.
func (l *leaseMachine) current() *state.Instance { return l.clock.current() }

// due says whether the running lease should be extended now (leaseClock.due).
func (l *leaseMachine) due(wall time.Time, holder string, alive func() bool) (extension, bool) {
	return l.clock.due(l.mono(), wall.Unix(), holder, alive)
}

// refuse notes that the store refused to extend the lease from seen.
func (l *leaseMachine) refuse(seen int64) { l.clock.refuse(seen) }

// poll is how often leaseLoop asks whether an extension is due: often
// (no DynamoDB call unless one is), since tests use leases of a few
// seconds.
func (l *leaseMachine) poll() time.Duration {
	return min(time.Second, max(100*time.Millisecond, l.clock.step()/16))
}

// lapsed says whether the instance should terminate itself now, and why
// (leaseClock.lapsed).
func (l *leaseMachine) lapsed(wall time.Time, grace time.Duration, holding func(*state.Instance) bool) (string, bool) {
	return l.clock.lapsed(l.mono(), wall, grace, holding)
}
