package refresh

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// A job lost to a spot interruption (state/rerun.go). When refresh closes
// the record of an instance EC2 took back after its notice, the run the
// instance served is told. A scale set's standing run knows its job's
// workflow run: that run's failed jobs are re-run once, through GitHub's
// rerun-failed-jobs, once the workflow run has completed (GitHub refuses
// before, with a 403). The re-run goes to the scale set like any job and
// lands on whichever runner it makes: on-demand while the pool's spot
// breaker is open and the pool allows it. A workflow's own run (provision
// mode) is not re-run: its jobs name the run's label, whose runners its
// release took away (docs/operations.md).
//
// Why the run's failed jobs and not the one job (POST
// .../actions/jobs/{job_id}/rerun): that route takes the job's REST id,
// and the scale set's messages name a job by the Actions service's GUID
// only (scaleset JobMessageBase.JobID); finding the REST id would mean
// listing the run's jobs by runner name, one more read per interruption
// for a re-run that still must wait for the run to complete.

// Rerunner asks GitHub to re-run a workflow run's failed jobs
// (*github.Client).
type Rerunner interface {
	RerunFailedJobs(ctx context.Context, repo string, runID int64) error
}

// Rerun kinds (Output.Reruns; the SpotJobReruns metric's result).
const (
	KindRerunPending Kind = "rerun-pending" // asked for; waits for its workflow run to complete
	KindRerun        Kind = "rerun"         // GitHub accepted the re-run
	KindNotRerun     Kind = "not-rerun"     // a workflow's own run, or a run with no job recorded
	KindRerunFailed  Kind = "rerun-failed"  // GitHub refused for good, the outcome is unknown, or the run never completed
)

const (
	// rerunEvery spaces the tries of one re-run while GitHub refuses it.
	rerunEvery = 5 * time.Minute
	// rerunWithin: a workflow run that has not completed by then is given
	// up (a self-hosted job may run 5 days; one lost to spot is mostly
	// re-run within the hour).
	rerunWithin = 24 * time.Hour
)

// lostJob tells the run inst served that EC2 took it back, and asks for the
// re-run of its job where that is possible. inst's interruption notice
// (sig) names the assignment it came under: the record's current one (the
// run still held it), or the one its release replaced (LastRunID).
func (r *refresher) lostJob(ctx context.Context, inst *state.Instance, sig state.Signal) {
	runID := inst.RunID
	if sig.Assignment != inst.Assignment {
		runID = inst.LastRunID
	}
	if runID == "" {
		return // interrupted while idle: no job lost
	}
	run, err := storeOf(r.d).GetRun(ctx, runID)
	if state.IsNotFound(err) {
		return
	}
	if err != nil {
		r.fail(fmt.Errorf("run %s of interrupted instance %s: %w", runID, inst.ID, err))
		return
	}
	kind, note := KindNotRerun, "its job is not re-run: a workflow's own run serves its jobs on the run's label, whose runners its release took away; re-run all its jobs"
	switch {
	case run.ScaleSet != "" && run.Job == nil:
		note = "its job is not re-run: no job was recorded started on it"
	case run.ScaleSet != "":
		rr := state.Rerun{Repository: run.Job.Repository, WorkflowRunID: run.Job.WorkflowRunID, Pool: inst.Pool, Run: run.ID}
		created, err := storeOf(r.d).RequestRerun(ctx, rr)
		if err != nil {
			r.fail(err)
			return
		}
		kind, note = KindRerunPending, fmt.Sprintf("the failed jobs of workflow run %d of %s are re-run once it completes", rr.WorkflowRunID, rr.Repository)
		if !created {
			kind, note = "", fmt.Sprintf("the failed jobs of workflow run %d of %s were asked for a re-run already", rr.WorkflowRunID, rr.Repository)
		}
	}
	if _, err := storeOf(r.d).NoteRunInterrupted(ctx, run.ID, inst.ID, note); err != nil {
		r.fail(fmt.Errorf("note the interruption in run %s: %w", run.ID, err))
	}
	if kind != "" {
		r.out.Reruns = append(r.out.Reruns, Decision{inst.ID, inst.Pool, "run " + run.ID + ": " + note, kind})
	}
}

