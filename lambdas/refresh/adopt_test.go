package refresh_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
)

// claimPastItsLease claims a pooled instance for run (a scale set's
// standing run when scaleSet is set), mints its just-in-time runner as
// the listener's provision does, sets the runner busy or not at GitHub,
// and moves the control plane's clock past the claim's lease: the
// listener died before it marked the instance running and stayed away.
func (w *world) claimPastItsLease(run, scaleSet string, busy bool) *state.Instance {
	w.t.Helper()
	w.pool.Registration = state.RegistrationJIT
	must(w.t, w.cp.PutPoolConfig(ctx, w.pool))
	pooled := w.idle()
	_, _, err := w.cp.StartRun(ctx, state.Run{ID: run, Pool: "linux", Owner: "acme", InstanceCount: 1, Request: "{}", ScaleSet: scaleSet})
	must(w.t, err)
	claimed, err := w.cp.Claim(ctx, pooled.Key, state.ClaimRequest{RunID: run, Pool: "linux", Owner: "acme", ClaimTTL: time.Minute})
	must(w.t, err)
	claimed, err = w.deps.MintJIT(ctx, claimed, 1, "scale-set", 1)
	must(w.t, err)
	w.fake.SetBusy(claimed.Registration.RunnerID, busy)
	w.now = w.now.Add(2 * time.Minute)
	if !claimed.Expired(w.now) {
		w.t.Fatal("the claim's lease did not run out")
	}
	return claimed
}

// A scale set's job starts the moment its runner is online, maybe before
// the listener marked the instance running; if the listener then died for
// longer than the claim's lease, refresh must not end the instance under
// the job. It adopts it as running, on GitHub's word.
//
// With adoptBusy returning (nil, false) at once, the test failed with:
// "refresh ended a scale set's claim whose runner runs a job: alive false,
// record terminated (lease expired)".
func TestRefreshAdoptsAScaleSetsClaimPastItsLeaseWhoseRunnerRunsAJob(t *testing.T) {
	w := newWorld(t)
	claimed := w.claimPastItsLease("ss7-1", "7", true)
	out, rerr := w.refresh()
	rec, err := w.cp.Get(ctx, claimed.Key)
	must(t, err)
	if !w.alive(claimed.ID) || rec.State != state.Running {
		t.Fatalf("refresh ended a scale set's claim whose runner runs a job: alive %v, record %s (%s)", w.alive(claimed.ID), rec.State, rec.TerminatedReason)
	}
	must(t, rerr)
	if rec.Assignment != claimed.Assignment || rec.RunID != "ss7-1" || rec.Expired(w.now) {
		t.Errorf("adopted record: assignment %s (was %s), run %s, expired %v", rec.Assignment, claimed.Assignment, rec.RunID, rec.Expired(w.now))
	}
	if len(out.Adopted) != 1 || out.Adopted[0].InstanceID != claimed.ID || out.Adopted[0].Kind != refresh.KindAdopted || !strings.Contains(out.Adopted[0].Reason, "runs a job") {
		t.Errorf("adopted %+v, want %s", out.Adopted, claimed.ID)
	}
	if len(out.Terminated) != 0 {
		t.Errorf("terminated %+v", out.Terminated)
	}
	// The adoption is a lease the control plane gave: the next refresh
	// finds nothing forged or expired in it.
	w.now = w.now.Add(time.Minute)
	out, err = w.refresh()
	must(t, err)
	if !w.alive(claimed.ID) || len(out.Terminated) != 0 || len(out.Expired) != 0 {
		t.Fatalf("the next refresh ended the adopted instance: terminated %+v, expired %+v", out.Terminated, out.Expired)
	}
}

// Only a runner at work keeps the claim: an idle one's instance ends as
// its lease says.
func TestRefreshEndsAScaleSetsClaimPastItsLeaseWhoseRunnerIsIdle(t *testing.T) {
	w := newWorld(t)
	claimed := w.claimPastItsLease("ss7-1", "7", false)
	out, err := w.refresh()
	must(t, err)
	if w.alive(claimed.ID) || len(out.Adopted) != 0 {
		t.Fatalf("a scale set's claim past its lease with an idle runner lives on: adopted %+v", out.Adopted)
	}
	rec, err := w.cp.Get(ctx, claimed.Key)
	must(t, err)
	if rec.State != state.Terminated {
		t.Fatalf("record %s, want terminated", rec.State)
	}
}

// A workflow's jobs wait for provision's answer: a claim of its run past
// its lease runs none of them, whatever GitHub says of its runner, and
// ends as before (its runner, still busy, cannot be deleted: the refresh
// says so).
func TestRefreshEndsAWorkflowRunsClaimPastItsLeaseEvenWithABusyRunner(t *testing.T) {
	w := newWorld(t)
	claimed := w.claimPastItsLease("run-1", "", true)
	out, err := w.refresh()
	t.Logf("refresh: %v", err)
	if w.alive(claimed.ID) || out == nil || len(out.Adopted) != 0 {
		t.Fatalf("a workflow run's claim past its lease lives on: %+v", out)
	}
	rec, err := w.cp.Get(ctx, claimed.Key)
	must(t, err)
	if rec.State != state.Terminated {
		t.Fatalf("record %s, want terminated", rec.State)
	}
}

// What keeps a claim is GitHub's word on a runner the control plane
// minted for it: an instance that names another instance's busy runner as
// its own (githubRunnerId is the agent's to write) buys no life with it.
//
// Asking about controlplane.RunnerIDs (which takes githubRunnerId) without
// the name check, the test failed with: "a claim past its lease lives on
// another instance's busy runner: ... Adopted:[{... its runner
// ghr-1-1-i-0another000000000 runs a job Kind:adopted}]".
func TestRefreshEndsAScaleSetsClaimThatNamesAnotherInstancesBusyRunner(t *testing.T) {
	w := newWorld(t)
	claimed := w.claimPastItsLease("ss7-1", "7", false)
	other := w.fake.AddRunner("acme", state.JITRunnerName(1, 1, "i-0another000000000"), true)
	agent := state.New(w.db, w.name)
	must(t, agent.SetRunner(ctx, claimed.Key, claimed.Assignment, other, state.JITRunnerName(1, 1, "i-0another000000000")))
	// Retire's delete of the runners the record names refuses the other
	// instance's (controlplane.DeleteInstanceRunner): the refresh says so.
	out, err := w.refresh()
	t.Logf("refresh: %v", err)
	if w.alive(claimed.ID) || out == nil || len(out.Adopted) != 0 {
		t.Fatalf("a claim past its lease lives on another instance's busy runner: %+v", out)
	}
}
