package lifecycle

import (
	"fmt"
	"sync"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// leaseClock is what the agent knows of its record's lease, measured on its
// monotonic clock (time since boot, see monoClock).
//
// The control plane writes a lease with its own clock: threshold, and
// leaseAt, when it set it. The agent's wall clock may be minutes off, so
// the agent never compares it with threshold to decide anything. It counts
// the lease's length, threshold - leaseAt, from the moment it first saw
// that lease (base): the control plane set it before, so the agent's
// deadline never comes before the control plane's. Only the agent's
// own extensions move threshold without a new leaseAt; each moves the
// deadline by as much. (leaseAt has whole seconds: two leases the control
// plane sets within a second share it, so an extension is recognised as a
// later threshold of the same running lease, state and assignment, which
// no control-plane transition writes.)
type leaseClock struct {
	mu  sync.Mutex
	rec *state.Instance // the newest record seen, by version
	// base is when the lease set at rec.LeaseAt was first seen.
	base time.Duration
	// m0 is when rec.Threshold counts as read: its first sight, or, after
	// an extension, the previous m0 moved by as much as the threshold, so
	// that threshold - m0 stays what it was when the lease was first seen
	// however long the writes took.
	m0 time.Duration
	// refused is a threshold whose extension the store refused: the lease
	// changed hands, lapsed or reached its cap; it is not tried again.
	refused int64
	// hintAt is when the wall clock last prompted an extension, which
	// rate-limits such extensions.
	hintAt time.Duration
	hinted bool
	// saved are the anchors an earlier agent process of this boot left.
	saved *anchors
}

// anchors are the lease clock's marks, kept in the state directory so that
// an agent restarted during a lease (systemd restarts it) neither counts the
// lease afresh nor loses track of its extensions. Times are since boot.
type anchors struct {
	Boot       string        `json:"boot"`
	State      state.State   `json:"state"`
	Assignment string        `json:"assignment"`
	LeaseAt    int64         `json:"leaseAt"`
	Threshold  int64         `json:"threshold"`
	Base       time.Duration `json:"base"`
	M0         time.Duration `json:"m0"`
}

// extends reports whether rec holds the lease the anchors describe, or
// that lease moved on by the agent's extensions alone.
func (a anchors) extends(rec *state.Instance) bool {
	return a.LeaseAt == rec.LeaseAt && a.State == rec.State && a.Assignment == rec.Assignment &&
		(a.Threshold == rec.Threshold || rec.State == state.Running && rec.Threshold > a.Threshold)
}

func anchorsOf(rec *state.Instance) anchors {
	return anchors{State: rec.State, Assignment: rec.Assignment, LeaseAt: rec.LeaseAt, Threshold: rec.Threshold}
}

func seconds(n int64) time.Duration { return time.Duration(n) * time.Second }

// observe takes a record read at now. A record older than one already seen
// (a read that raced an extension) is ignored. It reports whether the
// anchors changed.
func (l *leaseClock) observe(rec *state.Instance, now time.Duration) bool {
	if rec == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.rec
	if prev != nil && rec.Version < prev.Version {
		return false
	}
	l.rec = rec
	saved := l.saved
	l.saved = nil
	switch {
	case rec.Threshold == 0 || rec.LeaseAt == 0:
		return false // no lease, or a record written before leases carried leaseAt
	case prev != nil && prev.Threshold == rec.Threshold && anchorsOf(prev).extends(rec):
		return false // the same lease
	case prev != nil && anchorsOf(prev).extends(rec):
		// Extended: move m0 with the threshold, keep base.
		l.m0 += seconds(rec.Threshold - prev.Threshold)
		return true
	case prev == nil && saved != nil && saved.extends(rec) && saved.Base <= now:
		// An earlier agent process saw this lease; extensions that
		// succeeded after its last save moved the threshold alike.
		l.base, l.m0 = saved.Base, saved.M0+seconds(rec.Threshold-saved.Threshold)
		return true
	default:
		l.base, l.m0 = now, now // first sight of a new lease
		return true
	}
}

// current is the newest record seen, nil before the first.
func (l *leaseClock) current() *state.Instance {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec
}

func (l *leaseClock) anchors(boot string) anchors {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := anchors{}
	if l.rec != nil {
		a = anchorsOf(l.rec)
	}
	a.Boot, a.Base, a.M0 = boot, l.base, l.m0
	return a
}

// extension is one ExtendLease write to make.
type extension struct {
	assignment string
	seen, next int64
}

// due says whether the running lease should be extended now, and to what.
// holder is the assignment the runner is registered for; alive tells
// whether the runner process runs (asked only when the rest holds).
//
// The lease is extended when half a step has passed on the monotonic clock
// since the threshold was read, or earlier when the wall clock says less
// than half a step is left (at most every quarter step, so that a fast
// clock cannot run the lease away). The new threshold is the old one plus
// the time held (monotonic), or a step ahead of the wall clock if that is
// later (a restarted agent that first read the lease late), never past the
// cap: so it stays about a step ahead of the control plane's clock (plus
// the skew of a fast clock).
func (l *leaseClock) due(now time.Duration, wall int64, holder string, alive func() bool) (extension, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rec
	if r == nil || holder == "" || r.State != state.Running || r.Assignment != holder || r.LeaseAt == 0 || r.LeaseStep <= 0 ||
		r.Threshold <= r.LeaseAt || r.Threshold >= r.LeaseCap || r.Threshold == l.refused {
		return extension{}, false
	}
	step := seconds(r.LeaseStep)
	held := now - l.m0
	byMono := held >= step/2
	byHint := !byMono && 2*(r.Threshold-wall) < r.LeaseStep && (!l.hinted || now-l.hintAt >= step/4)
	if !byMono && !byHint || !alive() {
		return extension{}, false
	}
	next := min(r.LeaseCap, max(r.Threshold+int64(max(held, 0)/time.Second), wall+r.LeaseStep))
	if next <= r.Threshold {
		return extension{}, false
	}
	if byHint {
		l.hinted, l.hintAt = true, now
	}
	return extension{assignment: r.Assignment, seen: r.Threshold, next: next}, true
}

// refuse notes that the store refused to extend the lease from seen.
func (l *leaseClock) refuse(seen int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused = seen
}

// step is the running lease's step, 0 when there is none.
func (l *leaseClock) step() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rec == nil {
		return 0
	}
	return seconds(l.rec.LeaseStep)
}