// rerunPending asks GitHub for each pool's pending re-runs, each at most
// every rerunEvery.
func (r *refresher) rerunPending(ctx context.Context, pools []state.PoolConfig, gh Rerunner) {
	for _, p := range pools {
		pending, err := storeOf(r.d).PendingReruns(ctx, p.Name)
		if err != nil {
			r.fail(err)
			continue
		}
		for _, rr := range pending {
			r.rerun(ctx, rr, gh)
		}
	}
}

func (r *refresher) rerun(ctx context.Context, rr state.Rerun, gh Rerunner) {
	now := r.now.Unix()
	switch {
	case rr.Status != state.RerunPending:
		r.dropPending(ctx, rr)
		return
	case now-rr.Since > int64(rerunWithin.Seconds()):
		r.settleRerun(ctx, rr, state.RerunPending, state.RerunGaveUp, KindRerunFailed,
			fmt.Sprintf("not re-run: the workflow run did not complete within %s (last: %s)", rerunWithin, rr.Detail))
		return
	case gh == nil || rr.TriedAt != 0 && now-rr.TriedAt < int64(rerunEvery.Seconds()):
		return
	}
	// At most once: claimed before GitHub is asked; only a refusal GitHub
	// answered puts it back.
	if _, err := storeOf(r.d).MoveRerun(ctx, rr, state.RerunPending, state.RerunRequesting, rr.Detail, true); err != nil {
		if state.ClauseOf(err) == "" {
			r.fail(err)
		}
		return
	}
	err := gh.RerunFailedJobs(ctx, rr.Repository, rr.WorkflowRunID)
	var refused *github.RerunRefusedError
	switch {
	case err == nil:
		r.settleRerun(ctx, rr, state.RerunRequesting, state.RerunDone, KindRerun, "GitHub re-runs the failed jobs")
	case errors.As(err, &refused):
		// GitHub did nothing: the run is still in progress, or may not be
		// re-run (which message means which is not documented): tried
		// again until rerunWithin.
		if _, err := storeOf(r.d).MoveRerun(ctx, rr, state.RerunRequesting, state.RerunPending, refused.Message, false); err != nil {
			r.fail(err)
		}
	case github.IsNotFound(err):
		r.settleRerun(ctx, rr, state.RerunRequesting, state.RerunFailed, KindRerunFailed, "not re-run: "+err.Error())
	default:
		// GitHub may have re-run it: not asked again.
		r.settleRerun(ctx, rr, state.RerunRequesting, state.RerunFailed, KindRerunFailed, "outcome unknown, not asked again: "+err.Error())
	}
}

// settleRerun ends a rerun, tells its run and takes it out of the pending set.
func (r *refresher) settleRerun(ctx context.Context, rr state.Rerun, from, to string, kind Kind, detail string) {
	if _, err := storeOf(r.d).MoveRerun(ctx, rr, from, to, detail, false); err != nil {
		if state.ClauseOf(err) == "" {
			r.fail(err)
		}
		return
	}
	note := fmt.Sprintf("workflow run %d of %s: %s", rr.WorkflowRunID, rr.Repository, detail)
	if _, err := storeOf(r.d).NoteRunInterrupted(ctx, rr.Run, "", note); err != nil && !state.IsNotFound(err) && state.ClauseOf(err) == "" {
		r.fail(err)
	}
	r.out.Reruns = append(r.out.Reruns, Decision{"", rr.Pool, "run " + rr.Run + ": " + note, kind})
	r.dropPending(ctx, rr)
}

func (r *refresher) dropPending(ctx context.Context, rr state.Rerun) {
	if err := storeOf(r.d).DropPendingRerun(ctx, rr); err != nil {
		r.fail(err)
	}
}
