package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The instance's one-time readiness, answered once (UD_OK or UD_FAILED)
// and kept in prerunner.json: the runner installed, the metadata service
// blocked for the runner user, the operator's pre-runner script run.

// runPreRunner runs the operator's script once per instance and signals
// UD_OK or UD_FAILED for the assignment of the moment.
func (a *Agent) runPreRunner(ctx context.Context, rec *state.Instance) {
	if a.installFailure != "" {
		// No runner to run: said once, to the assignment of the moment.
		a.preRunner = outcome{Done: true, Detail: a.installFailure}
		a.saveFile("prerunner.json", a.preRunner)
		a.signal(ctx, rec, state.SignalFailed, a.preRunner.Detail)
		return
	}
	if reason := a.firewallFailure(); reason != "" {
		// Jobs would reach the instance role: this instance runs none.
		a.preRunner = outcome{Done: true, Detail: "the runner user's traffic to the instance metadata service could not be blocked: " + reason}
		a.saveFile("prerunner.json", a.preRunner)
		a.signal(ctx, rec, state.SignalFailed, a.preRunner.Detail)
		return
	}
	if reason := a.imdsOpen(ctx); reason != "" {
		a.preRunner = outcome{Done: true, Detail: reason}
		a.saveFile("prerunner.json", a.preRunner)
		a.signal(ctx, rec, state.SignalFailed, a.preRunner.Detail)
		return
	}
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
		a.noteDocker(ctx)
		a.signal(ctx, rec, state.SignalOK, "")
	} else {
		a.signal(ctx, rec, state.SignalFailed, a.preRunner.Detail)
	}
}

// firewallFailure is the reason user data left in FirewallFailureFile, ""
// when the IMDS block is in place.
func (a *Agent) firewallFailure() string {
	if a.Config.FirewallFailureFile == "" {
		return ""
	}
	raw, err := os.ReadFile(a.Config.FirewallFailureFile)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if reason := strings.TrimSpace(string(raw)); err == nil && reason != "" {
		return truncate(reason, 500)
	}
	return fmt.Sprintf("%s is there (%v)", a.Config.FirewallFailureFile, err)
}
