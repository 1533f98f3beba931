package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/imds"
	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// setLocal changes what the runner is registered for, saving the note when
// save is set.
func (a *Agent) setLocal(r registration, save bool) {
	a.local = r
	a.current.Store(&r)
	if save {
		a.saveFile("registration.json", r)
	}
}

// runnerName is the name the runner registers under for an assignment.
func runnerName(rec *state.Instance, instanceID string) string {
	return state.RunnerName(rec.Uses, instanceID)
}

// register registers the runner for the record's run and assignment.
func (a *Agent) register(ctx context.Context, rec *state.Instance) {
	if answered(rec, state.SignalRegOK, state.SignalRegFailed) {
		return // already answered this assignment; wait for the control plane
	}
	log := a.Log.With("runId", rec.RunID, "assignment", rec.Assignment)
	if !a.preRunner.OK {
		why := "pre-runner script failed: " + a.preRunner.Detail
		if a.installFailure != "" {
			why = a.installFailure
		}
		a.signal(ctx, rec, state.SignalRegFailed, why)
		return
	}
	name := runnerName(rec, a.InstanceID)
	if a.adopt(ctx, rec, name) {
		return
	}
	reg := rec.Registration
	if reg == nil {
		// A just-in-time pool's provision writes the configuration right
		// after the claim or the record: wait for it, reading the record
		// more often meanwhile (provision's own wait bounds this).
		a.jit.firstMissing(rec.Assignment, time.Now())
		return
	}
	if reg.Assignment == rec.Assignment && reg.Purpose == state.PurposeJIT && reg.JITConfig != "" {
		a.registerJIT(ctx, rec, reg)
		return
	}
	if reg.Assignment != rec.Assignment || reg.Purpose != state.PurposeRegister || reg.Token == "" {
		a.signal(ctx, rec, state.SignalRegFailed, "no registration material for this assignment in the record")
		return
	}
	labels := reg.Labels
	if labels == "" {
		labels = rec.RunID // material written before labels were minted
	}
	var file runner.File
	err := retry(ctx, 3, func() error {
		var err error
		file, err = a.Runner.Configure(ctx, runner.Registration{URL: reg.URL, Token: reg.Token, Name: name, Labels: labels, Group: reg.Group})
		return err
	})
	if err != nil {
		log.Error("register runner", "err", err)
		a.Runner.Forget()
		a.signal(ctx, rec, state.SignalRegFailed, err.Error())
		return
	}
	a.setLocal(registration{RunID: rec.RunID, Assignment: rec.Assignment, RunnerID: file.AgentID, Name: name}, true)
	log.Info("runner registered", "runner", name, "runnerId", file.AgentID)
	a.launch(ctx, rec)
}

// adopt takes over a runner that config.sh configured for this very
// assignment before the agent, killed, could note it: the runner's own
// .runner names it. Any other runner configuration left in the runner
// directory belongs to an earlier assignment, and config.sh refuses to
// configure over it: it is removed first, as deregister does. adopt reports
// whether the runner was adopted.
func (a *Agent) adopt(ctx context.Context, rec *state.Instance, name string) bool {
	file, configured, err := a.Runner.Configured()
	if err == nil && configured && file.AgentName == name && file.AgentID != 0 {
		a.Log.Info("adopting the runner configured before the agent restarted", "runId", rec.RunID, "assignment", rec.Assignment, "runner", name, "runnerId", file.AgentID)
		a.setLocal(registration{RunID: rec.RunID, Assignment: rec.Assignment, RunnerID: file.AgentID, Name: name}, true)
		a.launch(ctx, rec)
		return true
	}
	if err == nil && !configured && !a.Runner.Leftovers() {
		return false
	}
	problems := a.dropRunner(ctx, rec)
	a.Log.Warn("removed the runner configuration of an earlier assignment", "runner", file.AgentName, "runnerId", file.AgentID, "err", err, "problems", problems)
	return false
}

// launch records the runner now noted in a.local, starts run.sh unless it
// runs already (an agent restarted while its runner ran) and answers the
// assignment.
func (a *Agent) launch(ctx context.Context, rec *state.Instance) {
	if err := retry(ctx, 5, func() error {
		return a.Store.SetRunner(ctx, a.Key, rec.Assignment, a.local.RunnerID, a.local.Name)
	}); err != nil {
		a.Log.Warn("record runner id", "err", err, "assignment", rec.Assignment)
	}
	if !a.runnerAlive() {
		if err := a.startRunner(); err != nil {
			a.signal(ctx, rec, state.SignalRegFailed, err.Error())
			return
		}
	}
	a.signal(ctx, rec, state.SignalRegOK, a.local.Name)
}

