package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/docker"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/dockerd"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Remove()
	os.Exit(code)
}

// jobMess plays a job that reached the daemon: a container left running
// with a folder mounted, a volume, a network, its own image under the
// noted image's name, another name on the noted image, a committed child;
// a swarm of its own with a global service on the host network mounting
// the folder (swarm starts its task again when the container alone goes),
// a secret and a config, and a plugin.
func jobMess(t *testing.T, d *dockerd.Daemon, baseID string) {
	t.Helper()
	work := t.TempDir()
	d.SwarmInit(t)
	d.Docker(t, "service", "create", "--detach", "--name", "watch", "--mode", "global", "--network", "host",
		"--mount", "type=bind,src="+work+",dst=/w", "base:1")
	d.WaitRunning(t, "watch.")
	payload := filepath.Join(work, "payload")
	if err := os.WriteFile(payload, []byte("the job's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Docker(t, "secret", "create", "s", payload)
	d.Docker(t, "config", "create", "c", payload)
	d.Plugin(t, "evil")
	d.Docker(t, "run", "--detach", "--name", "spy", "--network", "none", "--volume", work+":/w", "base:1")
	d.Docker(t, "volume", "create", "poison")
	d.Docker(t, "network", "create", "--internal", "side")
	d.Image(t, "base:1") // the job's image now answers to the noted name
	d.Docker(t, "tag", baseID, "trusted:latest")
	d.Docker(t, "commit", "spy", "child:1")
}

// TestRestoreLeavesTheDaemonAsNoted: without restoreSwarm and
// restorePlugins (tried once) it reports "left after Restore: [swarm active
// manager node … (noted: none) service … secret … config … node … plugin
// … container … network …]" and "containers back after Restore:
// watch.…" (the swarm restarted the task the sweep removed); without
// swarmExtras as well, Extras misses the swarm, service, secret, config and
// plugin, and what is left after Restore reads only as a container and
// networks, or as nothing when the check runs before the swarm restarts
// the task (the defect of issue 36), while the task still comes back.
func TestRestoreLeavesTheDaemonAsNoted(t *testing.T) {
	ctx := context.Background()
	d := dockerd.Start(t)
	baseID := d.Image(t, "base:1")
	daemon := docker.Daemon{Host: d.Host}
	base, err := daemon.Read(ctx)
	if err != nil || !base.Present {
		t.Fatalf("read: %+v %v", base, err)
	}
	jobMess(t, d, baseID)
	now, _ := daemon.Read(ctx)
	extras := docker.Extras(now, base, false)
	for _, want := range []string{"swarm active manager", "service ", "secret ", "config ", "plugin ", "container ", "volume poison", "network ", "name trusted:latest", "image "} {
		if !slices.ContainsFunc(extras, func(e string) bool { return strings.HasPrefix(e, want) }) {
			t.Errorf("Extras misses %q: %v", want, extras)
		}
	}

	if err := daemon.Restore(ctx, base, false); err != nil {
		t.Errorf("restore: %v", err) // the agent goes on to the check too
	}
	now, _ = daemon.Read(ctx)
	if extras := docker.Extras(now, base, false); len(extras) > 0 {
		t.Errorf("left after Restore: %v", extras)
	}
	if got := d.Docker(t, "image", "inspect", "--format", "{{.Id}}", "base:1"); got != baseID {
		t.Errorf("base:1 names %s after Restore, want the noted %s", got, baseID)
	}
	if got := d.Docker(t, "ps", "--all", "--quiet"); got != "" {
		t.Errorf("containers left: %s", got)
	}
	// The swarm restarted a removed task within seconds (restart delay 5 s).
	time.Sleep(7 * time.Second)
	if got := d.Docker(t, "ps", "--all", "--format", "{{.Names}}"); got != "" {
		t.Errorf("containers back after Restore: %s", got)
	}
}

func TestRestoreKeepsImagesWhenAskedButNothingElse(t *testing.T) {
	ctx := context.Background()
	d := dockerd.Start(t)
	baseID := d.Image(t, "base:1")
	daemon := docker.Daemon{Host: d.Host}
	base, _ := daemon.Read(ctx)
	jobMess(t, d, baseID)
	if err := daemon.Restore(ctx, base, true); err != nil {
		t.Fatalf("restore: %v", err)
	}
	now, _ := daemon.Read(ctx)
	if extras := docker.Extras(now, base, true); len(extras) > 0 {
		t.Errorf("left after Restore: %v", extras)
	}
	if extras := docker.Extras(now, base, false); len(extras) == 0 {
		t.Error("kept images are not reported when images are not kept: the cache proves nothing")
	}
	if got := d.Docker(t, "image", "inspect", "--format", "{{.Id}}", "child:1"); got == "" {
		t.Error("the job's image went although images are kept")
	}
}

func TestAnInstanceWithoutDockerHasNothingToClean(t *testing.T) {
	s, err := docker.Daemon{Command: "/nonexistent/docker"}.Read(context.Background())
	if err != nil || s.Present {
		t.Fatalf("got %+v, %v; want an absent daemon and no error", s, err)
	}
}

func TestADaemonThatDoesNotAnswerIsAnError(t *testing.T) {
	_, err := docker.Daemon{Host: "unix:///nonexistent/docker.sock"}.Read(context.Background())
	if err == nil {
		t.Fatal("a daemon that does not answer read as fine: cleanup would pass unchecked")
	}
}

func TestExtras(t *testing.T) {
	base := docker.State{Present: true, Containers: []string{"c0"}, Volumes: []string{"v0"}, Networks: []string{"n0"},
		Images: []docker.Image{{ID: "sha256:aaaa", Tags: []string{"node:20"}}}, Plugins: []string{"p0@ab"}}
	cases := []struct {
		name string
		now  docker.State
		keep bool
		want []string
	}{
		{"as noted", base, false, nil},
		{"a new container, volume and network", docker.State{Containers: []string{"c0", "c1"}, Volumes: []string{"v0", "v1"}, Networks: []string{"n0", "n1"}, Images: base.Images}, false,
			[]string{"container c1", "volume v1", "network n1"}},
		{"the noted name moved to the job's image", docker.State{Images: []docker.Image{{ID: "sha256:aaaa"}, {ID: "sha256:bbbb", Tags: []string{"node:20"}}}}, false,
			[]string{"image bbbb [node:20]"}},
		{"a new name on a noted image", docker.State{Images: []docker.Image{{ID: "sha256:aaaa", Tags: []string{"node:20", "evil:1"}}}}, false,
			[]string{"name evil:1 on image aaaa"}},
		{"images kept", docker.State{Containers: []string{"c1"}, Images: []docker.Image{{ID: "sha256:bbbb"}}}, true,
			[]string{"container c1"}},
		{"a swarm of the job's own", docker.State{Images: base.Images, Swarm: docker.Swarm{State: "active", NodeID: "n1", Cluster: "k1", Manager: true},
			Services: []string{"s1@11"}, Secrets: []string{"x1@12"}, Configs: []string{"f1@13"}, Nodes: []string{"n1"}, Plugins: []string{"p1@ab"}}, true,
			[]string{"swarm active manager node n1 of cluster k1 (noted: none)", "service s1", "secret x1", "config f1", "node n1", "plugin p1"}},
		{"a swarm the job joined as a worker", docker.State{Images: base.Images, Swarm: docker.Swarm{State: "pending"}}, true,
			[]string{"swarm pending worker (noted: none)"}},
		{"a noted plugin the job enabled", docker.State{Images: base.Images, Plugins: []string{"p0@cd"}}, true,
			[]string{"plugin p0 (changed since noted)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := docker.Extras(c.now, base, c.keep)
			if !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
