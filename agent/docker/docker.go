// Package docker puts an instance's docker daemon back the way it was before
// the first assignment, between every two runs.
//
// A job that can reach the daemon leaves objects the next run would meet: a
// container still running with the work folder mounted (it reads run B's
// checkout), a volume or network it mounts, an image tagged with a name the
// next run pulls ("node:20" now being the job's own). The agent notes the
// daemon's objects once, after the operator's pre-runner script (what the
// image and that script made are trusted), and after every assignment
// leaves a swarm the note had not, removes every service, secret, config,
// node, plugin, container, volume, network and image not in that note, and
// gives the noted images back their noted tags. Keeping images (a warm
// cache) is the operator's choice and a trust: a run can then leave an
// image under a name a later run uses.
//
// What the docker command line keeps on the client side, contexts and
// buildx builders, lives in the runner user's ~/.docker, which the home
// reset removes (agent/runner); a builder's docker-container driver leaves
// a container and a volume, which the sweep here removes.
//
// The daemon runs as root and acts for anyone who can reach its socket: a
// job in the docker group is root on the instance, and every other control
// of the agent then rests on its good will (docs/security.md).
//
// The docker command line is used, not the Engine API: it is what every
// docker installation ships, and the agent gains no dependency.
package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"
)

// Daemon is the instance's docker daemon, reached with the docker command.
type Daemon struct {
	// Command is the docker CLI; empty means "docker" on PATH.
	Command string
	// Host is the daemon's address (DOCKER_HOST); empty means the CLI's default.
	Host string
	// Timeout bounds each command; zero means a minute.
	Timeout time.Duration
}

// Image is an image's id and the names that point at it.
type Image struct {
	ID   string   `json:"id"`
	Tags []string `json:"tags,omitempty"`
}

// State is the set of the daemon's objects, by id (volumes by name).
type State struct {
	// Present is false when the instance has no docker command: there is
	// nothing to note or to clean.
	Present bool `json:"present"`
	// Containers are noted by id; Networks as id@name.
	Containers []string `json:"containers,omitempty"`
	Images     []Image  `json:"images,omitempty"`
	Volumes    []string `json:"volumes,omitempty"`
	Networks   []string `json:"networks,omitempty"`
	// Swarm and what a manager holds (swarm.go); the objects are noted as
	// id@version.
	Swarm    Swarm    `json:"swarm"`
	Services []string `json:"services,omitempty"`
	Secrets  []string `json:"secrets,omitempty"`
	Configs  []string `json:"configs,omitempty"`
	Nodes    []string `json:"nodes,omitempty"`
	// Plugins are noted as id@digest (swarm.go).
	Plugins []string `json:"plugins,omitempty"`
	// Tasks are the containers the swarm runs for its services, as
	// container-id@service-id, from the swarm's own records (a job can
	// label a container of its own as a service's).
	Tasks []string `json:"tasks,omitempty"`
}

// ErrUnreachable says the docker command is installed but its daemon did
// not answer.
var ErrUnreachable = errors.New("the docker daemon does not answer")

// Read lists the daemon's objects. With no docker command it returns a
// State that is not Present and no error.
func (d Daemon) Read(ctx context.Context) (State, error) {
	if _, err := exec.LookPath(d.command()); err != nil {
		return State{}, nil
	}
	s := State{Present: true}
	lists := []struct {
		into *[]string
		args []string
	}{
		{&s.Containers, []string{"ps", "--all", "--quiet", "--no-trunc"}},
		{&s.Volumes, []string{"volume", "ls", "--quiet"}},
		{&s.Networks, []string{"network", "ls", "--no-trunc", "--format", "{{.ID}}@{{.Name}}"}},
	}
	for _, l := range lists {
		out, err := d.run(ctx, l.args...)
		if err != nil {
			return State{}, err
		}
		*l.into = strings.Fields(out)
	}
	images, err := d.images(ctx)
	if err != nil {
		return State{}, err
	}
	s.Images = images
	if err := d.readSwarm(ctx, &s); err != nil {
		return State{}, err
	}
	if err := d.readPlugins(ctx, &s); err != nil {
		return State{}, err
	}
	return s, nil
}

// images lists every image (intermediate ones too) with its tags.
func (d Daemon) images(ctx context.Context) ([]Image, error) {
	out, err := d.run(ctx, "image", "ls", "--all", "--no-trunc", "--format", "{{.ID}} {{.Repository}}:{{.Tag}}")
	if err != nil {
		return nil, err
	}
	byID := map[string]*Image{}
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		id, ref, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		img := byID[id]
		if img == nil {
			img = &Image{ID: id}
			byID[id] = img
			order = append(order, id)
		}
		if !strings.Contains(ref, "<none>") {
			img.Tags = append(img.Tags, ref)
		}
	}
	images := make([]Image, 0, len(order))
	for _, id := range order {
		sort.Strings(byID[id].Tags)
		images = append(images, *byID[id])
	}
	return images, nil
}