// supervise restarts a runner that died while assigned. A listener whose
// session another one holds (its own predecessor, killed before it could
// end it) retries for 4 minutes and only then exits 5, which run.sh
// reports as 0 (actions/runner MessageListener.cs, run-helper.sh): a
// restart on the next pass retries again, 30 s apart, and is no tight
// loop; the stale session lapses meanwhile.
func (a *Agent) supervise() {
	alive, err := a.Runner.Alive()
	if alive {
		return
	}
	a.Log.Warn("runner not running while assigned: restarting", "err", err, "runId", a.local.RunID)
	if err := a.startRunner(); err != nil {
		a.Log.Error("restart runner", "err", err)
	}
}

// deregister stops the runner, removes it from GitHub, wipes the work folder
// and runs the cleanup script; then, if the record is idle, confirms it.
func (a *Agent) deregister(ctx context.Context, rec *state.Instance) {
	log := a.Log.With("runId", a.local.RunID, "assignment", a.local.Assignment)
	problems := a.dropRunner(ctx, rec)
	a.setLocal(registration{}, true)
	if len(problems) == 0 {
		if err := retry(ctx, 5, func() error { return a.Store.SetRunner(ctx, a.Key, rec.Assignment, 0, "") }); err != nil {
			log.Warn("clear runner id", "err", err)
		}
	}
	log.Info("runner deregistered", "problems", problems)
	if rec.RunID != "" {
		return // assigned anew (e.g. after a restart): register on the next pass
	}
	a.answerIdle(ctx, rec, problems)
}

// dropRunner stops the runner, removes its registration from GitHub with
// the record's remove token, or else forgets it locally (the control plane
// deletes it through the API), and wipes the work folder. It returns what
// went wrong.
func (a *Agent) dropRunner(ctx context.Context, rec *state.Instance) []string {
	var problems []string
	if err := a.Runner.Stop(a.Config.StopTimeout.Duration); err != nil {
		problems = append(problems, err.Error())
	}
	// Before config.sh remove runs as the runner user with the remove
	// token in its environment, nothing of the job may still run.
	if err := a.reap(); err != nil {
		problems = append(problems, err.Error())
	}
	reg := rec.Registration
	if reg != nil && reg.Assignment == rec.Assignment && reg.Purpose == state.PurposeRemove && reg.Token != "" {
		if err := a.removable(); err != nil {
			problems = append(problems, err.Error())
		} else if err := retry(ctx, 3, func() error { return a.Runner.Remove(ctx, reg.Token) }); err != nil {
			problems = append(problems, err.Error())
		}
	} else if !a.local.JIT {
		problems = append(problems, "no remove token for this assignment: runner forgotten locally, left registered on GitHub")
	}
	// A just-in-time runner needs no removal here: GitHub removed it after
	// its job, and the control plane deletes one that took none.
	// The wipe discards the runner copy with whatever config.sh remove left
	// (files of newer runners it does not know, or all of them when it
	// failed), which would keep the next config.sh from configuring.
	if err := a.wipe(ctx); err != nil {
		problems = append(problems, err.Error())
	}
	return problems
}

// removable checks the runner configuration config.sh remove would act on.
// Its files belong to the job user: a job could point .runner at another
// runner of the owner (ids are sequential), which the owner-wide remove
// token would then delete, or remove it so that nothing is deregistered.
// The runner must be the one the agent noted at registration, in its own
// state folder; without a note (killed between config.sh and the note, so
// before any job) .runner is taken as config.sh wrote it. A refusal leaves
// the instance unpooled, and the control plane deletes the runner by id.
func (a *Agent) removable() error {
	file, ok, err := a.Runner.Configured()
	switch {
	case err != nil:
		return fmt.Errorf("the runner's configuration cannot be read (%v): not removed with config.sh", err)
	case !ok:
		return errors.New("the runner's .runner is gone: not removed with config.sh")
	case a.local.RunnerID != 0 && (file.AgentID != a.local.RunnerID || file.AgentName != a.local.Name):
		return fmt.Errorf("the runner's .runner names runner %d %q, the agent registered %d %q: not removed with config.sh",
			file.AgentID, file.AgentName, a.local.RunnerID, a.local.Name)
	}
	return nil
}

// answerIdle answers an idle assignment: clean, or not, saying why.
func (a *Agent) answerIdle(ctx context.Context, rec *state.Instance, problems []string) {
	if len(problems) > 0 {
		a.signal(ctx, rec, state.SignalRemoveRegFailed, strings.Join(problems, "; "))
		return
	}
	a.signal(ctx, rec, state.SignalRemoveRegOK, "")
}

