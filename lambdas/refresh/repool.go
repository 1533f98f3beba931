package refresh

import (
	"context"
	"fmt"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/pool"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Pooling again what a release (or a refresh) left clean and idle without
// its pool message.

// repool sends the pool message a release (or a refresh) could not; in a
// draining pool it retires the instance instead.
func (r *refresher) repool(ctx context.Context, p *state.PoolConfig, inst *state.Instance) {
	if p.Draining {
		r.expire(ctx, p, inst, KindRetired, "pool draining")
		return
	}
	// What release's pooling refuses (controlplane.Repool), refused here
	// too: a spot instance EC2 is taking back, or recommends rebalancing.
	if _, interrupted := inst.Signals[state.SignalInterrupted]; interrupted || inst.HasRebalance() {
		r.expire(ctx, p, inst, KindRetired, "spot interruption notice or rebalance recommendation")
		return
	}
	if p.JIT() {
		// A release that died before deleting its run's just-in-time
		// runners leaves them registered, offline, under the run's label;
		// the next run's runner would sit beside them. An idle instance has
		// no runner of its own: any named after it is left over.
		busy, err := r.deleteLeftoverRunners(ctx, inst)
		if err != nil {
			r.fail(fmt.Errorf("repool %s: %w (the next refresh tries again)", inst.ID, err))
			return
		}
		if busy != "" {
			r.expire(ctx, p, inst, KindExpired, "runner "+busy+" of an earlier run is still busy")
			return
		}
	}
	msg := pool.Message{InstanceID: inst.ID, Pool: inst.Pool, InstanceType: inst.InstanceType, UsageClass: inst.UsageClass, IdleUntil: inst.Threshold}
	if err := r.d.Queue(p).Send(ctx, msg); err != nil {
		r.fail(err)
		return
	}
	if _, err := storeOf(r.d).MarkPooled(ctx, inst.Ref()); err == nil {
		r.out.Repooled = append(r.out.Repooled, Decision{inst.ID, p.Name, "clean idle instance had no pool message", KindRepooled})
	}
}

// deleteLeftoverRunners deletes the runners of owner named after an idle
// instance of a just-in-time pool. It returns the name of one still busy
// (the instance must not be pooled), or the error that left some in place.
func (r *refresher) deleteLeftoverRunners(ctx context.Context, inst *state.Instance) (busy string, err error) {
	runners, listed := r.runners[inst.Owner]
	if !listed {
		if runners, err = r.d.GitHub.ListRunners(ctx, inst.Owner); err != nil {
			return "", fmt.Errorf("list runners of %s: %w", inst.Owner, err)
		}
		if r.runners == nil {
			r.runners = map[string][]github.Runner{}
		}
		r.runners[inst.Owner] = runners
	}
	for _, rn := range runners {
		if id, ok := github.InstanceOf(rn.Name); !ok || id != inst.ID {
			continue
		}
		if rn.Busy {
			return rn.Name, nil
		}
		if err := r.d.GitHub.DeleteRunner(ctx, inst.Owner, rn.ID); err != nil {
			return "", fmt.Errorf("delete leftover runner %s: %w", rn.Name, err)
		}
	}
	return "", nil
}
