package controlplane

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Outcome is what happened to one instance given back by a run.
type Outcome int

const (
	Untouched Outcome = iota // not this run's (any more), or gone
	Released                 // clean and back in the pool
	Expired                  // retired: refresh terminates it
)

// ReleaseInstance gives one instance of runID back. It reads the record
// itself (an index may be stale) and acts on its state: running → idle and
// into the pool once the agent confirmed it is clean (within cleanWait);
// created or claimed (a provision still under way) → expired. The wait is
// the pool's releaseWait.
func (d *Deps) ReleaseInstance(ctx context.Context, runID string, key state.Key) (Outcome, error) {
	inst, err := d.Store.Get(ctx, key)
	if state.IsNotFound(err) {
		return Untouched, nil
	}
	if err != nil {
		return Untouched, err
	}
	if inst.RunID != runID {
		return Untouched, nil
	}
	switch inst.State {
	case state.Created, state.Claimed:
		d.expire(ctx, inst.Ref(), "released before it was ready")
		return Expired, nil
	case state.Running:
	default:
		return Untouched, nil
	}
	p, err := d.PoolOf(ctx, inst) // never the pool or owner the record names
	if err != nil {
		return Untouched, err
	}
	var removal *state.Registration
	if !p.JIT() {
		// A just-in-time runner needs no token: the control plane deletes
		// it below.
		if removal, err = d.RemovalFor(ctx, inst.Owner); err != nil {
			// Without a remove token the agent cannot deregister cleanly:
			// retire the instance rather than pool a runner still known
			// to GitHub.
			d.expire(ctx, inst.Ref(), err.Error())
			return Expired, nil
		}
	}
	idle, err := d.Store.Release(ctx, inst.Ref(), runID, state.D(p.Timings.IdleTTL), removal)
	for attempt := 1; state.ClauseOf(err) == state.ClauseJIT && attempt < 5; attempt++ {
		// A configuration written since the read (a stream answer that was
		// slow): read again, so that the runners deleted below include it.
		// After the release no configuration of the old assignment can be
		// written, and a runner minted for one is deleted by its minter.
		if inst, err = d.Store.Get(ctx, key); err != nil {
			return Untouched, err
		}
		if inst.RunID != runID || inst.State != state.Running {
			return Untouched, nil
		}
		idle, err = d.Store.Release(ctx, inst.Ref(), runID, state.D(p.Timings.IdleTTL), removal)
	}
	switch state.ClauseOf(err) {
	case "":
		if err != nil {
			return Untouched, err
		}
	case state.ClauseLease:
		return Expired, nil // its lease ended: refresh terminates it
	default:
		return Untouched, nil // a concurrent release got it first
	}
	return d.finishRelease(ctx, inst, idle, p), nil
}

// FinishRelease finishes the release of an instance its releaser left
// idle and not pooled (a listener killed between the two): the same steps
// as ReleaseInstance after its write.
func (d *Deps) FinishRelease(ctx context.Context, idle *state.Instance, p *state.PoolConfig) Outcome {
	return d.finishRelease(ctx, idle, idle, p)
}

// finishRelease deletes the just-in-time runners the record named while
// it ran (ran: the record before the release; the idle one keeps them
// too), then pools the instance once its agent says it is clean, within
// the pool's releaseWait; else it is expired.
func (d *Deps) finishRelease(ctx context.Context, ran, idle *state.Instance, p *state.PoolConfig) Outcome {
	cleanWait := state.D(p.Timings.ReleaseWait)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl)-5*time.Second < cleanWait {
		cleanWait = time.Until(dl) - 5*time.Second
	}
	if p.JIT() {
		if err := d.deleteJITRunners(ctx, ran, cleanWait); err != nil {
			d.expire(ctx, idle.Ref(), err.Error())
			return Expired
		}
	}
	if pooled, _ := d.Repool(ctx, idle, p, cleanWait); pooled {
		return Released
	}
	return Expired
}
