package refresh

import (
	"context"
	"fmt"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Pre-warming: within an idle window, refresh tops each pool up to the
// window's idle count by launching instances that belong to no run. Each
// boots and runs its pre-runner script; when its agent says UD_OK, a
// refresh moves it to idle (created → idle, bound to its assignment); its
// agent then confirms it clean, and the next refresh sends its pool
// message. From there it is an idle instance like any released one: a
// provision claims it, scale-down trims it outside the window.
//
// Invariants:
//   - never above the window's idle count: what is idle or still warming
//     (created without a run, lease live) counts, and only the difference
//     is launched; never above max_instances: the launch reserves against
//     the pool's cap as a provision's does;
//   - a pool whose records could not be read is not topped up (pool()
//     returns before);
//   - a pre-warmed instance whose script failed never joins the pool.

// warming reports whether inst was launched with no run and has not joined
// the pool yet.
func warming(inst *state.Instance) bool { return inst.State == state.Created && inst.RunID == "" }

// joinPool moves a pre-warmed instance to idle once its agent said UD_OK for
// its assignment, and expires one whose pre-runner script failed.
func (r *refresher) joinPool(ctx context.Context, p *state.PoolConfig, inst *state.Instance) {
	if s, failed := inst.SignalFor(state.SignalFailed); failed {
		r.expire(ctx, p, inst, KindRetired, "pre-warmed, but its pre-runner script failed: "+s.Detail)
		return
	}
	if _, ok := inst.SignalFor(state.SignalOK); !ok {
		return // still booting
	}
	if _, err := storeOf(r.d).JoinPool(ctx, inst.Ref(), state.D(p.Timings.IdleTTL)); err == nil {
		r.out.Joined = append(r.out.Joined, Decision{inst.ID, p.Name, "pre-warmed: its pre-runner script succeeded", KindJoined})
	} else if state.ClauseOf(err) == "" {
		r.fail(err)
	}
}

// topUp launches what the pool's active idle window wants beyond warm, the
// pool's instances that are idle or warming, within what max_instances
// leaves beside the live records (the launch's reservation then counts
// EC2 too).
func (r *refresher) topUp(ctx context.Context, p *state.PoolConfig, warm, live int) {
	if r.prewarm == nil || p.Draining {
		return
	}
	w, ok := p.ActiveWindow(r.now)
	if !ok {
		return
	}
	n := min(w.IdleCount-warm, p.MaxInstances-live)
	if n <= 0 {
		return
	}
	ids, err := r.prewarm(ctx, p, n)
	reason := fmt.Sprintf("idle window %q keeps %d idle, %d were idle or warming", w.Cron, w.IdleCount, warm)
	for _, id := range ids {
		r.out.Prewarmed = append(r.out.Prewarmed, Decision{id, p.Name, reason, KindPrewarmed})
	}
	switch {
	case state.IsPoolAtCap(err):
		r.d.Log.Info("pre-warm stopped at the pool's cap", "pool", p.Name, "launched", len(ids), "err", err)
	case err != nil:
		r.fail(fmt.Errorf("pre-warm pool %s: %w", p.Name, err))
	}
}
