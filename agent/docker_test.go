package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/dockerd"
)

// TestAJobsDockerObjectsAreGoneBeforeTheNextRun is the hostile-job suite's
// docker row (docs/security.md, H11), against a real docker daemon: run
// A's job leaves a container watching the work folder, a volume, a network,
// its own image under the noted image's name and a new name on the noted
// image, a swarm with a global service that mounts the work folder (and no
// ingress network), a secret, a config, a plugin, a docker context and a
// buildx builder with its driver's container and volume; the instance is
// pooled only once the daemon holds what it held after the pre-runner
// script and the runner user's home is reset, and run B's job finds
// nothing of A; the contexts and the builder go with the home reset. With
// the daemon's swarm and plugin restore and check disabled (restoreSwarm,
// restorePlugins, swarmExtras; tried once) it reports "UD_REMOVE_REG_FAILED:
// docker still holds what a run made: container …": the swarm had already
// started the swept task again when the old check ran. That is a race: the
// review that found the defect saw the check run first, 3 tries of 3, and
// the instance pooled with the swarm, its service, secret, config and the
// plugin; agent/docker's TestRestoreLeavesTheDaemonAsNoted shows what is
// left without the race.
func TestAJobsDockerObjectsAreGoneBeforeTheNextRun(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	d := dockerd.Start(t)
	baseID := d.Image(t, "base:1") // what the image brought: trusted
	w := newWorld(t, "")
	w.jobUser()
	w.configure(func(c *config.Config) { c.DockerHost = d.Host })
	w.start()
	vars := map[string]string{"W": filepath.Join(w.dir, "work"), "BASE": baseID, "DOCKER_HOST": d.Host}

	inst := w.create("run-a", "on-demand")
	running := w.markRunning(inst)
	if a := w.job("run-a", w.hostileScript("hostile-docker-a.sh", vars)); a.ExitCode != 0 || !strings.Contains(a.Output, "run A done") {
		t.Fatalf("run A's job (exit %d):\n%s", a.ExitCode, a.Output)
	}
	if d.Docker(t, "ps", "--quiet", "--filter", "name=^spy$") == "" || d.Docker(t, "ps", "--quiet", "--filter", "name=^watch.") == "" {
		t.Fatal("run A's container or its swarm service's task is not running: the test proves nothing")
	}

	idle, err := w.store.Release(ctx, running.Ref(), "run-a", 15*time.Minute, w.removal())
	must(t, err)
	clean := w.wait(idle, state.SignalRemoveRegOK, state.SignalRemoveRegFailed)
	if _, ok := clean.SignalFor(state.SignalRemoveRegOK); !ok {
		t.Fatalf("after run A: %v", clean.Signals)
	}
	if got := d.Docker(t, "ps", "--all", "--quiet"); got != "" {
		t.Errorf("containers of run A left in the pooled instance: %s", got)
	}
	if got := d.Docker(t, "info", "--format", "{{.Swarm.LocalNodeState}}"); got != "inactive" {
		t.Errorf("the pooled instance is in run A's swarm: %s", got)
	}
	if got := d.Docker(t, "image", "inspect", "--format", "{{.Id}}", "base:1"); got != baseID {
		t.Errorf("base:1 names %s in the pooled instance, want the noted %s", got, baseID)
	}

	claimed, err := w.store.Claim(ctx, idle.Key, state.ClaimRequest{RunID: "run-b", Pool: "linux", Owner: "acme", ClaimTTL: 5 * time.Minute, Registration: w.registration()})
	must(t, err)
	got := w.wait(claimed, state.SignalRegOK, state.SignalRegFailed)
	if _, ok := got.SignalFor(state.SignalRegOK); !ok {
		t.Fatalf("run B's runner not registered: %v", got.Signals)
	}
	if b := w.job("run-b", w.hostileScript("hostile-docker-b.sh", vars)); b.ExitCode != 0 {
		t.Fatalf("run B found run A's docker objects:\n%s", b.Output)
	}
}
