package lifecycle

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Just-in-time runners (internal/state/jit.go). No GitHub token reaches
// the instance: each configuration the control plane writes registers one
// runner for one job. The agent starts it in a fresh copy of the install;
// when the runner exits (its job done, or it died) the agent asks for the
// next configuration of the assignment through its record (UD_JIT_NEXT,
// asked again every jitAskEvery until it comes) and starts that one.
// Runners that end without a job are counted, backed off and capped
// (jitcap.go).
// Invariant: no runner starts on what an earlier job of the assignment
// left: between the two the agent cleans up and verifies as between
// assignments (cleanBetweenJobs), and a failed check holds the next
// runner back. At release there is nothing to deregister: GitHub removed the runner that
// took a job, and the control plane deletes one that took none.

// jitAskEvery is how often an unanswered request is repeated: each write
// is a new stream record, so a request lost to a failed invocation is
// served by the next.
const jitAskEvery = 5 * time.Second

// jitAnswerPoll is how often the record is read while a requested
// configuration is awaited (the control plane answers within about a
// second), for at most jitAnswerFor after the request; then the usual
// assigned poll. A job's next runner waits on these reads, and there
// are few of them: one request per job. A claimed record's first
// configuration, which provision writes right after the claim, is
// awaited the same way (jitMachine.firstMissing).
const (
	jitAnswerPoll = 150 * time.Millisecond
	jitAnswerFor  = 10 * time.Second
)

// jitWait is how long the main loop of a just-in-time assignment sleeps
// before reading the record again, and what ends the sleep early: the
// runner's exit (its job is done: ask for the next configuration now).
func (a *Agent) jitWait(assignedPoll time.Duration) (time.Duration, <-chan struct{}) {
	alive, _ := a.Runner.Alive()
	wait, wake := a.jit.wait(a.local.Seq, alive, time.Now(), assignedPoll)
	if wake {
		return wait, a.Runner.Exited()
	}
	return wait, nil
}

// registerJIT starts the runner of the assignment's first configuration.
func (a *Agent) registerJIT(ctx context.Context, rec *state.Instance, reg *state.Registration) {
	if err := a.startJIT(reg.JITConfig); err != nil {
		a.Log.Error("start just-in-time runner", "err", err, "assignment", rec.Assignment)
		a.Runner.Forget()
		a.signal(ctx, rec, state.SignalRegFailed, err.Error())
		return
	}
	// Noted, recorded and answered in one write: provision waits for the
	// answer, and a second write on its path was one more round trip.
	a.setLocal(registration{RunID: rec.RunID, Assignment: rec.Assignment, RunnerID: reg.RunnerID, Name: reg.RunnerName, JIT: true, Seq: reg.Seq}, true)
	a.Log.Info("just-in-time runner started", "runId", rec.RunID, "runner", reg.RunnerName, "runnerId", reg.RunnerID, "seq", reg.Seq)
	err := retry(ctx, 5, func() error {
		err := a.Store.SetRunnerAndSignal(ctx, a.Key, rec.Assignment, reg.RunnerID, reg.RunnerName, state.SignalRegOK, reg.RunnerName)
		if state.ClauseOf(err) != "" {
			return permanent{err} // the record moved on: this answer has no reader
		}
		return err
	})
	if err != nil {
		// The next pass answers again (reconcile signals a registered
		// runner's assignment), by itself.
		a.Log.Warn("record runner id and signal", "err", err, "signal", state.SignalRegOK, "assignment", rec.Assignment)
		return
	}
	a.Log.Info("signal", "signal", state.SignalRegOK, "assignment", rec.Assignment, "detail", reg.RunnerName)
}

// superviseJIT starts the next runner once the last one exited, asking
// for its configuration until the record holds it. Between the two, what
// the last job left dies as between assignments (cleanBetweenJobs).
func (a *Agent) superviseJIT(ctx context.Context, rec *state.Instance) {
	if alive, _ := a.Runner.Alive(); alive {
		return
	}
	a.judgeJITExit() // before the cleanup discards what the runner left
	a.noteSelfUpdate(rec)
	next := a.local.Seq + 1
	reg := rec.Registration
	ready := reg != nil && reg.Purpose == state.PurposeJIT && reg.Assignment == rec.Assignment && reg.Seq == next
	if !ready && !a.jit.held(a.local.Assignment, time.Now()) {
		a.askJIT(ctx, rec, next) // first: the control plane answers while the agent cleans up
	}
	if a.jit.needsCleaning(a.local.Seq) {
		if err := a.cleanBetweenJobs(ctx); err != nil {
			a.Log.Error("clean up after a just-in-time job: the next runner waits", "err", err, "seq", a.local.Seq)
			return // tried again on the next pass
		}
		a.jit.cleaned(a.local.Seq)
	}
	if a.jit.gaveUp(a.local.Assignment) {
		a.giveUpJIT(ctx, rec)
		return
	}
	if !ready {
		return
	}
	// Not from an install older than the target (upgrade.go): also after
	// the target moved mid-assignment, and after an agent restart.
	if a.bringToTarget(ctx, rec); ctx.Err() != nil {
		return
	}
	if err := a.startJIT(reg.JITConfig); err != nil {
		a.Log.Error("start just-in-time runner", "err", err, "seq", next)
		return // asked again below on the next pass
	}
	a.noteJIT(ctx, rec, reg)
	a.Log.Info("next just-in-time runner started", "runner", reg.RunnerName, "runnerId", reg.RunnerID, "seq", next)
}

