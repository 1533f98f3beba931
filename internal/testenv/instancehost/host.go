// Package instancehost plays the EC2 instances of a local deployment: it
// watches EC2 (moto) for the deployment's instances and runs one real agent
// process per running instance, each with its own metadata service, folders
// and runner; it stops the agent when the instance is terminated and, like
// systemd's Restart=always, restarts an agent that exits while its instance
// still runs. Tests and the sandbox use it.
package instancehost

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/imdsstub"
)

// The host: watching EC2 for the deployment's instances, starting and
// stopping their agents as they come and go, and the controls tests use
// (Kill, Freeze, Agent, Errors). One agent's process is in agent.go, the
// instance's users in users.go.

// EC2 is what the host reads of EC2.
type EC2 interface {
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

// Options configure a host.
type Options struct {
	EC2         EC2
	Region      string
	Environment string // the ghr:environment tag of the deployment
	AgentBinary string
	Root        string // one folder per instance is made under it
	// Config returns the agent configuration of an instance; the host sets
	// the folders and the metadata endpoint.
	Config func(instanceID string, tags map[string]string) config.Config
	// PrepareRunner installs the runner software into dir.
	PrepareRunner func(dir string) error
	// Env is added to every agent's environment (credentials, endpoints).
	Env []string
	// Role, when set, gives an instance its instance profile's role and
	// credentials; the metadata service serves them and the agent finds
	// them as on EC2, through the SDK's default chain (Env must then hold
	// no credentials). An error is noted and the agent started without.
	Role   func(instanceID string) (string, imdsstub.Credentials, error)
	Poll   time.Duration // default 200 ms
	Output io.Writer     // agents' logs; default discarded
	// RunnerUsers gives each instance's runner an unprivileged user of its
	// own, created when its agent first starts (as user data does) and
	// deleted with the instance: jobs then run as on EC2, and the agent's
	// cleanup (killing the user's processes, resetting its home) is real.
	// It needs root; without it the runners run as the agent's own user.
	RunnerUsers bool
}

// Agent is one running agent process.
type Agent struct {
	InstanceID string
	Dir        string
	User       string // the runner's user; empty: the agent's own
	IMDS       *imdsstub.Server
	Starts     int // how often the process was started

	cmd      *exec.Cmd
	exited   chan struct{}
	exitedAt time.Time
	frozen   bool
	halted   bool // its instance is stopping or stopped (reboot.go)
	haltDone bool // and its processes have ended: it may boot again
	// Boots counts the instance's boots: 1 from its launch, one more for
	// each start after a stop.
	Boots   int
	unblock func()   // removes the user's firewall rule (BlockIMDS)
	out     *os.File // the write end of the instance's output pipe (keepOutput)
}

// Host runs the agents.
type Host struct {
	opts   Options
	mu     sync.Mutex
	agents map[string]*Agent
	cancel context.CancelFunc
	done   chan struct{}
	errs   []error
}

// Start begins watching EC2.
func Start(ctx context.Context, opts Options) (*Host, error) {
	if opts.Poll == 0 {
		opts.Poll = 200 * time.Millisecond
	}
	if opts.Output == nil {
		opts.Output = io.Discard
	}
	if _, err := os.Stat(opts.AgentBinary); err != nil {
		return nil, fmt.Errorf("agent binary: %w", err)
	}
	// The agent accepts absolute folders only, as on a real instance.
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	opts.Root = root
	if opts.RunnerUsers {
		if os.Getuid() != 0 {
			return nil, fmt.Errorf("RunnerUsers needs root, to create users (run as root, or without RunnerUsers)")
		}
		// The runner users must reach their instance's folders.
		if err := os.MkdirAll(root, 0o755); err != nil {
			return nil, err
		}
		if err := Reachable(root); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	h := &Host{opts: opts, agents: map[string]*Agent{}, cancel: cancel, done: make(chan struct{})}
	go h.watch(ctx)
	return h, nil
}

// Stop stops watching and stops every agent.
func (h *Host) Stop() {
	h.cancel()
	<-h.done
	h.mu.Lock()
	agents := make([]*Agent, 0, len(h.agents))
	for _, a := range h.agents {
		agents = append(agents, a)
	}
	h.mu.Unlock()
	for _, a := range agents {
		h.stopAgent(a)
	}
}

// Agent returns the agent of an instance, nil if none runs.
func (h *Host) Agent(instanceID string) *Agent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.agents[instanceID]
}

// Kill kills an instance's agent process abruptly (a crash); the host
// restarts it like systemd would, after a second.
func (h *Host) Kill(instanceID string) bool {
	h.mu.Lock()
	a := h.agents[instanceID]
	h.mu.Unlock()
	if a == nil || a.cmd == nil {
		return false
	}
	return a.killGroup(syscall.SIGKILL)
}

// killGroup signals the agent's process group (Setpgid: pgid = its pid)
// while the agent runs. Once it exited and was reaped its pid is free, and
// the machine's pids wrap around (pid_max 32768 here): the number may be
// another instance's agent's group by then.
func (a *Agent) killGroup(sig syscall.Signal) bool {
	select {
	case <-a.exited:
		return false
	default:
	}
	return syscall.Kill(-a.cmd.Process.Pid, sig) == nil
}

// Freeze kills an instance's agent and keeps it from restarting, as if the
// instance hung: the instance stays running but nothing answers.
func (h *Host) Freeze(instanceID string) bool {
	h.mu.Lock()
	a := h.agents[instanceID]
	if a != nil {
		a.frozen = true
	}
	h.mu.Unlock()
	if a == nil || a.cmd == nil {
		return false
	}
	a.killGroup(syscall.SIGKILL)
	killRunnerGroups(a.Dir)
	return true
}

// Errors returns problems the host met (e.g. an agent it could not start).
func (h *Host) Errors() []error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]error(nil), h.errs...)
}

