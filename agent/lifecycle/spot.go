package lifecycle

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/imds"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// spotLoop watches the metadata service for a spot interruption notice,
// which halts the runner for good, and a rebalance recommendation, which
// stops nothing (sayRebalance).
func (a *Agent) spotLoop(ctx context.Context) {
	if a.Spot == nil {
		return
	}
	var rebalance *imds.Rebalance
	for sleep(ctx, 5*time.Second) {
		if rebalance == nil {
			if r, err := a.Spot.Rebalance(ctx); err == nil && r != nil {
				a.Log.Warn("rebalance recommendation: the runner keeps its job, the instance takes no next one", "noticeTime", r.NoticeTime)
				rebalance = r
			}
		}
		if rebalance != nil {
			a.sayRebalance(ctx, rebalance)
		}
		notice, err := a.Spot.Spot(ctx)
		if err != nil || notice == nil {
			continue
		}
		a.Log.Warn("spot interruption notice", "action", notice.Action, "at", notice.Time)
		a.interrupted.Store(true)
		if rec := a.lease.current(); rec != nil {
			a.signal(ctx, rec, state.SignalInterrupted, notice.Action+" at "+notice.Time.Format(time.RFC3339))
		}
		a.halt()
		return
	}
}

// sayRebalance writes the rebalance signal on the record until the record
// holds one (of any assignment: it outlives assignments, and the control
// plane claims no instance that has it). It stops nothing: a job running
// goes on, and the instance is retired once idle.
func (a *Agent) sayRebalance(ctx context.Context, r *imds.Rebalance) {
	rec := a.lease.current()
	if rec == nil || rec.State == state.Terminated || rec.HasRebalance() {
		return
	}
	a.signal(ctx, rec, state.SignalRebalance, "noticeTime "+r.NoticeTime.UTC().Format(time.RFC3339))
}
