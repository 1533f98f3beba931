package lifecycle

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
)

// upgrader is the upgrade machine: it keeps the runner install at the
// record's target by staging a release beside the install and swapping
// it in (upgrade.go says when the Agent lets it).
//
// Invariants:
//   - at most one staging writes runner.StagedDir at a time: a new one
//     starts only once the last goroutine returned (done is closed);
//   - a staging cancelled and replaced never records its outcome: only
//     the staging of the target under way does;
//   - a target that failed to stage (other than by cancellation) is not
//     staged again: a checksum that differs stays wrong;
//   - the install's version is what the install itself says
//     (runner.Version), read after a boot or a swap; what the record was
//     told is reported again whenever it differs;
//   - a staged release is swapped in only when it is the target asked for.
//
// Synchronisation: one mutex, mu, guards every field below it; it is
// never held across a download, a swap or a log line of the Agent's. The
// staging goroutine is the only one besides the main loop; Run waits for
// it (wait) before it returns.
type upgrader struct {
	runner  stager
	install string // Config.RunnerDir
	log     *slog.Logger

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

// stager is what the upgrade machine needs of the runner.
type stager interface {
	Stage(ctx context.Context, url, sha256Hex string) (string, error)
	Swap(staged string) error
}

// noteInstalled asks the install its version (after a boot or a swap).
func (u *upgrader) noteInstalled(ctx context.Context) {
	v := runner.Version(ctx, u.install)
	u.mu.Lock()
	u.installed = v
	u.mu.Unlock()
}

func (u *upgrader) installedVersion() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.installed
}

// toReport is the installed version when the record (saying recorded)
// or the agent's last report differs from it, "" when nothing is to say.
func (u *upgrader) toReport(recorded string) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.installed == "" || recorded == u.installed && u.reported == u.installed {
		return ""
	}
	return u.installed
}

// wasReported notes that the record was told v.
func (u *upgrader) wasReported(v string) {
	u.mu.Lock()
	u.reported = v
	u.mu.Unlock()
}

// idleAction is what an idle pass does towards a target.
type idleAction int

const (
	idleNothing   idleAction = iota // installed, under way, or failed before
	idleWait                        // a cancelled staging is still ending: next pass
	idleStartStep                   // start staging the target
)

// idleStep decides an idle pass's step towards t; u.mu is held.
func (u *upgrader) idleStep(t runnerrelease.Target) idleAction {
	switch {
	case u.installed == t.Version || u.staging != nil && *u.staging == t || u.failed[t] != "":
		return idleNothing
	case u.done != nil && !closed(u.done):
		return idleWait
	}
	return idleStartStep
}

// idle moves an idle instance towards t: it swaps in a staged release, or
// starts staging one beside the main loop.
func (u *upgrader) idle(ctx context.Context, t runnerrelease.Target) {
	if u.swapStaged(ctx, t) {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.idleStep(t) != idleStartStep {
		return
	}
	if u.cancel != nil {
		u.cancel() // staging an older target
	}
	sctx, cancel := context.WithCancel(ctx)
	target := t
	done := make(chan struct{})
	u.staging, u.cancel, u.staged, u.done = &target, cancel, nil, done
	u.log.Info("staging the runner release the control plane asks for", "version", target.Version, "installed", u.installed)
	go func() {
		defer close(done)
		defer cancel()
		_, err := u.runner.Stage(sctx, target.URL, target.SHA256)
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.staging == nil || *u.staging != target {
			return // cancelled and replaced meanwhile
		}
		u.staging, u.cancel = nil, nil
		switch {
		case err == nil:
			u.staged = &target
			u.log.Info("runner release staged", "version", target.Version)
		case sctx.Err() == nil:
			// A checksum that differs stays wrong: not tried again for this
			// target (refresh retires the instance if its version expires).
			u.fail(target, err)
			u.log.Error("staging the runner release failed", "version", target.Version, "err", err)
		}
	}()
}

// fail notes that t could not be staged; u.mu is held.
func (u *upgrader) fail(t runnerrelease.Target, err error) {
	if u.failed == nil {
		u.failed = map[runnerrelease.Target]string{}
	}
	u.failed[t] = err.Error()
}

// swapStaged swaps in the staged release when it is t; it reports whether
// the install is now t.
func (u *upgrader) swapStaged(ctx context.Context, t runnerrelease.Target) bool {
	u.mu.Lock()
	ready := u.staged != nil && *u.staged == t
	u.mu.Unlock()
	if !ready {
		return false
	}
	err := u.runner.Swap(runner.StagedDir(u.install))
	u.mu.Lock()
	u.staged = nil
	u.mu.Unlock()
	if err != nil {
		u.log.Error("swap in the runner release", "version", t.Version, "err", err)
		return false
	}
	u.noteInstalled(ctx)
	u.log.Info("runner release installed", "version", t.Version, "reports", u.installedVersion())
	return true
}

// stopStaging cancels a staging under way: an assignment came.
func (u *upgrader) stopStaging() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cancel != nil {
		u.cancel()
		u.staging, u.cancel = nil, nil
	}
}

// bringToTarget brings the install to t when it is older, before a runner
// starts from it: it swaps in what is staged, waits for a staging of t
// under way, or stages it now (the runner waits: an update message would
// cost its job as long, GitHub's download and a restart, from a tarball
// the control plane did not check). Called on the main loop with no
// runner alive.
func (u *upgrader) bringToTarget(ctx context.Context, t runnerrelease.Target) {
	if !u.behind(t) || u.swapStaged(ctx, t) {
		return
	}
	u.mu.Lock()
	if why := u.failed[t]; why != "" {
		warn := u.warned != t
		u.warned = t
		u.mu.Unlock()
		if warn { // once per target: this runs on every pass before a registration
			u.log.Warn("runners start from an install older than their target, which could not be staged", "installed", u.installedVersion(), "target", t.Version, "reason", why)
		}
		return
	}
	if u.cancel != nil && (u.staging == nil || *u.staging != t) {
		u.cancel() // staging another target
		u.staging, u.cancel = nil, nil
	}
	done, under := u.done, u.staging != nil
	u.mu.Unlock()
	log := u.log.With("installed", u.installedVersion(), "target", t.Version)
	if done != nil {
		if under {
			log.Info("the runner waits for the staging of its target: the install is older")
		}
		select {
		case <-done:
		case <-ctx.Done():
			return
		}
		if u.swapStaged(ctx, t) {
			return
		}
	}
	log.Info("staging the runner target before the runner starts: the install is older")
	started := time.Now()
	_, err := u.runner.Stage(ctx, t.URL, t.SHA256)
	u.mu.Lock()
	switch {
	case err == nil:
		u.staged = &t
	case ctx.Err() == nil:
		u.fail(t, err)
	}
	u.mu.Unlock()
	if err != nil {
		log.Error("staging the runner target failed: the runner starts from the older install", "err", err)
		return
	}
	if u.swapStaged(ctx, t) {
		log.Info("runner target staged and installed before the runner started", "took", time.Since(started).Round(time.Millisecond))
	}
}

// behind reports whether the install is older than t (false when its
// version is unknown).
func (u *upgrader) behind(t runnerrelease.Target) bool {
	v := u.installedVersion()
	return runnerrelease.ValidVersion(v) && runnerrelease.ValidVersion(t.Version) && runnerrelease.Compare(v, t.Version) < 0
}

// wait waits for the staging goroutine, if any, to return.
func (u *upgrader) wait() {
	u.mu.Lock()
	done := u.done
	u.mu.Unlock()
	if done != nil {
		<-done
	}
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
