package refresh_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
)

const rerunRoute = "POST /repos/{org}/{repo}/actions/runs/{run_id}/rerun-failed-jobs"

// refreshRerunning is a refresh that may re-run jobs lost to spot, through
// the world's GitHub client.
func (w *world) refreshRerunning() *refresh.Output {
	w.t.Helper()
	out, err := refresh.Handle(ctx, refresh.Deps{Deps: w.deps, EC2: refresh.FleetEC2{Fleet: w.fleet}, Reruns: w.deps.GitHub.(refresh.Rerunner)}, nil)
	must(w.t, err)
	return out
}

// interrupted walks an instance of run to a spot interruption notice, the
// release that came before EC2 took it (the listener releases a run once
// GitHub fails its job), and EC2 taking it back.
func (w *world) interrupted(run string) *state.Instance {
	w.t.Helper()
	inst, agent := w.running(run, 0)
	must(w.t, agent.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalInterrupted, "terminate"))
	_, err := w.cp.Release(ctx, inst.Ref(), run, 5*time.Minute, nil)
	must(w.t, err)
	_, err = w.fleet.Terminate(ctx, []string{inst.ID})
	must(w.t, err)
	return inst
}

func reruns(out *refresh.Output, kind refresh.Kind) int {
	n := 0
	for _, d := range out.Reruns {
		if d.Kind == kind {
			n++
		}
	}
	return n
}

// A scale set's job lost to a spot interruption is re-run once through
// GitHub, once its workflow run has completed: refused while it runs,
// re-run when it failed, never asked again.
func TestAScaleSetsJobLostToASpotInterruptionIsRerunOnceItsRunCompleted(t *testing.T) {
	w := newWorld(t)
	job := w.fake.EnqueueJob("ghr-scaleset", "true") // its workflow run, in the fake, is itself
	_, _, err := w.cp.StartRun(ctx, state.Run{ID: "standing-1", Pool: "linux", InstanceCount: 1, Request: "{}", ScaleSet: "7"})
	must(t, err)
	must(t, w.cp.SetRunJob(ctx, "standing-1", state.RunJob{Repository: "acme/repo", WorkflowRunID: job}))
	inst := w.interrupted("standing-1")

	out := w.refreshRerunning()
	if reruns(out, refresh.KindRerunPending) != 1 || w.fake.Count(rerunRoute) != 1 {
		t.Fatalf("first refresh: reruns %+v, %d calls; want one asked for and GitHub asked once", out.Reruns, w.fake.Count(rerunRoute))
	}
	rr, err := w.cp.GetRerun(ctx, state.RerunKey("acme/repo", job))
	must(t, err)
	if rr.Status != state.RerunPending || !strings.Contains(rr.Detail, "already running") || rr.Tries != 1 {
		t.Fatalf("rerun while the workflow run is in progress: %+v, want pending after GitHub's refusal", rr)
	}
	run, err := w.cp.GetRun(ctx, "standing-1")
	must(t, err)
	if len(run.Interrupted) != 1 || run.Interrupted[0] != inst.ID || !strings.Contains(run.Rerun, "re-run once it completes") {
		t.Fatalf("run record: interrupted %v, rerun %q", run.Interrupted, run.Rerun)
	}

	w.fake.LoseJob(job)
	w.now = w.now.Add(2 * time.Minute)
	w.refreshRerunning()
	if n := w.fake.Count(rerunRoute); n != 1 {
		t.Fatalf("GitHub asked %d times within %s of the last try, want 1", n, 5*time.Minute)
	}
	w.now = w.now.Add(4 * time.Minute)
	out = w.refreshRerunning()
	lost, _ := w.fake.Job(job)
	if reruns(out, refresh.KindRerun) != 1 || lost.RerunAs == 0 {
		t.Fatalf("refresh after the run failed: reruns %+v, job %+v; want it re-run", out.Reruns, lost)
	}
	run, err = w.cp.GetRun(ctx, "standing-1")
	must(t, err)
	if !strings.Contains(run.Rerun, "GitHub re-runs the failed jobs") {
		t.Fatalf("run record after the re-run: %q", run.Rerun)
	}

	// Once: neither later refreshes nor a second instance of the same
	// workflow run ask again.
	_, _, err = w.cp.StartRun(ctx, state.Run{ID: "standing-2", Pool: "linux", InstanceCount: 1, Request: "{}", ScaleSet: "7"})
	must(t, err)
	must(t, w.cp.SetRunJob(ctx, "standing-2", state.RunJob{Repository: "acme/repo", WorkflowRunID: job}))
	w.fake.LoseJob(lost.RerunAs)
	w.interrupted("standing-2")
	for range 2 {
		w.now = w.now.Add(10 * time.Minute)
		w.refreshRerunning()
	}
	if n := w.fake.Count(rerunRoute); n != 2 {
		t.Fatalf("GitHub asked %d times in all, want 2 (one refusal, one re-run)", n)
	}
}

// A workflow's own run (provision mode) is not re-run: its jobs name the
// run's label, whose runners its release took away. The run's record says
// so, and GitHub is not asked.
func TestAJobOfAWorkflowsOwnRunLostToSpotIsRecordedNotRerun(t *testing.T) {
	w := newWorld(t)
	_, _, err := w.cp.StartRun(ctx, state.Run{ID: "12345", Pool: "linux", InstanceCount: 1, Request: "{}"})
	must(t, err)
	inst := w.interrupted("12345")
	out := w.refreshRerunning()
	if reruns(out, refresh.KindNotRerun) != 1 || w.fake.Count(rerunRoute) != 0 {
		t.Fatalf("reruns %+v, %d calls; want one not re-run and GitHub not asked", out.Reruns, w.fake.Count(rerunRoute))
	}
	run, err := w.cp.GetRun(ctx, "12345")
	must(t, err)
	if len(run.Interrupted) != 1 || run.Interrupted[0] != inst.ID || !strings.Contains(run.Rerun, "not re-run") {
		t.Fatalf("run record: interrupted %v, rerun %q", run.Interrupted, run.Rerun)
	}
}
