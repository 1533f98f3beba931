package refresh

import (
	"context"
	"fmt"
	"slices"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// adoptBusy decides an expired created or claimed record of a scale set's
// standing run before refresh terminates it. A workflow's jobs wait for
// provision's answer, so a claim that outlived its lease runs nothing of
// them; a scale set's job starts the moment its just-in-time runner is
// online, perhaps before the listener marked the instance running. If the
// listener died then and stayed away past the claim's lease, its
// successor is too late to adopt the claim (listener finishClaim), and
// terminating would kill the job. So when GitHub shows a runner the
// control plane minted for the record busy, the record is adopted as
// running (state.Store.Adopt, as provision's keepBusy does) and the
// adopted record returned: the listener releases it when the job ends, or
// its running lease ends it. keep says to leave the record alone this
// refresh (the run or the adoption could not be read or written: the
// refresh fails and the next one looks again). Otherwise the record ends
// as its lease says.
//
// Only records that name minted runners pay for a read of their run, and
// only a scale set's pay for GitHub: expired claims are rare.
func (r *refresher) adoptBusy(ctx context.Context, p *state.PoolConfig, inst *state.Instance) (adopted *state.Instance, keep bool) {
	if inst.State != state.Created && inst.State != state.Claimed || len(inst.JITRunners) == 0 {
		return nil, false
	}
	run, err := storeOf(r.d).GetRun(ctx, inst.RunID)
	if state.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		// Not knowing whose run it is is a stale view: no termination on
		// it (the package's invariant).
		r.fail(fmt.Errorf("instance %s past its lease left for the next refresh: read its run %s: %w", inst.ID, inst.RunID, err))
		return nil, true
	}
	if run.ScaleSet == "" {
		return nil, false
	}
	busy, err := r.busyRunner(ctx, inst)
	if err != nil {
		// Terminated as before: the claim's lease is the only bound on a
		// claim its listener no longer answers for, and keeping it on an
		// answer refresh did not get would let a GitHub outage (or a rate
		// limit spent) keep instances past every lease for as long as it
		// lasts. A job on it then is lost, as it was before adoption.
		r.d.Log.Warn("a scale set's claim past its lease terminated: its runners could not be read", "pool", p.Name, "instanceId", inst.ID, "runId", inst.RunID, "err", err)
		return nil, false
	}
	if busy == nil {
		return nil, false
	}
	t := p.Timings
	adopted, err = storeOf(r.d).Adopt(ctx, inst.Ref(), state.D(t.MaxRuntime), state.D(t.RuntimeCap))
	switch {
	case err == nil:
		reason := fmt.Sprintf("%s past its lease for scale set %s's run %s: its runner %s runs a job", inst.State, run.ScaleSet, inst.RunID, busy.Name)
		r.out.Adopted = append(r.out.Adopted, Decision{inst.ID, p.Name, reason, KindAdopted})
		r.d.Log.Warn("adopted a scale set's claim whose runner runs a job past its lease", "pool", p.Name, "instanceId", inst.ID, "runId", inst.RunID, "runner", busy.Name)
		return adopted, false
	case state.ClauseOf(err) != "":
		// The record moved on since it was read (its listener took it as
		// running, or released it): the termination's own condition on
		// what the control plane gave decides.
		return nil, false
	default:
		r.fail(fmt.Errorf("instance %s, whose runner %s runs a job, not adopted (the next refresh tries again): %w", inst.ID, busy.Name, err))
		return nil, true
	}
}

// busyRunner returns a runner of inst that GitHub shows running a job, or
// nil. It asks only about the runners the control plane minted for the
// record's assignment (jitRunners, newest first): the instance may write
// githubRunnerId and registration, and agent-writable attributes are
// requests, not authority (docs/security.md C25). GitHub's answer must
// also name the runner after the instance. A runner GitHub no longer has
// is not busy.
func (r *refresher) busyRunner(ctx context.Context, inst *state.Instance) (*github.Runner, error) {
	for _, id := range slices.Backward(inst.JITRunners) {
		rn, err := r.d.GitHub.GetRunner(ctx, inst.Owner, id)
		if github.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("runner %d: %w", id, err)
		}
		if rn.Busy && github.NameMatchesInstance(rn.Name, inst.ID) {
			return &rn, nil
		}
	}
	return nil, nil
}
