package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Swarm is the node's place in a swarm. A swarm outlives its tasks'
// containers: removing a service's container only has the swarm start it
// again (with whatever the service mounts, the work folder of the next run
// included), so what the swarm holds is noted and restored before the
// containers are.
type Swarm struct {
	// State is the daemon's LocalNodeState: "inactive" (or empty, in a
	// note of an earlier agent) when the node is in no swarm.
	State   string `json:"state,omitempty"`
	NodeID  string `json:"node,omitempty"`
	Cluster string `json:"cluster,omitempty"`
	// Manager: only a manager lists (and may remove) services, secrets,
	// configs and nodes.
	Manager bool `json:"manager,omitempty"`
}

// In reports whether the node is in a swarm, or on its way into one.
func (s Swarm) In() bool { return s.State != "" && s.State != "inactive" }

func (s Swarm) String() string {
	if !s.In() {
		return "none"
	}
	role := "worker"
	if s.Manager {
		role = "manager"
	}
	out := s.State + " " + role
	if s.NodeID != "" {
		out += " node " + short(s.NodeID)
	}
	if s.Cluster != "" {
		out += " of cluster " + short(s.Cluster)
	}
	return out
}

// swarmKinds are the objects a swarm manager holds, each noted as
// id@version: the version moves when the object is changed, so a noted
// service the job pointed at the work folder no longer matches its note.
// Nodes carry no version (it moves with every heartbeat).
var swarmKinds = []struct {
	name, version string
	of            func(*State) *[]string
}{
	{"service", "@{{.Version.Index}}", func(s *State) *[]string { return &s.Services }},
	{"secret", "@{{.Version.Index}}", func(s *State) *[]string { return &s.Secrets }},
	{"config", "@{{.Version.Index}}", func(s *State) *[]string { return &s.Configs }},
	{"node", "", func(s *State) *[]string { return &s.Nodes }},
}

// readSwarm notes the node's swarm and, on a manager, what the swarm holds.
func (d Daemon) readSwarm(ctx context.Context, s *State) error {
	out, err := d.run(ctx, "info", "--format", "{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}} {{.Swarm.NodeID}} {{with .Swarm.Cluster}}{{.ID}}{{end}}")
	if err != nil {
		return err
	}
	f := append(strings.Fields(out), "", "", "", "")
	s.Swarm = Swarm{State: f[0], Manager: f[1] == "true", NodeID: f[2], Cluster: f[3]}
	if !s.Swarm.In() || !s.Swarm.Manager {
		return nil
	}
	for _, k := range swarmKinds {
		ids, err := d.run(ctx, k.name, "ls", "--quiet")
		if err != nil {
			return err
		}
		if len(strings.Fields(ids)) == 0 {
			continue
		}
		out, err := d.run(ctx, append([]string{k.name, "inspect", "--format", "{{.ID}}" + k.version}, strings.Fields(ids)...)...)
		if err != nil {
			return err
		}
		*k.of(s) = strings.Fields(out)
	}
	return d.readTasks(ctx, s)
}

// readTasks notes which containers the swarm runs for which service.
func (d Daemon) readTasks(ctx context.Context, s *State) error {
	if len(s.Services) == 0 {
		return nil
	}
	tasks, err := d.run(ctx, append([]string{"service", "ps", "--quiet", "--no-trunc"}, ids(s.Services)...)...)
	if err != nil || len(strings.Fields(tasks)) == 0 {
		return err
	}
	out, err := d.run(ctx, append([]string{"inspect", "--type", "task", "--format",
		"{{with .Status.ContainerStatus}}{{.ContainerID}}{{end}}@{{.ServiceID}}"}, strings.Fields(tasks)...)...)
	if err != nil {
		return err
	}
	for _, t := range strings.Fields(out) {
		if !strings.HasPrefix(t, "@") {
			s.Tasks = append(s.Tasks, t)
		}
	}
	return nil
}