// Restore removes what is not in base and gives base's images their tags
// back; with keepImages, images (and their tags) are left as they are. It
// returns every failure, and then Extras is the judge of what is left.
func (d Daemon) Restore(ctx context.Context, base State, keepImages bool) error {
	now, err := d.Read(ctx)
	if err != nil || !now.Present {
		return err
	}
	var errs []error
	try := func(args ...string) {
		if _, err := d.run(ctx, args...); err != nil {
			errs = append(errs, err)
		}
	}
	// The swarm first: it starts its tasks' containers again when they
	// are removed, and leaving it removes them (and leaves its networks
	// to the sweep below, on a fresh list).
	if now.Swarm.In() {
		d.restoreSwarm(ctx, now, base, try)
		if now, err = d.Read(ctx); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	// Containers next: they hold volumes, networks and images.
	if extra := ids(swept(now, base, now.Containers, base.Containers)); len(extra) > 0 {
		try(append([]string{"rm", "--force", "--volumes"}, extra...)...)
	}
	if extra := missing(now.Volumes, base.Volumes); len(extra) > 0 {
		try(append([]string{"volume", "rm", "--force"}, extra...)...)
	}
	for _, n := range ids(swept(now, base, now.Networks, base.Networks)) {
		try("network", "rm", n)
	}
	// Plugins once nothing uses them (a volume or network driver).
	d.restorePlugins(ctx, now, base, try)
	if keepImages {
		return errors.Join(errs...)
	}
	// A noted image whose name the job moved to its own image gets it
	// back before the job's image goes; then names the job added to
	// noted images are taken off (the noted names keep them alive).
	for _, img := range base.Images {
		for _, tag := range img.Tags {
			if tagOf(now.Images, tag) != img.ID && has(now.Images, img.ID) {
				try("tag", img.ID, tag)
			}
		}
	}
	for _, img := range now.Images {
		if noted, ok := find(base.Images, img.ID); ok && len(noted.Tags) > 0 {
			for _, tag := range img.Tags {
				if !slices.Contains(noted.Tags, tag) {
					try("image", "rm", tag)
				}
			}
		}
	}
	// The job's images: a parent goes with its last child, and a child
	// must go before its parent, so remove in passes, each on a fresh list;
	// what still fails is left for Extras to report.
	for pass := 0; pass < 5; pass++ {
		images, err := d.images(ctx)
		if err != nil {
			errs = append(errs, err)
			break
		}
		var extra []string
		for _, img := range images {
			if !has(base.Images, img.ID) {
				extra = append(extra, img.ID)
			}
		}
		if len(extra) == 0 {
			break
		}
		for _, id := range extra {
			d.run(ctx, "image", "rm", "--force", id) // judged by the next pass
		}
	}
	// Build cache a job filled can answer a later build's step with the
	// job's own layer.
	try("builder", "prune", "--all", "--force")
	return errors.Join(errs...)
}

// Extras lists what now holds beyond base: a swarm other than noted, its
// services, secrets, configs and nodes, plugins, containers, volumes,
// networks, and, unless images are kept, images and names that base did
// not have or that point elsewhere. Empty means the daemon is as noted.
func Extras(now, base State, keepImages bool) []string {
	found := swarmExtras(now, base)
	for _, c := range swept(now, base, now.Containers, base.Containers) {
		found = append(found, "container "+short(idOf(c)))
	}
	for _, v := range missing(now.Volumes, base.Volumes) {
		found = append(found, "volume "+v)
	}
	for _, n := range swept(now, base, now.Networks, base.Networks) {
		id, name, _ := strings.Cut(n, "@")
		found = append(found, strings.TrimSpace("network "+short(id)+" "+name))
	}
	if keepImages {
		return found
	}
	for _, img := range now.Images {
		noted, ok := find(base.Images, img.ID)
		if !ok {
			found = append(found, fmt.Sprintf("image %s %v", short(img.ID), img.Tags))
			continue
		}
		for _, tag := range img.Tags {
			if !slices.Contains(noted.Tags, tag) {
				found = append(found, fmt.Sprintf("name %s on image %s", tag, short(img.ID)))
			}
		}
	}
	return found
}

func (d Daemon) command() string {
	if d.Command != "" {
		return d.Command
	}
	return "docker"
}

// run runs one docker command and returns its standard output.
func (d Daemon) run(ctx context.Context, args ...string) (string, error) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if d.Host != "" {
		args = append([]string{"--host", d.Host}, args...)
	}
	cmd := exec.CommandContext(ctx, d.command(), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "Cannot connect to the Docker daemon") || strings.Contains(msg, "Is the docker daemon running") {
			return "", fmt.Errorf("docker %s: %w: %s", args[0], ErrUnreachable, msg)
		}
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}

// missing lists the entries of now whose id base lacks (an entry is an id,
// or id@what).
func missing(now, base []string) []string {
	noted := ids(base)
	var out []string
	for _, x := range now {
		if !slices.Contains(noted, idOf(x)) {
			out = append(out, x)
		}
	}
	return out
}

// changed lists the entries of now that base lacks as they are: a new
// object, or a noted one in another version.
func changed(now, base []string) []string {
	var out []string
	for _, x := range now {
		if !slices.Contains(base, x) {
			out = append(out, x)
		}
	}
	return out
}

// swept lists the containers or networks of now that base lacks and that
// are not the noted swarm's own (swarmOwns).
func swept(nowState, baseState State, now, base []string) []string {
	var out []string
	for _, x := range missing(now, base) {
		if !swarmOwns(nowState, baseState, x) {
			out = append(out, x)
		}
	}
	return out
}

func find(images []Image, id string) (Image, bool) {
	for _, img := range images {
		if img.ID == id {
			return img, true
		}
	}
	return Image{}, false
}

func has(images []Image, id string) bool { _, ok := find(images, id); return ok }

// tagOf is the id of the image a name points at, "" if none.
func tagOf(images []Image, tag string) string {
	for _, img := range images {
		if slices.Contains(img.Tags, tag) {
			return img.ID
		}
	}
	return ""
}

func short(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
