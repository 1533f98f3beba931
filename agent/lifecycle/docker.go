package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/docker"
)

// dockerNote is the state file of the daemon's objects as the first
// assignment found them (after the operator's pre-runner script).
const dockerNote = "docker.json"

func (a *Agent) docker() docker.Daemon {
	return docker.Daemon{Host: a.Config.DockerHost, Timeout: a.Config.CleanupTimeout.Duration}
}

// noteDocker notes the daemon's objects: what the image and the
// pre-runner script made is what every later run starts from. A daemon
// that does not answer (a docker command without a running daemon) is
// noted as absent: if it answers later, everything it holds is removed.
func (a *Agent) noteDocker(ctx context.Context) {
	base, err := a.docker().Read(ctx)
	if err != nil {
		a.Log.Info("no docker daemon answers: nothing of docker is noted", "err", err)
		base = docker.State{}
	}
	a.saveFile(dockerNote, base)
}

// restoreDocker removes what an assignment left in the docker daemon and
// checks that nothing beyond the note is left. Without a note (an agent
// of an earlier version) nothing is trusted.
func (a *Agent) restoreDocker(ctx context.Context) error {
	base := docker.State{Present: true}
	a.loadFile(dockerNote, &base)
	d := a.docker()
	now, err := d.Read(ctx)
	if errors.Is(err, docker.ErrUnreachable) && !base.Present {
		return nil // no daemon then, none now: no job could use one
	}
	if err != nil {
		return fmt.Errorf("docker: %w", err) // it answered before: fail closed
	}
	if !now.Present {
		return nil
	}
	if err := d.Restore(ctx, base, a.Config.KeepDockerImages); err != nil {
		a.Log.Warn("docker cleanup met errors", "err", err)
	}
	if now, err = d.Read(ctx); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	if extras := docker.Extras(now, base, a.Config.KeepDockerImages); len(extras) > 0 {
		return fmt.Errorf("docker still holds what a run made: %s", strings.Join(extras, ", "))
	}
	return nil
}