func (h *Host) watch(ctx context.Context) {
	defer close(h.done)
	for {
		running, err := h.instances(ctx)
		if err == nil {
			h.sync(ctx, running)
		} else if ctx.Err() == nil {
			h.note(fmt.Errorf("describe instances: %w", err))
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(h.opts.Poll):
		}
	}
}

// instances lists the deployment's instances that are booting, running,
// stopping or stopped, with their tags and state (the sandbox's overlay of
// EC2's states: ec2states.go).
func (h *Host) instances(ctx context.Context) (map[string]seenInstance, error) {
	out := map[string]seenInstance{}
	pages := ec2.NewDescribeInstancesPaginator(h.opts.EC2, &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("tag:ghr:environment"), Values: []string{h.opts.Environment}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
	}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				tags := map[string]string{}
				for _, t := range i.Tags {
					tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
				}
				var st types.InstanceStateName
				if i.State != nil {
					st = i.State.Name
				}
				out[aws.ToString(i.InstanceId)] = seenInstance{tags: tags, state: st}
			}
		}
	}
	return out, nil
}

type seenInstance struct {
	tags  map[string]string
	state types.InstanceStateName
}

// sync makes the agents what EC2 says: one runs on every running
// instance (restarted like systemd's Restart=always), none on a booting
// one; a stopping or stopped instance's is halted, its disk kept; a gone
// one's ends with its instance.
func (h *Host) sync(ctx context.Context, seen map[string]seenInstance) {
	h.mu.Lock()
	var stop, halt []*Agent
	for id, a := range h.agents {
		inst, ok := seen[id]
		switch {
		case !ok:
			stop = append(stop, a)
			delete(h.agents, id)
		case (inst.state == types.InstanceStateNameStopping || inst.state == types.InstanceStateNameStopped) && !a.halted:
			a.halted = true
			halt = append(halt, a)
		}
	}
	var start []string
	for id, inst := range seen {
		if inst.state != types.InstanceStateNameRunning {
			continue
		}
		a, ok := h.agents[id]
		if !ok || a.halted && a.haltDone || !a.halted && a.exitedLongAgo() && !a.frozen {
			start = append(start, id) // a first boot, a boot after a stop, or Restart=always
		}
	}
	h.mu.Unlock()
	for _, a := range stop {
		h.stopAgent(a)
	}
	for _, a := range halt {
		h.haltAgent(a)
	}
	for _, id := range start {
		if err := h.startAgent(ctx, id, seen[id].tags); err != nil {
			h.note(fmt.Errorf("start agent of %s: %w", id, err))
		}
	}
}

func (h *Host) note(err error) {
	if h.opts.Output != nil {
		fmt.Fprintf(h.opts.Output, "instancehost: %v\n", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.errs = append(h.errs, err)
}
