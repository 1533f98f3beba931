package lifecycle

import (
	"context"
)

// The runner's install (its libraries, the tarball, the seal), at every
// agent start before anything else (Agent.Prepare).
//
// Invariant: a failed install is reported, never retried by a restart. An
// agent that exited on it would be started again by systemd every few
// seconds, download the runner each time and never say why, while
// provision waited out the created lease. Instead the reason is kept in
// installFailedFile, the agent stays up (heartbeats, self-termination),
// signals UD_FAILED with it to whatever assignment comes (as for a
// firewall it could not set, firewallFailure), and registers no runner:
// provision replaces the instance at once. A restarted agent finds the
// file and installs nothing.

// installFailedFile, in StateDir, holds why the install failed.
const installFailedFile = "install-failed.json"

// prepare runs a.Prepare unless an earlier start saw it fail; it returns
// an error only when ctx ended (the agent is being stopped mid-install: the
// next start tries again).
func (a *Agent) prepare(ctx context.Context) error {
	var failed outcome
	if a.loadFile(installFailedFile, &failed) && failed.Detail != "" {
		a.installFailure = failed.Detail
		a.Log.Error("the runner install failed at an earlier start: not tried again", "reason", failed.Detail)
		return nil
	}
	if a.Prepare == nil {
		return nil
	}
	err := a.Prepare(ctx)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	a.installFailure = truncate("the runner could not be installed: "+err.Error(), 900)
	a.saveFile(installFailedFile, outcome{Done: true, Detail: a.installFailure})
	a.Log.Error("runner install failed: this instance takes no job", "reason", a.installFailure)
	return nil
}
