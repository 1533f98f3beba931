package refresh

import (
	"context"
	"fmt"
	"sort"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// How refresh ends an instance: silent agents, expiries and terminations,
// and the runner each one leaves at GitHub.

// silent expires an instance whose agent stopped beating, unless it is
// running a job as far as GitHub can tell: heartbeat writes can be
// throttled for longer than the stale limit while the runner works on.
func (r *refresher) silent(ctx context.Context, p *state.PoolConfig, inst *state.Instance) {
	reason := fmt.Sprintf("heartbeat silent for over %ds", p.Timings.StaleAfter)
	if inst.Heartbeats == 0 {
		reason = "no heartbeat after the boot time"
	}
	if inst.State == state.Running && inst.GithubRunnerID != 0 {
		rn, err := r.d.GitHub.GetRunner(ctx, inst.Owner, inst.GithubRunnerID)
		switch {
		case err != nil && !github.IsNotFound(err):
			r.out.Kept = append(r.out.Kept, Decision{inst.ID, p.Name, reason + "; kept: its runner could not be read: " + err.Error(), KindKept})
			return
		case err == nil && rn.Status == "online" && github.NameMatchesInstance(rn.Name, inst.ID):
			r.out.Kept = append(r.out.Kept, Decision{inst.ID, p.Name, reason + "; kept: its runner is online on GitHub", KindKept})
			return
		}
	}
	r.expire(ctx, p, inst, KindStale, reason)
}

// expire ends inst's lease (refresh terminates it next) and notes it; a
// write refused because the record moved on is no failure.
func (r *refresher) expire(ctx context.Context, p *state.PoolConfig, inst *state.Instance, kind Kind, reason string) {
	if _, err := storeOf(r.d).Expire(ctx, inst.Ref(), reason); err == nil {
		r.out.Expired = append(r.out.Expired, Decision{inst.ID, p.Name, reason, kind})
	} else if state.ClauseOf(err) == "" {
		r.fail(err)
	}
}

// terminate ends instances through controlplane.Retire (records marked
// first, conditionally; then EC2; then their runners) and notes them.
func (r *refresher) terminate(ctx context.Context, insts []*state.Instance, reason string, ifExpired bool) error {
	// The records were read whole (GetMany): conditional on what the
	// control plane gave them, never on the assignment the instance may
	// rewrite.
	retired, err := r.d.Retire(ctx, r.ec2, insts, reason, ifExpired)
	sort.Slice(retired, func(i, j int) bool { return retired[i].ID < retired[j].ID })
	for _, inst := range retired {
		why := reason
		if inst.TerminatedReason != "" {
			why = reason + ": " + inst.TerminatedReason
		}
		r.out.Terminated = append(r.out.Terminated, Decision{inst.ID, inst.Pool, why, KindExpired})
	}
	return err
}

// deleteRunner deletes the runners of an instance EC2 no longer has:
// every one its record names (controlplane.RunnerIDs).
func (r *refresher) deleteRunner(ctx context.Context, inst *state.Instance) {
	if err := r.d.DeleteInstanceRunners(ctx, inst); err != nil {
		r.fail(err)
	}
}

// failedNow says whether the agent signalled UD_FAILED for the record's
// current assignment.
func failedNow(inst *state.Instance) bool {
	_, ok := inst.SignalFor(state.SignalFailed)
	return ok
}
