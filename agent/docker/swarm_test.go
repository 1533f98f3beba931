package docker_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/docker"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/dockerd"
)

// An operator's pre-runner script may make the instance a swarm manager
// with a service of its own: that swarm and what the note holds stay, what
// a job added to the swarm goes, and a noted service the job changed (here
// pointed at a folder it chose) cannot be put back, so the check reports
// it and the instance is never pooled. A container the job labels as the
// noted service's task is still the job's: the swarm's own records say
// which containers are its tasks. Without restoreSwarm's removal (tried
// once) it reports "left after Restore: [service … secret … config …
// container …]" (the job's service's task, swept and started again) and
// "services \"jobs\noperators\""; without swarmOwns, the noted service's
// task and the docker_gwbridge network are taken for the job's: "left after
// Restore: [container … network … docker_gwbridge]".
func TestRestoreKeepsANotedSwarmAndRemovesWhatAJobAddedToIt(t *testing.T) {
	ctx := context.Background()
	d := dockerd.Start(t)
	d.Image(t, "base:1")
	d.SwarmInit(t)
	d.Docker(t, "service", "create", "--detach", "--name", "operators", "--network", "host", "base:1")
	daemon := docker.Daemon{Host: d.Host}
	base, err := daemon.Read(ctx)
	if err != nil || !base.Swarm.In() || !base.Swarm.Manager || len(base.Services) != 1 || len(base.Nodes) != 1 {
		t.Fatalf("the note misses the swarm or its service: %+v %v", base, err)
	}

	d.Docker(t, "service", "create", "--detach", "--name", "jobs", "--network", "host", "base:1")
	d.Docker(t, "secret", "create", "s", "/etc/hostname")
	d.Docker(t, "config", "create", "c", "/etc/hostname")
	d.Plugin(t, "evil")
	d.Docker(t, "run", "--detach", "--network", "none", "--label", "com.docker.swarm.service.id="+strings.SplitN(base.Services[0], "@", 2)[0], "base:1")
	if err := daemon.Restore(ctx, base, false); err != nil {
		t.Errorf("restore: %v", err)
	}
	now, _ := daemon.Read(ctx)
	if extras := docker.Extras(now, base, false); len(extras) > 0 {
		t.Errorf("left after Restore: %v", extras)
	}
	if now.Swarm != base.Swarm || d.Docker(t, "service", "ls", "--format", "{{.Name}}") != "operators" {
		t.Errorf("the noted swarm or its service did not stay: %+v, services %q", now.Swarm,
			d.Docker(t, "service", "ls", "--format", "{{.Name}}"))
	}

	d.Docker(t, "service", "update", "--detach", "--mount-add", "type=bind,src="+t.TempDir()+",dst=/w", "operators")
	if err := daemon.Restore(ctx, base, false); err != nil {
		t.Errorf("restore: %v", err)
	}
	now, _ = daemon.Read(ctx)
	extras := docker.Extras(now, base, false)
	if !slices.ContainsFunc(extras, func(e string) bool {
		return strings.HasPrefix(e, "service ") && strings.HasSuffix(e, "(changed since noted)")
	}) {
		t.Errorf("the changed noted service is not reported: %v", extras)
	}
}
