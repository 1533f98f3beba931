// Package lifecycle is the agent's main loop (docs/design.md): one-time initialisation, then the heartbeat,
// self-termination and spot-watch loops beside the reusability loop that
// registers the runner for each assignment and cleans up after it.
//
// Invariants:
//   - the runner is registered only for the (runId, assignment) the record
//     holds, with the run's label as its only label: the one provision
//     minted for the run (or the runId where the pool asks for it), from
//     the record's registration material or, for a just-in-time runner,
//     in the configuration GitHub made with it;
//   - before the agent answers a new assignment, the runner of the previous one
//     is stopped, deregistered and its work folder wiped;
//   - signals always name the assignment they answer;
//   - while the record is running for the runner's assignment and the
//     runner process is alive, the agent keeps the lease ahead, up to the
//     record's runtime cap;
//   - a runner install that failed is said once (UD_FAILED with the
//     reason), never retried by a restart, and no runner is registered
//     (install.go);
//   - a just-in-time runner that ended without a job is followed by the
//     next only after a backoff, and by none after jitIdleCap in a row
//     (jitcap.go);
//   - EC2's rebalance recommendation is said (UD_REBALANCE, until the
//     record holds it) and stops nothing: the runner keeps its job, and
//     the control plane claims the instance no more;
//   - when the lease has passed (counted on the monotonic clock, never the
//     wall clock, which may be minutes off; plus a grace), or the record is
//     terminated or never appears, the instance terminates itself, even with
//     the control plane gone.
//
// The Agent composes three state machines, each a type with its
// invariants at its top and its own synchronisation: jitMachine
// (jitmachine.go, jitcap.go: the just-in-time runners, owned by the main
// loop's goroutine, no lock), leaseMachine (leasemachine.go, lease.go: the
// lease as the agent counts it, a mutex for what was seen and one for the
// saves) and upgrader (upgrader.go: the runner release's staging and swap,
// one mutex). The Agent's own fields follow the rules given beside each.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
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
	Get(ctx context.Context, key state.Key) (*state.Instance, error)
	Heartbeat(ctx context.Context, key state.Key) error
	PutSignal(ctx context.Context, key state.Key, assignment, name, detail string) error
	SetRunner(ctx context.Context, key state.Key, assignment string, runnerID int64, runnerName string) error
	SetRunnerAndSignal(ctx context.Context, key state.Key, assignment string, runnerID int64, runnerName, name, detail string) error
	ExtendLease(ctx context.Context, key state.Key, assignment string, seen, next int64) (*state.Instance, error)
	SetRunnerVersion(ctx context.Context, key state.Key, version string) error
}

// EC2 holds the one EC2 call the agent makes: terminating its own instance.
type EC2 interface {
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

// Spot reads the spot interruption notice and the rebalance
// recommendation.
type Spot interface {
	Spot(ctx context.Context) (*imds.SpotAction, error)
	Rebalance(ctx context.Context) (*imds.Rebalance, error)
}

var errHalted = errors.New("the instance is going away: runner not started")

// ErrTerminated is returned by Run once the instance asked EC2 to terminate it.
var ErrTerminated = errors.New("instance terminated itself")

// Agent is the agent of one instance. Its exported fields are set before
// Run and only read afterwards. Of the rest: local, preRunner and
// installFailure are the main loop's alone; current, interrupted and
// terminated (closed once, termOnce) are how the other loops see them;
// runnerMu guards halted and every start of the runner.
type Agent struct {
	Config     config.Config
	InstanceID string
	// Key is the instance's record: state.InstanceKey of the pool's
	// instance role (config.RoleID) and InstanceID, which is the
	// ${aws:userid} of the agent's credentials, the one record the
	// instance role's policy lets it touch.
	Key    state.Key
	Store  Store
	EC2    EC2
	Spot   Spot
	Runner *runner.Runner
	Log    *slog.Logger
	Now    func() time.Time
	// Prepare installs the runner (its libraries, the tarball) and seals
	// the install; it runs at every start until it fails once (install.go).
	Prepare func(context.Context) error

	started time.Time
	// lease is the record's lease as the agent counts it (leasemachine.go).
	lease leaseMachine
	// local is what the runner is registered for, used by the main loop
	// only; current is a copy for the other loops.
	local     registration
	current   atomic.Pointer[registration]
	preRunner outcome
	// installFailure is why the runner could not be installed ("": it was).
	installFailure string
	terminated     chan struct{}
	termOnce       sync.Once
	cancel         context.CancelFunc
	// interrupted is set by a spot notice: the instance is going away, so
	// the runner is neither restarted nor registered again.
	interrupted atomic.Bool
	// halted is set once the instance is being terminated: run.sh is not
	// started again after it was stopped.
	runnerMu sync.Mutex
	halted   bool
	// jit is the just-in-time assignment's runners (jitmachine.go),
	// the main loop's alone.
	jit jitMachine
	// up keeps the install at the record's runner target (upgrader.go).
	up upgrader
}

// registration is the agent's note of what its runner is registered for,
// kept in StateDir so that a restarted agent knows what to clean up.
type registration struct {
	RunID      string `json:"runId"`
	Assignment string `json:"assignment"`
	RunnerID   int64  `json:"runnerId"`
	Name       string `json:"name"`
	// JIT: the runner is the Seq-th just-in-time runner of the assignment.
	JIT bool `json:"jit,omitempty"`
	Seq int  `json:"seq,omitempty"`
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
	a.lease.mono, a.lease.boot = monoClock(a.Config.BootIDFile)
	a.terminated = make(chan struct{})
	a.Log = a.Log.With("instanceId", a.InstanceID)
	a.up.runner, a.up.install, a.up.log = a.Runner, a.Config.RunnerDir, a.Log
	if err := os.MkdirAll(a.Config.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	var local registration
	a.loadFile("registration.json", &local)
	a.setLocal(local, false)
	a.loadFile("prerunner.json", &a.preRunner)
	if err := a.prepare(ctx); err != nil {
		return err
	}
	if a.firewallFailure() != "" || a.installFailure != "" {
		a.preRunner = outcome{} // checked again, and answered, by runPreRunner
	}
	if a.installFailure == "" {
		a.up.noteInstalled(ctx)
	}
	a.loadAnchors()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.cancel = cancel
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){a.heartbeatLoop, a.selfTerminationLoop, a.leaseLoop, a.spotLoop} {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ctx) }()
	}
	err := a.mainLoop(ctx)
	cancel()
	wg.Wait()
	// A staging of a runner release (upgrade.go) ends with ctx too: Run
	// returns once it has, so that nothing writes the runner's folders
	// after the agent stopped (a restarted agent would stage alongside).
	a.up.wait()
	if a.isTerminated() {
		return ErrTerminated
	}
	return err
}