// noteSelfUpdate says, once per runner, that the runner that exited
// updated itself: GitHub sent it an update message because its latest
// release is ahead of the install (refresh has not learned it yet, or the
// pool pins an older release), and run.sh ran its job on the release the
// listener downloaded, in the runner's copy of the install. Nothing else
// follows from it: the copy is discarded with the job's leftovers, the
// install (the agent's, sealed) stays what the control plane's target made
// it, its version is what the record reports, and the next runner starts
// from it, brought to the target first (upgrade.go). A release the runner
// fetched itself is never installed: only the control plane's target,
// with its checksum, is.
func (a *Agent) noteSelfUpdate(rec *state.Instance) {
	if !a.jit.firstLook(a.local.Assignment + "/" + strconv.Itoa(a.local.Seq)) {
		return
	}
	v := a.Runner.SelfUpdated()
	if v == "" {
		return
	}
	target := ""
	if rec.RunnerTarget != nil {
		target = rec.RunnerTarget.Version
	}
	a.Log.Warn("the just-in-time runner updated itself in its copy: GitHub's latest release is ahead of the install; the install stays at its target", "seq", a.local.Seq, "updatedTo", v, "installed", a.up.installedVersion(), "target", target)
}

// cleanBetweenJobs ends what a just-in-time job left before the next job
// of the same assignment starts on the instance (issue 29 item 4): that
// job may be one behind an environment approval, and the jobs before it
// untrusted. It is the cleanup between assignments, reused: kill the
// runner user's processes, wipe the runner copy, the work folder (the tool
// cache with it), the home, the temporary trees, IPC objects and keys,
// docker and the operator's cleanup script, then verify. Only the probe of
// the metadata service's firewall rule, which no job can change (it is
// root's) and which takes up to a second, waits for the end of the
// assignment.
func (a *Agent) cleanBetweenJobs(ctx context.Context) error {
	return errors.Join(a.reap(), a.clean(ctx))
}

// askJIT asks for configuration seq, unless asked less than jitAskEvery ago.
func (a *Agent) askJIT(ctx context.Context, rec *state.Instance, seq int) {
	if !a.jit.askDue(seq, time.Now()) {
		return
	}
	if err := a.Store.PutSignal(ctx, a.Key, rec.Assignment, state.SignalJITNext, strconv.Itoa(seq)); err != nil {
		a.Log.Warn("ask for the next just-in-time configuration", "err", err, "seq", seq)
		return
	}
	if a.jit.asked(seq, time.Now()) {
		a.Log.Info("asked for the next just-in-time configuration", "seq", seq, "assignment", rec.Assignment)
	}
}

// noteJIT notes the runner started and records it, which also takes its
// configuration out of the record: it has been used.
func (a *Agent) noteJIT(ctx context.Context, rec *state.Instance, reg *state.Registration) {
	a.setLocal(registration{RunID: rec.RunID, Assignment: rec.Assignment, RunnerID: reg.RunnerID, Name: reg.RunnerName, JIT: true, Seq: reg.Seq}, true)
	if err := retry(ctx, 5, func() error {
		return a.Store.SetRunner(ctx, a.Key, rec.Assignment, reg.RunnerID, reg.RunnerName)
	}); err != nil {
		a.Log.Warn("record runner id", "err", err, "assignment", rec.Assignment)
	}
}

// startJIT starts a just-in-time runner, unless the instance is going away.
func (a *Agent) startJIT(config string) error {
	a.runnerMu.Lock()
	defer a.runnerMu.Unlock()
	if a.halted {
		return errHalted
	}
	a.jit.started(time.Now())
	return a.Runner.StartJIT(config)
}
