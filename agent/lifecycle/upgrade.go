package lifecycle

import (
	"context"
	"sync"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The runner release, kept at the control plane's target between
// assignments (agent/runner/upgrade.go says why never during one).
//
// Invariants:
//   - the install changes only while no runner is configured: in an idle
//     record's pass, or right before a registration, and then by one
//     rename of a copy staged and checked beforehand; never between the
//     jobs of a just-in-time assignment;
//   - staging (download, checksum, unpack) runs beside the main loop while
//     the instance is idle and is cancelled when an assignment comes: no
//     job waits on it, and none shares the instance with it;
//   - the target comes from the record's runnerTarget, which only the
//     control plane writes; the version the agent reports is what the
//     install itself says (bin/Runner.Listener --version).

// upgrader is the agent's staging of a release.
type upgrader struct {
	mu        sync.Mutex
	installed string // the install's version ("" unknown)
	reported  string // what the record was last told
	staging   *runnerrelease.Target
	cancel    context.CancelFunc
	staged    *runnerrelease.Target // ready in runner.StagedDir
	failed    map[runnerrelease.Target]string
	// done is closed when the last staging goroutine has returned: a new
	// one waits for it, since both would write runner.StagedDir.
	done chan struct{}
}

// noteInstalled asks the install its version (after a boot or a swap).
func (a *Agent) noteInstalled(ctx context.Context) {
	v := runner.Version(ctx, a.Config.RunnerDir)
	a.up.mu.Lock()
	a.up.installed = v
	a.up.mu.Unlock()
}

// reportVersion tells the record the installed version when it differs.
func (a *Agent) reportVersion(ctx context.Context, rec *state.Instance) {
	a.up.mu.Lock()
	v := a.up.installed
	a.up.mu.Unlock()
	if v == "" || rec.RunnerVersion == v && a.up.reported == v {
		return
	}
	if err := a.Store.SetRunnerVersion(ctx, a.Key, v); err != nil {
		a.Log.Warn("report the runner version", "version", v, "err", err)
		return
	}
	a.up.reported = v
}

// upgradeIdle moves an idle instance towards its record's target: it swaps
// in a staged release, or starts staging one.
func (a *Agent) upgradeIdle(ctx context.Context, rec *state.Instance) {
	t := rec.RunnerTarget
	if t == nil || a.local.registered() || a.installFailure != "" {
		return
	}
	if a.swapStaged(ctx, *t) {
		return
	}
	a.up.mu.Lock()
	defer a.up.mu.Unlock()
	if a.up.installed == t.Version || a.up.staging != nil && *a.up.staging == *t || a.up.failed[*t] != "" {
		return
	}
	if a.up.done != nil && !closed(a.up.done) {
		return // a cancelled staging is still ending: next pass
	}
	if a.up.cancel != nil {
		a.up.cancel() // staging an older target
	}
	sctx, cancel := context.WithCancel(ctx)
	target := *t
	done := make(chan struct{})
	a.up.staging, a.up.cancel, a.up.staged, a.up.done = &target, cancel, nil, done
	a.Log.Info("staging the runner release the control plane asks for", "version", target.Version, "installed", a.up.installed)
	go func() {
		defer close(done)
		defer cancel()
		_, err := a.Runner.Stage(sctx, target.URL, target.SHA256)
		a.up.mu.Lock()
		defer a.up.mu.Unlock()
		if a.up.staging == nil || *a.up.staging != target {
			return // cancelled and replaced meanwhile
		}
		a.up.staging, a.up.cancel = nil, nil
		switch {
		case err == nil:
			a.up.staged = &target
			a.Log.Info("runner release staged", "version", target.Version)
		case sctx.Err() == nil:
			// A checksum that differs stays wrong: not tried again for this
			// target (refresh retires the instance if its version expires).
			if a.up.failed == nil {
				a.up.failed = map[runnerrelease.Target]string{}
			}
			a.up.failed[target] = err.Error()
			a.Log.Error("staging the runner release failed", "version", target.Version, "err", err)
		}
	}()
}

// swapStaged swaps in the staged release when it is t; it reports whether
// the install is now t.
func (a *Agent) swapStaged(ctx context.Context, t runnerrelease.Target) bool {
	a.up.mu.Lock()
	ready := a.up.staged != nil && *a.up.staged == t
	a.up.mu.Unlock()
	if !ready {
		return false
	}
	if err := a.Runner.Swap(runner.StagedDir(a.Config.RunnerDir)); err != nil {
		a.Log.Error("swap in the runner release", "version", t.Version, "err", err)
		a.up.mu.Lock()
		a.up.staged = nil
		a.up.mu.Unlock()
		return false
	}
	a.up.mu.Lock()
	a.up.staged = nil
	a.up.mu.Unlock()
	a.noteInstalled(ctx)
	a.Log.Info("runner release installed", "version", t.Version, "reports", a.installedVersion())
	return true
}

// beforeAssignment runs before a registration: a staged target goes in (a
// rename), staging still under way stops (the download would share the
// instance with the job; it resumes when the instance is idle again).
func (a *Agent) beforeAssignment(ctx context.Context, rec *state.Instance) {
	if rec.RunnerTarget != nil && !a.local.registered() {
		a.swapStaged(ctx, *rec.RunnerTarget)
	}
	a.up.mu.Lock()
	if a.up.cancel != nil {
		a.up.cancel()
		a.up.staging, a.up.cancel = nil, nil
	}
	a.up.mu.Unlock()
}

// waitStaging waits for the staging goroutine, if any, to return.
func (a *Agent) waitStaging() {
	a.up.mu.Lock()
	done := a.up.done
	a.up.mu.Unlock()
	if done != nil {
		<-done
	}
}

func (a *Agent) installedVersion() string {
	a.up.mu.Lock()
	defer a.up.mu.Unlock()
	return a.up.installed
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
