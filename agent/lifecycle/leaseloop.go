package lifecycle

import (
	"context"
	"errors"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The loops that keep the instance's record alive and its lease honest:
// the heartbeat, the lease's extensions and self-termination. They act on
// what the lease machine (leasemachine.go) decides.

// heartbeatLoop writes the record's heartbeat every HeartbeatInterval,
// sooner after a failure.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	failures := 0
	for {
		if err := a.Store.Heartbeat(ctx, a.Key); err != nil && ctx.Err() == nil {
			failures++
			if !state.IsNotFound(err) {
				a.Log.Warn("heartbeat", "err", err, "attempt", failures)
			}
			if !sleep(ctx, min(backoff(failures), a.Config.HeartbeatInterval.Duration)) {
				return
			}
			continue
		}
		failures = 0
		if !sleep(ctx, a.Config.HeartbeatInterval.Duration) {
			return
		}
	}
}

// see takes a record read from the store or returned by a write; the lease
// machine keeps the newest, and lease.json its anchors.
func (a *Agent) see(rec *state.Instance) {
	a.lease.see(rec, func(an anchors) { a.saveFile("lease.json", an) })
}

// loadAnchors restores the lease clock's anchors an earlier agent process of
// this boot saved.
func (a *Agent) loadAnchors() {
	a.lease.restore(func(saved *anchors) bool { return a.loadFile("lease.json", saved) })
}

func (a *Agent) runnerAlive() bool {
	alive, _ := a.Runner.Alive()
	return alive
}

// holding reports whether the runner is registered for rec's assignment
// and its process runs.
func (a *Agent) holding(rec *state.Instance) bool {
	reg := a.current.Load()
	return reg != nil && reg.Assignment == rec.Assignment && a.runnerAlive()
}

// leaseLoop keeps the running lease ahead of the control plane's clock
// while the runner registered for it is alive (see leaseClock.due). It reads
// no record itself: the main loop's reads and the answers to its own writes
// keep the lease clock current. It checks often (leaseMachine.poll).
func (a *Agent) leaseLoop(ctx context.Context) {
	failures := 0
	for {
		wait := a.lease.poll()
		if failures > 0 {
			wait = backoff(failures)
		}
		if !sleep(ctx, wait) {
			return
		}
		holder := ""
		if reg := a.current.Load(); reg != nil {
			holder = reg.Assignment
		}
		ext, ok := a.lease.due(a.Now(), holder, a.runnerAlive)
		if !ok {
			failures = 0
			continue
		}
		rec, err := a.Store.ExtendLease(ctx, a.Key, ext.assignment, ext.seen, ext.next)
		var refused *state.ConditionError
		switch {
		case err == nil:
			failures = 0
			a.see(rec)
			a.Log.Info("lease extended", "assignment", ext.assignment, "from", ext.seen, "to", ext.next)
		case errors.As(err, &refused):
			// The lease changed hands, was ended by the control plane or
			// reached its cap: not extended again. Should the refusal only
			// hide an earlier write of ours whose answer was lost, the record
			// shows the new threshold, which is extended in turn.
			failures = 0
			a.lease.refuse(ext.seen)
			a.see(refused.Current)
			a.Log.Warn("lease extension refused", "assignment", ext.assignment, "err", err)
		case ctx.Err() != nil:
			return
		default:
			failures++
			a.Log.Warn("extend lease", "assignment", ext.assignment, "err", err, "attempt", failures)
		}
	}
}

// selfTerminationLoop ends the instance when its lease ran out (see
// leaseClock.lapsed). It needs no DynamoDB call, so it works while the
// store is unreachable.
func (a *Agent) selfTerminationLoop(ctx context.Context) {
	every := min(a.Config.HeartbeatInterval.Duration, 15*time.Second)
	for sleep(ctx, every) {
		if why, ok := a.lease.lapsed(a.Now(), a.Config.ClockSkew.Duration, a.holding); ok {
			a.halt()
			a.terminateSelf(ctx, why)
			return
		}
	}
}
