package lifecycle

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/imds"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// spotLoop watches the metadata service for a spot interruption notice,
// which halts the runner for good, and a rebalance recommendation, which
// stops nothing (sayRebalance). It looks at once when the agent starts: an
// agent restarted (after a crash) within the two minutes of a notice has
// little time left to say it.
func (a *Agent) spotLoop(ctx context.Context) {
	if a.Spot == nil {
		return
	}
	var rebalance *imds.Rebalance
	for ; ctx.Err() == nil; sleep(ctx, 5*time.Second) {
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
		a.sayInterrupted(ctx, notice)
		a.halt()
		return
	}
}

// sayInterrupted writes the notice on the record, under the assignment it
// holds. An agent that heard the notice before it first read its record
// (just started, DynamoDB slow) reads it now: the notice is what makes the
// control plane count the interruption and never pool the instance again,
// and it must not be lost for want of an assignment to bind it to.
func (a *Agent) sayInterrupted(ctx context.Context, notice *imds.SpotAction) {
	rec := a.lease.current()
	for rec == nil {
		// Until it is read or the agent ends: the instance has two
		// minutes at most, and nothing else is left for the agent to do.
		r, err := a.Store.Get(ctx, a.Key)
		if err == nil {
			rec = r
			break
		}
		a.Log.Warn("spot interruption notice waits for the own record", "err", err)
		if !sleep(ctx, time.Second) {
			return
		}
	}
	a.signal(ctx, rec, state.SignalInterrupted, notice.Action+" at "+notice.Time.Format(time.RFC3339))
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