// mainLoop reads the record and reconciles the runner with it.
func (a *Agent) mainLoop(ctx context.Context) error {
	failures := 0
	for {
		rec, err := a.Store.Get(ctx, a.Key)
		switch {
		case state.IsNotFound(err):
			// The lease clock keeps the last record seen: self-termination
			// still counts its lease.
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
			a.see(rec)
			a.reconcile(ctx, rec)
		}
		failures = 0
		if a.isTerminated() {
			return nil
		}
		wait, wake := a.jit.unassignedWait(time.Now(), a.Config.IdlePoll.Duration), (<-chan struct{})(nil)
		if a.local.registered() {
			wait = a.Config.AssignedPoll.Duration
			if a.local.JIT {
				wait, wake = a.jitWait(wait)
			}
		}
		if !sleepOrWake(ctx, wait, wake) {
			return ctx.Err()
		}
	}
}

// reconcile moves the runner one step towards what the record asks.
func (a *Agent) reconcile(ctx context.Context, rec *state.Instance) {
	a.jit.newPass()
	if rec.State == state.Terminated {
		a.halt()
		a.terminateSelf(ctx, "record is terminated")
		return
	}
	if !a.preRunner.Done {
		a.runPreRunner(ctx, rec)
	}
	a.reportVersion(ctx, rec)
	assigned := rec.RunID != "" && (rec.State == state.Created || rec.State == state.Claimed || rec.State == state.Running)
	switch {
	case a.local.registered() && (!assigned || rec.Assignment != a.local.Assignment):
		a.deregister(ctx, rec)
	case a.interrupted.Load():
		return
	case a.local.registered() && a.local.JIT:
		a.superviseJIT(ctx, rec)
		a.signal(ctx, rec, state.SignalRegOK, a.local.Name)
	case a.local.registered():
		a.supervise()
		// A restart between registering and signalling must not leave the
		// control plane waiting: signal writes only when the slot is empty.
		a.signal(ctx, rec, state.SignalRegOK, a.local.Name)
	case assigned:
		if a.beforeAssignment(ctx, rec); ctx.Err() != nil {
			return // stopping: no runner started mid-staging
		}
		a.register(ctx, rec)
	case rec.State == state.Idle:
		a.confirmClean(ctx, rec)
		a.upgradeIdle(ctx, rec)
	}
}

// startRunner starts run.sh, unless the instance is going away.
func (a *Agent) startRunner() error {
	a.runnerMu.Lock()
	defer a.runnerMu.Unlock()
	if a.halted {
		return errHalted
	}
	return a.Runner.Start()
}

// halt stops the runner for good: the main loop's supervision must not
// start it again while the instance terminates.
func (a *Agent) halt() {
	a.runnerMu.Lock()
	a.halted = true
	a.runnerMu.Unlock()
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
		// Done: the main loop may be waiting out a DynamoDB outage.
		a.cancel()
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