// swarmOwns reports whether a container or network of now is the noted
// swarm's own, made anew under another id while it runs: a task of a
// noted service, by the swarm's records (a changed service is reported
// itself), or the docker_gwbridge network the swarm makes when it first
// starts a task.
func swarmOwns(now, base State, entry string) bool {
	if !base.Swarm.In() || now.Swarm != base.Swarm {
		return false
	}
	if strings.HasSuffix(entry, "@docker_gwbridge") {
		return true
	}
	for _, t := range now.Tasks {
		if id, service, _ := strings.Cut(t, "@"); id == entry && slices.Contains(ids(base.Services), service) {
			return true
		}
	}
	return false
}

// readPlugins notes every plugin as id@digest of what a job can change in
// it (enabled, settings, the reference it was installed or upgraded from).
func (d Daemon) readPlugins(ctx context.Context, s *State) error {
	ids, err := d.run(ctx, "plugin", "ls", "--quiet", "--no-trunc")
	if err != nil || len(strings.Fields(ids)) == 0 {
		return err
	}
	out, err := d.run(ctx, append([]string{"plugin", "inspect", "--format", "{{.ID}} {{.Enabled}} {{.PluginReference}} {{json .Settings}}"}, strings.Fields(ids)...)...)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		id, _, _ := strings.Cut(line, " ")
		sum := sha256.Sum256([]byte(line))
		s.Plugins = append(s.Plugins, id+"@"+hex.EncodeToString(sum[:6]))
	}
	return nil
}

// restoreSwarm takes the node out of a swarm the note had not (its tasks'
// containers go with it), and on the noted swarm removes the services,
// secrets, configs and nodes the note lacks. A noted swarm the node left
// or that is another now, and a noted object that changed, cannot be put
// back: Extras reports them and the instance is never pooled.
func (d Daemon) restoreSwarm(ctx context.Context, now, base State, try func(...string)) {
	if !now.Swarm.In() {
		return
	}
	if !base.Swarm.In() {
		try("swarm", "leave", "--force")
		return
	}
	if now.Swarm != base.Swarm || !now.Swarm.Manager {
		return
	}
	// Services before the secrets and configs they use.
	for _, k := range swarmKinds {
		noted := ids(*k.of(&base))
		var extra []string
		for _, e := range *k.of(&now) {
			if id := idOf(e); !slices.Contains(noted, id) {
				extra = append(extra, id)
			}
		}
		if len(extra) == 0 {
			continue
		}
		args := []string{k.name, "rm"}
		if k.name == "node" {
			args = append(args, "--force")
		}
		try(append(args, extra...)...)
	}
}

// restorePlugins removes the plugins the note lacks; a noted plugin a job
// changed is left for Extras to report.
func (d Daemon) restorePlugins(ctx context.Context, now, base State, try func(...string)) {
	noted := ids(base.Plugins)
	for _, e := range now.Plugins {
		if id := idOf(e); !slices.Contains(noted, id) {
			try("plugin", "rm", "--force", id)
		}
	}
}

// swarmExtras lists how the swarm and the plugins differ from base.
func swarmExtras(now, base State) []string {
	var found []string
	if now.Swarm.In() != base.Swarm.In() || (base.Swarm.In() && now.Swarm != base.Swarm) {
		found = append(found, fmt.Sprintf("swarm %s (noted: %s)", now.Swarm, base.Swarm))
	}
	for _, k := range swarmKinds {
		for _, e := range changed(*k.of(&now), *k.of(&base)) {
			found = append(found, k.name+" "+described(e, *k.of(&base)))
		}
	}
	for _, e := range changed(now.Plugins, base.Plugins) {
		found = append(found, "plugin "+described(e, base.Plugins))
	}
	return found
}

// described names an entry by its short id, saying whether the note has
// the object in another version.
func described(entry string, base []string) string {
	id := idOf(entry)
	if slices.Contains(ids(base), id) {
		return short(id) + " (changed since noted)"
	}
	return short(id)
}

func idOf(entry string) string { id, _, _ := strings.Cut(entry, "@"); return id }

func ids(entries []string) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = idOf(e)
	}
	return out
}