// lapsed says whether the instance should terminate itself at now: the
// lease, counted from its first sight, passed more than grace ago. The
// control plane ends a lease by setting it before leaseAt: that passes at
// once, then the grace. A running lease whose runner is alive (holding) the
// agent extends itself; should the extensions fail (DynamoDB unreachable),
// the job goes on until the runtime cap: the control plane, which sees
// the lease lapse, ends the instance if it must; the agent is the
// fail-safe. A record from before leases carried leaseAt is judged as it
// used to be, by the wall clock.
func (l *leaseClock) lapsed(now time.Duration, wall time.Time, grace time.Duration, holding func(*state.Instance) bool) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rec
	if r == nil || r.Threshold == 0 {
		return "", false
	}
	end := time.Unix(r.Threshold, 0).UTC().Format(time.RFC3339)
	if r.LeaseAt == 0 {
		return fmt.Sprintf("lease of state %s ended at %s", r.State, end), wall.After(time.Unix(r.Threshold, 0).Add(grace))
	}
	length := r.Threshold - r.LeaseAt
	why := fmt.Sprintf("lease of state %s (%d s, ending %s by the control plane's clock) ran out", r.State, length, end)
	switch {
	case length <= 0:
		why = fmt.Sprintf("the control plane ended the lease of state %s (%s)", r.State, r.TerminatedReason)
	case r.State == state.Running && r.LeaseCap > r.LeaseAt && holding(r):
		length = max(length, r.LeaseCap-r.LeaseAt)
		why = fmt.Sprintf("the runtime cap (%d s after the run started) passed", r.LeaseCap-r.LeaseAt)
	}
	return why, now > l.base+seconds(length)+grace
}
