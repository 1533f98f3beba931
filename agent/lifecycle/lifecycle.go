// Package lifecycle is the agent's main loop (DESIGN.md §7, seed
// instance-agent.md): one-time initialisation, then the heartbeat,
// self-termination and spot-watch loops beside the reusability loop that
// registers the runner for each assignment and cleans up after it.
//
// Invariants:
//   - the runner is registered only for the (runId, assignment) the record
//     holds, with the runId as its sole label;
//   - before the agent answers a new assignment, the runner of the previous one
//     is stopped, deregistered and its work folder wiped;
//   - signals always name the assignment they answer;
//   - when the lease has passed (plus clock-skew grace), or the record is
//     terminated or never appears, the instance terminates itself, even with
//     the control plane gone.
package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/agent/imds"
	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Store holds the state-store calls the agent makes on its own record.
type Store interface {
	Get(ctx context.Context, instanceID string) (*state.Instance, error)
	Heartbeat(ctx context.Context, instanceID string) error
	PutSignal(ctx context.Context, instanceID, assignment, name, detail string) error
	SetRunner(ctx context.Context, instanceID, assignment string, runnerID int64, runnerName string) error
}

// EC2 holds the one EC2 call the agent makes: terminating its own instance.
type EC2 interface {
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

// Spot reads the spot interruption notice.
type Spot interface {
	Spot(ctx context.Context) (*imds.SpotAction, error)
}

// ErrTerminated is returned by Run once the instance asked EC2 to terminate it.
var ErrTerminated = errors.New("instance terminated itself")

// Agent is the agent of one instance.
type Agent struct {
	Config     config.Config
	InstanceID string
	Store      Store
	EC2        EC2
	Spot       Spot
	Runner     *runner.Runner
	Log        *slog.Logger
	Now        func() time.Time

	started    time.Time
	record     atomic.Pointer[state.Instance] // the last record read
	local      registration                   // what the runner is registered for
	preRunner  outcome
	terminated chan struct{}
	termOnce   sync.Once
	// interrupted is set by a spot notice: the instance is going away, so
	// the runner is neither restarted nor registered again.
	interrupted atomic.Bool
}

// registration is the agent's note of what its runner is registered for,
// kept in StateDir so that a restarted agent knows what to clean up.
type registration struct {
	RunID      string `json:"runId"`
	Assignment string `json:"assignment"`
	RunnerID   int64  `json:"runnerId"`
	Name       string `json:"name"`
}

func (r registration) registered() bool { return r.Assignment != "" }

// outcome is the result of the pre-runner script, kept in a marker file so it
// runs once per instance.
type outcome struct {
	Done   bool   `json:"done"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Run runs the agent until ctx ends or the instance terminated itself.
func (a *Agent) Run(ctx context.Context) error {
	if a.Now == nil {
		a.Now = time.Now
	}
	a.started = a.Now()
	a.terminated = make(chan struct{})
	a.Log = a.Log.With("instanceId", a.InstanceID)
	if err := os.MkdirAll(a.Config.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	a.loadFile("registration.json", &a.local)
	a.loadFile("prerunner.json", &a.preRunner)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){a.heartbeatLoop, a.selfTerminationLoop, a.spotLoop} {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ctx) }()
	}
	err := a.mainLoop(ctx)
	cancel()
	wg.Wait()
	if a.isTerminated() {
		return ErrTerminated
	}
	return err
}

// mainLoop reads the record and reconciles the runner with it.
func (a *Agent) mainLoop(ctx context.Context) error {
	failures := 0
	for {
		rec, err := a.Store.Get(ctx, a.InstanceID)
		switch {
		case state.IsNotFound(err):
			a.record.Store(nil)
			if a.Now().Sub(a.started) > a.Config.RecordWait.Duration {
				a.terminateSelf(ctx, "no record appeared within "+a.Config.RecordWait.String())
			}
		case err != nil:
			failures++
			a.Log.Warn("read own record", "err", err, "attempt", failures)
			if !sleep(ctx, backoff(failures)) {
				return ctx.Err()
			}
			continue
		default:
			a.record.Store(rec)
			a.reconcile(ctx, rec)
		}
		failures = 0
		if a.isTerminated() {
			return nil
		}
		wait := a.Config.IdlePoll.Duration
		if a.local.registered() {
			wait = a.Config.AssignedPoll.Duration
		}
		if !sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// reconcile moves the runner one step towards what the record asks.
func (a *Agent) reconcile(ctx context.Context, rec *state.Instance) {
	if rec.State == state.Terminated {
		a.stopRunner()
		a.terminateSelf(ctx, "record is terminated")
		return
	}
	if !a.preRunner.Done {
		a.runPreRunner(ctx, rec)
	}
	assigned := rec.RunID != "" && (rec.State == state.Created || rec.State == state.Claimed || rec.State == state.Running)
	switch {
	case a.local.registered() && (!assigned || rec.Assignment != a.local.Assignment):
		a.deregister(ctx, rec)
	case a.interrupted.Load():
		return
	case a.local.registered():
		a.supervise()
		// A restart between registering and signalling must not leave the
		// control plane waiting: signal writes only when the slot is empty.
		a.signal(ctx, rec, state.SignalRegOK, a.local.Name)
	case assigned:
		a.register(ctx, rec)
	case rec.State == state.Idle:
		a.confirmClean(ctx, rec)
	}
}

// register registers the runner for the record's run and assignment.
func (a *Agent) register(ctx context.Context, rec *state.Instance) {
	if answered(rec, state.SignalRegOK, state.SignalRegFailed) {
		return // already answered this assignment; wait for the control plane
	}
	log := a.Log.With("runId", rec.RunID, "assignment", rec.Assignment)
	if !a.preRunner.OK {
		a.signal(ctx, rec, state.SignalRegFailed, "pre-runner script failed: "+a.preRunner.Detail)
		return
	}
	reg := rec.Registration
	if reg == nil || reg.Assignment != rec.Assignment || reg.Purpose != "register" || reg.Token == "" {
		a.signal(ctx, rec, state.SignalRegFailed, "no registration material for this assignment in the record")
		return
	}
	name := fmt.Sprintf("ghr-%d-%s", rec.Uses, a.InstanceID)
	var file runner.File
	err := retry(ctx, 3, func() error {
		var err error
		file, err = a.Runner.Configure(ctx, runner.Registration{URL: reg.URL, Token: reg.Token, Name: name, Labels: rec.RunID})
		return err
	})
	if err != nil {
		log.Error("register runner", "err", err)
		a.Runner.Forget()
		a.signal(ctx, rec, state.SignalRegFailed, err.Error())
		return
	}
	a.local = registration{RunID: rec.RunID, Assignment: rec.Assignment, RunnerID: file.AgentID, Name: name}
	a.saveFile("registration.json", a.local)
	if err := retry(ctx, 5, func() error { return a.Store.SetRunner(ctx, a.InstanceID, rec.Assignment, file.AgentID, name) }); err != nil {
		log.Warn("record runner id", "err", err)
	}
	if err := a.Runner.Start(); err != nil {
		a.signal(ctx, rec, state.SignalRegFailed, err.Error())
		return
	}
	log.Info("runner registered", "runner", name, "runnerId", file.AgentID)
	a.signal(ctx, rec, state.SignalRegOK, name)
}

// supervise restarts a runner that died while assigned.
func (a *Agent) supervise() {
	alive, err := a.Runner.Alive()
	if alive {
		return
	}
	a.Log.Warn("runner not running while assigned: restarting", "err", err, "runId", a.local.RunID)
	if err := a.Runner.Start(); err != nil {
		a.Log.Error("restart runner", "err", err)
	}
}

// deregister stops the runner, removes it from GitHub, wipes the work folder
// and runs the cleanup script; then, if the record is idle, confirms it.
func (a *Agent) deregister(ctx context.Context, rec *state.Instance) {
	log := a.Log.With("runId", a.local.RunID, "assignment", a.local.Assignment)
	var problems []string
	if err := a.Runner.Stop(a.Config.StopTimeout.Duration); err != nil {
		problems = append(problems, err.Error())
	}
	reg := rec.Registration
	if reg != nil && reg.Assignment == rec.Assignment && reg.Purpose == "remove" && reg.Token != "" {
		if err := retry(ctx, 3, func() error { return a.Runner.Remove(ctx, reg.Token) }); err != nil {
			problems = append(problems, err.Error())
			a.Runner.Forget()
		}
	} else {
		// Without a remove token GitHub cannot be told; the control plane
		// deletes the runner through the API (refresh, scale-down).
		problems = append(problems, "no remove token for this assignment: runner forgotten locally, left registered on GitHub")
		a.Runner.Forget()
	}
	if err := a.wipe(ctx); err != nil {
		problems = append(problems, err.Error())
	}
	a.local = registration{}
	a.saveFile("registration.json", a.local)
	if len(problems) == 0 {
		if err := retry(ctx, 5, func() error { return a.Store.SetRunner(ctx, a.InstanceID, rec.Assignment, 0, "") }); err != nil {
			log.Warn("clear runner id", "err", err)
		}
	}
	log.Info("runner deregistered", "problems", problems)
	if rec.RunID != "" {
		return // assigned anew (e.g. after a restart): register on the next pass
	}
	if len(problems) > 0 {
		a.signal(ctx, rec, state.SignalRemoveRegFailed, strings.Join(problems, "; "))
		return
	}
	a.signal(ctx, rec, state.SignalRemoveRegOK, "")
}

// confirmClean answers an idle assignment the runner was never registered
// for (a claim given back, a pre-warmed instance): the agent makes sure the
// work folder is empty and says it is clean.
func (a *Agent) confirmClean(ctx context.Context, rec *state.Instance) {
	if answered(rec, state.SignalRemoveRegOK, state.SignalRemoveRegFailed) {
		return
	}
	if !a.preRunner.OK {
		return // never clean: a failed instance must not join the pool
	}
	if err := a.wipe(ctx); err != nil {
		a.signal(ctx, rec, state.SignalRemoveRegFailed, err.Error())
		return
	}
	a.signal(ctx, rec, state.SignalRemoveRegOK, "")
}

func (a *Agent) wipe(ctx context.Context) error {
	if err := a.Runner.Wipe(); err != nil {
		return fmt.Errorf("wipe work folder: %w", err)
	}
	if a.Config.CleanupScript == "" {
		return nil
	}
	if out, err := runScript(ctx, a.Config.CleanupScript, a.Config.CleanupTimeout.Duration); err != nil {
		return fmt.Errorf("cleanup script: %w: %s", err, out)
	}
	return nil
}

// runPreRunner runs the operator's script once per instance and signals
// UD_OK or UD_FAILED for the assignment of the moment.
func (a *Agent) runPreRunner(ctx context.Context, rec *state.Instance) {
	a.preRunner = outcome{Done: true, OK: true}
	if a.Config.PreRunnerScript != "" {
		start := a.Now()
		out, err := runScript(ctx, a.Config.PreRunnerScript, a.Config.PreRunnerTimeout.Duration)
		if ctx.Err() != nil {
			a.preRunner = outcome{}
			return // shutting down: run it again next time
		}
		if err != nil {
			a.preRunner = outcome{Done: true, Detail: fmt.Sprintf("%v: %s", err, out)}
		}
		a.Log.Info("pre-runner script finished", "ok", a.preRunner.OK, "seconds", a.Now().Sub(start).Seconds())
	}
	a.saveFile("prerunner.json", a.preRunner)
	if a.preRunner.OK {
		a.signal(ctx, rec, state.SignalOK, "")
	} else {
		a.signal(ctx, rec, state.SignalFailed, a.preRunner.Detail)
	}
}

// signal writes a signal for the record's assignment, unless the record
// already holds it, retrying transient errors.
func (a *Agent) signal(ctx context.Context, rec *state.Instance, name, detail string) {
	if _, done := rec.SignalFor(name); done {
		return
	}
	err := retry(ctx, 5, func() error {
		err := a.Store.PutSignal(ctx, a.InstanceID, rec.Assignment, name, truncate(detail, 1000))
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

func (a *Agent) heartbeatLoop(ctx context.Context) {
	failures := 0
	for {
		if err := a.Store.Heartbeat(ctx, a.InstanceID); err != nil && ctx.Err() == nil {
			failures++
			if !state.IsNotFound(err) {
				a.Log.Warn("heartbeat", "err", err, "attempt", failures)
			}
			if !sleep(ctx, min(backoff(failures), a.Config.HeartbeatInterval.Duration)) {
				return
			}
			continue
		}
		failures = 0
		if !sleep(ctx, a.Config.HeartbeatInterval.Duration) {
			return
		}
	}
}

// selfTerminationLoop checks the last record read against the clock; it
// needs no DynamoDB call, so it works while the store is unreachable.
func (a *Agent) selfTerminationLoop(ctx context.Context) {
	every := min(a.Config.HeartbeatInterval.Duration, 15*time.Second)
	for sleep(ctx, every) {
		rec := a.record.Load()
		if rec == nil || rec.Threshold == 0 {
			continue
		}
		deadline := time.Unix(rec.Threshold, 0).Add(a.Config.ClockSkew.Duration)
		if a.Now().After(deadline) {
			a.stopRunner()
			a.terminateSelf(ctx, fmt.Sprintf("lease of state %s ended at %s", rec.State, time.Unix(rec.Threshold, 0).UTC().Format(time.RFC3339)))
			return
		}
	}
}

func (a *Agent) spotLoop(ctx context.Context) {
	if a.Spot == nil {
		return
	}
	for sleep(ctx, 5*time.Second) {
		notice, err := a.Spot.Spot(ctx)
		if err != nil || notice == nil {
			continue
		}
		a.Log.Warn("spot interruption notice", "action", notice.Action, "at", notice.Time)
		a.interrupted.Store(true)
		if rec := a.record.Load(); rec != nil {
			a.signal(ctx, rec, state.SignalInterrupted, notice.Action+" at "+notice.Time.Format(time.RFC3339))
		}
		a.stopRunner()
		return
	}
}

func (a *Agent) stopRunner() {
	if err := a.Runner.Stop(a.Config.StopTimeout.Duration); err != nil {
		a.Log.Warn("stop runner", "err", err)
	}
}

// terminateSelf asks EC2 to terminate this instance, retrying until it is
// accepted or ctx ends.
func (a *Agent) terminateSelf(ctx context.Context, why string) {
	a.Log.Warn("terminating own instance", "reason", why)
	err := retry(ctx, 1<<30, func() error {
		_, err := a.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{a.InstanceID}})
		return err
	})
	if err == nil {
		a.termOnce.Do(func() { close(a.terminated) })
	}
}

func (a *Agent) isTerminated() bool {
	select {
	case <-a.terminated:
		return true
	default:
		return false
	}
}

func (a *Agent) loadFile(name string, v any) {
	raw, err := os.ReadFile(filepath.Join(a.Config.StateDir, name))
	if err == nil {
		if err := json.Unmarshal(raw, v); err != nil {
			a.Log.Warn("ignoring unreadable state file", "file", name, "err", err)
		}
	}
}

// saveFile writes atomically, so a crash never leaves half a file.
func (a *Agent) saveFile(name string, v any) {
	raw, _ := json.Marshal(v)
	path := filepath.Join(a.Config.StateDir, name)
	if err := os.WriteFile(path+".tmp", raw, 0o600); err == nil {
		err = os.Rename(path+".tmp", path)
		if err == nil {
			return
		}
	}
	a.Log.Error("cannot save state file", "file", name)
}

// answered reports whether either signal answers the record's assignment.
func answered(rec *state.Instance, names ...string) bool {
	for _, n := range names {
		if _, ok := rec.SignalFor(n); ok {
			return true
		}
	}
	return false
}

func runScript(ctx context.Context, path string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("timed out after %s", timeout)
	}
	return truncateTail(string(out), 800), err
}

// permanent marks an error retry must not repeat.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// retry calls f up to attempts times with exponential backoff and jitter.
func retry(ctx context.Context, attempts int, f func() error) error {
	var err error
	for i := 1; i <= attempts; i++ {
		if err = f(); err == nil {
			return nil
		}
		var p permanent
		if errors.As(err, &p) || i == attempts || !sleep(ctx, backoff(i)) {
			break
		}
	}
	return err
}

// backoff is 200 ms doubling per attempt up to 30 s, with ±50 % jitter so a
// fleet of agents does not retry in step.
func backoff(attempt int) time.Duration {
	d := 200 * time.Millisecond << min(attempt-1, 8)
	d = min(d, 30*time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func truncateTail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
