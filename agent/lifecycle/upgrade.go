package lifecycle

import (
	"context"
	"sync"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The runner release, kept at the control plane's target between
// assignments, and between the runners of a just-in-time assignment; never
// while a runner runs (agent/runner/upgrade.go says why).
//
// Invariants:
//   - the install changes only while no runner is configured: in an idle
//     record's pass, or right before a runner starts (a registration, or
//     a just-in-time assignment's next runner), and then by one rename of
//     a copy staged and checked beforehand;
//   - no runner starts from an install older than the record's target
//     (bringToTarget). The target moves ahead when GitHub published a
//     release (or the operator moved a pin), and a just-in-time runner
//     behind GitHub's latest is sent an update message while its job
//     waits. Whatever the way to the start — an idle pass too short to
//     finish staging, an assignment seen with no idle pass between, the
//     target moving mid-assignment, an agent restarted (its staging died
//     with it) — the target is staged then, on the main loop, before the
//     runner starts; only a target that cannot be staged (a checksum that
//     differs, a download that failed) lets one start from the older
//     install;
//   - staging runs beside the main loop while the instance is idle and is
//     cancelled when an assignment comes unless it stages the target the
//     runner is then waiting for: it never shares the instance with a job;
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
	warned    runnerrelease.Target // the failed target last said to be started without
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
// rename), an install older than the target is brought to it (bringToTarget),
// staging still under way otherwise stops (the download would share the
// instance with the job; it resumes when the instance is idle again).
func (a *Agent) beforeAssignment(ctx context.Context, rec *state.Instance) {
	if rec.RunnerTarget != nil && !a.local.registered() {
		a.swapStaged(ctx, *rec.RunnerTarget)
		a.bringToTarget(ctx, rec)
	}
	a.up.mu.Lock()
	if a.up.cancel != nil {
		a.up.cancel()
		a.up.staging, a.up.cancel = nil, nil
	}
	a.up.mu.Unlock()
}

// bringToTarget brings the install to the record's target when it is older,
// before a runner starts from it: it swaps in what is staged, waits for a
// staging of the target under way, or stages it now (the runner waits: an
// update message would cost its job as long, GitHub's download and a
// restart, from a tarball the control plane did not check). Called on the
// main loop with no runner alive.
func (a *Agent) bringToTarget(ctx context.Context, rec *state.Instance) {
	t := rec.RunnerTarget
	if t == nil || a.installFailure != "" || !a.behind(*t) {
		return
	}
	if a.swapStaged(ctx, *t) {
		return
	}
	a.up.mu.Lock()
	if why := a.up.failed[*t]; why != "" {
		warn := a.up.warned != *t
		a.up.warned = *t
		a.up.mu.Unlock()
		if warn { // once per target: this runs on every pass before a registration
			a.Log.Warn("runners start from an install older than their target, which could not be staged", "installed", a.installedVersion(), "target", t.Version, "reason", why)
		}
		return
	}
	if a.up.cancel != nil && (a.up.staging == nil || *a.up.staging != *t) {
		a.up.cancel() // staging another target
		a.up.staging, a.up.cancel = nil, nil
	}
	done, under := a.up.done, a.up.staging != nil
	a.up.mu.Unlock()
	log := a.Log.With("installed", a.installedVersion(), "target", t.Version)
	if done != nil {
		if under {
			log.Info("the runner waits for the staging of its target: the install is older")
		}
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
		if a.swapStaged(ctx, *t) {
			return
		}
	}
	log.Info("staging the runner target before the runner starts: the install is older")
	started := time.Now()
	_, err := a.Runner.Stage(ctx, t.URL, t.SHA256)
	a.up.mu.Lock()
	switch {
	case err == nil:
		a.up.staged = t
	case ctx.Err() == nil:
		if a.up.failed == nil {
			a.up.failed = map[runnerrelease.Target]string{}
		}
		a.up.failed[*t] = err.Error()
	}
	a.up.mu.Unlock()
	if err != nil {
		log.Error("staging the runner target failed: the runner starts from the older install", "err", err)
		return
	}
	if a.swapStaged(ctx, *t) {
		log.Info("runner target staged and installed before the runner started", "took", time.Since(started).Round(time.Millisecond))
	}
}

// behind reports whether the install is older than t (false when its
// version is unknown).
func (a *Agent) behind(t runnerrelease.Target) bool {
	v := a.installedVersion()
	return runnerrelease.ValidVersion(v) && runnerrelease.ValidVersion(t.Version) && runnerrelease.Compare(v, t.Version) < 0
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
