package lifecycle

import (
	"context"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The runner release, kept at the control plane's target between
// assignments, and between the runners of a just-in-time assignment; never
// while a runner runs (agent/runner/upgrade.go says why). The upgrade
// machine (upgrader.go) stages and swaps; this file says when the Agent
// lets it.
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
//   - nothing is staged for an instance whose install failed: it runs no
//     runner;
//   - the target comes from the record's runnerTarget, which only the
//     control plane writes; the version the agent reports is what the
//     install itself says (bin/Runner.Listener --version).

// reportVersion tells the record the installed version when it differs.
func (a *Agent) reportVersion(ctx context.Context, rec *state.Instance) {
	v := a.up.toReport(rec.RunnerVersion)
	if v == "" {
		return
	}
	if err := a.Store.SetRunnerVersion(ctx, a.Key, v); err != nil {
		a.Log.Warn("report the runner version", "version", v, "err", err)
		return
	}
	a.up.wasReported(v)
}

// upgradeIdle moves an idle instance towards its record's target: it swaps
// in a staged release, or starts staging one.
func (a *Agent) upgradeIdle(ctx context.Context, rec *state.Instance) {
	if rec.RunnerTarget == nil || a.local.registered() || a.installFailure != "" {
		return
	}
	a.up.idle(ctx, *rec.RunnerTarget)
}

// beforeAssignment runs before a registration: a staged target goes in (a
// rename), an install older than the target is brought to it (bringToTarget),
// staging still under way otherwise stops (the download would share the
// instance with the job; it resumes when the instance is idle again).
func (a *Agent) beforeAssignment(ctx context.Context, rec *state.Instance) {
	if rec.RunnerTarget != nil && !a.local.registered() {
		a.up.swapStaged(ctx, *rec.RunnerTarget)
		a.bringToTarget(ctx, rec)
	}
	a.up.stopStaging()
}

// bringToTarget brings the install to the record's target when it is older,
// before a runner starts from it (upgrader.bringToTarget).
func (a *Agent) bringToTarget(ctx context.Context, rec *state.Instance) {
	if rec.RunnerTarget == nil || a.installFailure != "" {
		return
	}
	a.up.bringToTarget(ctx, *rec.RunnerTarget)
}