// confirmClean answers an idle assignment the runner was never registered
// for (a claim given back, a pre-warmed instance): the agent makes sure no
// runner is configured and the work folder is empty, and says it is clean.
func (a *Agent) confirmClean(ctx context.Context, rec *state.Instance) {
	if answered(rec, state.SignalRemoveRegOK, state.SignalRemoveRegFailed) {
		return
	}
	if !a.preRunner.OK {
		return // never clean: a failed instance must not join the pool
	}
	if _, configured, err := a.Runner.Configured(); err != nil || configured || a.Runner.Leftovers() {
		// config.sh configured the runner for the claim given back, and the
		// agent was killed before it could note it.
		a.Log.Warn("removing the runner configuration of an earlier assignment", "assignment", rec.Assignment, "err", err)
		a.answerIdle(ctx, rec, a.dropRunner(ctx, rec))
		return
	}
	var problems []string
	if err := a.reap(); err != nil {
		problems = append(problems, err.Error())
	}
	if err := a.wipe(ctx); err != nil {
		problems = append(problems, err.Error())
	}
	a.answerIdle(ctx, rec, problems)
}

// reap kills whatever of the runner user still runs once the runner has
// stopped: daemons a job started out of the runner's process group.
func (a *Agent) reap() error {
	n, err := a.Runner.KillUserProcesses()
	if n > 0 {
		a.Log.Warn("killed processes the job left running", "processes", n)
	}
	if err != nil {
		return fmt.Errorf("kill the runner user's processes: %w", err)
	}
	return nil
}

// wipe cleans up after an assignment (clean), then checks, before the
// instance may be pooled, that the runner user still cannot reach the
// instance metadata service.
func (a *Agent) wipe(ctx context.Context) error {
	if err := a.clean(ctx); err != nil {
		return err
	}
	if reason := a.imdsOpen(ctx); reason != "" {
		return errors.New(reason)
	}
	return nil
}

// clean removes what a job left and verifies that nothing is left: after
// an assignment, and between the jobs of a just-in-time one.
func (a *Agent) clean(ctx context.Context) error {
	if err := a.Runner.Wipe(); err != nil {
		return fmt.Errorf("wipe work folder: %w", err)
	}
	// The job's files in /tmp, /var/tmp, /dev/shm and its crontab: what a
	// later run's job would otherwise find (its processes are gone: reap).
	if err := a.Runner.RemoveUserLeftovers(); err != nil {
		return fmt.Errorf("remove the runner user's leftovers: %w", err)
	}
	// Containers a job left running would watch the next run's workspace;
	// its images could answer to names the next run pulls. Before the
	// operator's cleanup script, which may use docker itself.
	if err := a.restoreDocker(ctx); err != nil {
		return err
	}
	if a.Config.CleanupScript != "" {
		if out, err := runScript(ctx, a.Config.CleanupScript, a.Config.CleanupTimeout.Duration); err != nil {
			return fmt.Errorf("cleanup script: %w: %s", err, out)
		}
	}
	// Whatever of the runner user still runs dies before the check:
	// config.sh remove, which the agent runs as that user after the job's
	// processes were killed, can leave a child past its 5 s wait delay,
	// and a container docker was just told to remove may still be ending
	// its process; Verify would find either and keep a clean instance out
	// of the pool (CI: TestMoreThanThePool, the docker test).
	if err := a.reap(); err != nil {
		return err
	}
	// Checked, not assumed: a process that escaped the kill, a file it
	// wrote since, a changed install keep the instance out of the pool.
	if err := a.Runner.Verify(); err != nil {
		return fmt.Errorf("the instance is not clean: %w", err)
	}
	return nil
}

// imdsOpen tries, as the runner user, to connect to the instance metadata
// service, and says why the instance must run no job if it can (or if it
// cannot tell): the firewall rule is the only thing between a job and the
// instance role, and a firewall service that reloads its rules can drop it
// long after user data applied it.
func (a *Agent) imdsOpen(ctx context.Context) string {
	addr, err := imds.Addr(a.Config.IMDSEndpoint)
	if err != nil {
		return err.Error()
	}
	reached, tried, err := a.Runner.Reaches(ctx, addr)
	switch {
	case err != nil:
		return fmt.Sprintf("cannot tell whether the runner user reaches the instance metadata service: %v", err)
	case tried && reached:
		return fmt.Sprintf("the runner user %s reaches the instance metadata service at %s: the firewall rule that keeps jobs from the instance role is missing", a.Runner.User, addr)
	}
	return ""
}

// signal writes a signal for the record's assignment, unless the record
// already holds it, retrying transient errors.
func (a *Agent) signal(ctx context.Context, rec *state.Instance, name, detail string) {
	if _, done := rec.SignalFor(name); done {
		return
	}
	err := retry(ctx, 5, func() error {
		err := a.Store.PutSignal(ctx, a.Key, rec.Assignment, name, truncate(detail, 1000))
		if state.ClauseOf(err) != "" {
			return permanent{err} // the record moved on: this signal has no reader
		}
		return err
	})
	if err != nil {
		a.Log.Warn("signal not written", "signal", name, "assignment", rec.Assignment, "err", err)
		return
	}
	a.Log.Info("signal", "signal", name, "assignment", rec.Assignment, "detail", detail)
}
