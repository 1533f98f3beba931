// Package instancehost plays the EC2 instances of a local deployment: it
// watches EC2 (moto) for the deployment's instances and runs one real agent
// process per running instance, each with its own metadata service, folders
// and runner; it stops the agent when the instance is terminated and, like
// systemd's Restart=always, restarts an agent that exits while its instance
// still runs. Tests and the sandbox use it.
package instancehost

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/imdsstub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/pinned"
)

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

func (h *Host) startAgent(ctx context.Context, id string, tags map[string]string) error {
	h.mu.Lock()
	a := h.agents[id]
	reboot := a != nil && a.halted
	h.mu.Unlock()
	if reboot {
		if err := h.boot(a); err != nil {
			return err
		}
	}
	if a == nil {
		dir := filepath.Join(h.opts.Root, id)
		a = &Agent{InstanceID: id, Dir: dir, IMDS: imdsstub.Start(id, h.opts.Region, tags["ghr:instance-type"], tags)}
		for _, sub := range []string{"runner", "work", "state", "etc"} {
			if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
				return err
			}
		}
		if err := a.keepOutput(h.opts.Output); err != nil {
			return err
		}
		if h.opts.PrepareRunner != nil {
			if err := h.opts.PrepareRunner(filepath.Join(dir, "runner")); err != nil {
				return err
			}
		}
		if h.opts.Role != nil {
			role, creds, err := h.opts.Role(id)
			if err != nil {
				h.note(fmt.Errorf("instance %s: its role: %w", id, err))
			} else {
				a.IMDS.SetRole(role, creds)
			}
		}
		cfg := h.opts.Config(id, tags)
		if h.opts.RunnerUsers {
			user, err := addUser(id, filepath.Join(dir, "home"))
			if err != nil {
				return err
			}
			a.User = user // deleted by stopAgent, with its firewall rule
			cfg.RunnerUser = a.User
			if a.unblock, err = BlockIMDS(user, a.IMDS.URL()); err != nil {
				DeleteUser(user)
				return err
			}
		}
		cfg.RunnerDir, cfg.RunDir, cfg.WorkDir, cfg.StateDir = filepath.Join(dir, "runner"), filepath.Join(dir, "run"), filepath.Join(dir, "work"), filepath.Join(dir, "state")
		cfg.FirewallFailureFile = filepath.Join(dir, "firewall-failed")
		cfg.BootIDFile = filepath.Join(dir, bootIDFile)
		if err := newBoot(a); err != nil {
			return err
		}
		cfg.IMDSEndpoint = a.IMDS.URL()
		if cfg.UserDataLog != "" {
			// What cloud-init keeps of the user data's output on a real
			// instance; the user data itself runs in templates' tests.
			cfg.UserDataLog = filepath.Join(dir, "cloud-init-output.log")
			if err := os.WriteFile(cfg.UserDataLog, []byte("ghrunner-userdata: runner user "+cfg.RunnerUser+"\nghrunner-userdata: agent started\n"), 0o600); err != nil {
				return err
			}
		}
		raw, _ := json.MarshalIndent(cfg, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "etc", "agent.json"), raw, 0o600); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, h.opts.AgentBinary, "-config", filepath.Join(a.Dir, "etc", "agent.json"))
	// The runners run as the agent's own user, root here.
	cmd.Env = append(os.Environ(), append(h.opts.Env, fakegithub.AllowRoot)...)
	if h.opts.Role != nil {
		// As on EC2: credentials come from the metadata service, never the
		// environment or a file.
		cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool {
			k, _, _ := strings.Cut(kv, "=")
			return k == "AWS_ACCESS_KEY_ID" || k == "AWS_SECRET_ACCESS_KEY" || k == "AWS_SESSION_TOKEN" || k == "AWS_PROFILE"
		})
		cmd.Env = append(cmd.Env, "AWS_EC2_METADATA_SERVICE_ENDPOINT="+a.IMDS.URL(), "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_CONFIG_FILE=/dev/null")
	}
	cmd.Stdout, cmd.Stderr = a.out, a.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// The runner the agent starts shares its output pipe and outlives it on
	// purpose (a job goes on through an agent restart): do not wait for the
	// pipe to close once the agent itself has exited.
	cmd.WaitDelay = time.Second
	if err := pinned.Start(cmd); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		h.mu.Lock()
		a.exitedAt = time.Now()
		h.mu.Unlock()
		close(exited)
	}()
	h.mu.Lock()
	a.cmd, a.exited, a.Starts = cmd, exited, a.Starts+1
	h.agents[id] = a
	h.mu.Unlock()
	return nil
}

// stopAgent ends an agent (its instance is gone) and its runner processes.
func (h *Host) stopAgent(a *Agent) {
	// The runner runs in a process group of its own: an instance that is
	// terminated takes every process with it, and its user.
	defer DeleteUser(a.User)
	defer a.out.Close()
	if a.unblock != nil {
		defer a.unblock()
	}
	defer runner.RemoveCgroup(filepath.Join(a.Dir, "run")) // the runner's cgroup ends with the instance
	defer killRunnerGroups(a.Dir)
	if a.cmd != nil {
		a.killGroup(syscall.SIGTERM)
		select {
		case <-a.exited:
		case <-time.After(5 * time.Second):
			a.killGroup(syscall.SIGKILL)
			<-a.exited
		}
	}
	a.IMDS.Close()
}

// StdoutFile is the file an agent's output is appended to, every process
// of it in turn (and the runner it started): what a check compares with
// the log stream the agent ships.
func (a *Agent) StdoutFile() string { return filepath.Join(a.Dir, "agent.out") }

// keepOutput gives the instance one output pipe for all its agent's
// processes: whole lines go to the host's output and to StdoutFile. The host
// holds the pipe open, so a runner that outlives an agent's restart never
// writes into a closed pipe (and exec hands the agent the descriptor: no
// copy of its own to wait for).
func (a *Agent) keepOutput(to io.Writer) error {
	kept, err := os.OpenFile(a.StdoutFile(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		kept.Close()
		return err
	}
	a.out = w
	go func() {
		defer kept.Close()
		defer r.Close()
		lines := bufio.NewReaderSize(r, 64*1024)
		for {
			line, err := lines.ReadBytes('\n')
			if len(line) > 0 {
				to.Write(line) // one write per line: the instances share to
				kept.Write(line)
			}
			if err != nil {
				return
			}
		}
	}()
	return nil
}

// PID is the agent process's id, 0 when it is not running.
func (a *Agent) PID() int {
	if a.cmd == nil || a.cmd.Process == nil {
		return 0
	}
	select {
	case <-a.exited:
		return 0
	default:
		return a.cmd.Process.Pid
	}
}

// exitedLongAgo: like systemd's RestartSec=1, an agent that keeps failing
// is restarted once a second, not in a tight loop. Called with h.mu held.
func (a *Agent) exitedLongAgo() bool {
	select {
	case <-a.exited:
		return time.Since(a.exitedAt) >= time.Second
	default:
		return false
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

// killRunnerGroups kills the process group of the run.sh noted in the
// instance's agent state folder, with any job it runs.
func killRunnerGroups(instanceDir string) {
	raw, err := os.ReadFile(filepath.Join(instanceDir, "state", runner.PIDFile))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return
	}
	// The file outlives its run.sh, and the machine's pids wrap around
	// (pid_max is 32768 here): a stale pid may be another instance's agent
	// now, whose group (Setpgid: pgid = pid) this would kill silently, as
	// the agent's own adopted() guards against. Only a process working in
	// this instance's folders is its run.sh.
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil || !strings.HasPrefix(filepath.Clean(cwd)+"/", filepath.Clean(instanceDir)+"/") {
		return
	}
	syscall.Kill(-pid, syscall.SIGKILL)
}

// addUser creates the runner user of an instance, with its home in home.
func addUser(instanceID, home string) (string, error) {
	name := "gr-" + instanceID // at most 32 characters: gr-i- and 17 hex digits
	if len(name) > 32 {
		name = name[:32]
	}
	return name, AddUser(name, home)
}

// AddUser creates an unprivileged user with its own group and its home in
// home, as user data creates the runner user; one that exists already is
// kept. It needs root.
func AddUser(name, home string) error {
	// Other test processes add and delete users too: useradd fails at once
	// (exit 10) while another holds the lock on /etc/passwd.
	for attempt := 1; ; attempt++ {
		out, err := exec.Command("useradd", "--create-home", "--home-dir", home, "--shell", "/bin/bash", "--user-group", name).CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ee) && ee.ExitCode() == 9:
			return nil // made by an earlier start that failed later
		case errors.As(err, &ee) && ee.ExitCode() == 10 && attempt < 50:
			time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
		default:
			return fmt.Errorf("useradd %s: %v: %s", name, err, out)
		}
	}
}

// Reachable lets every user traverse dir and its parents (read and
// search for others): a test's temporary folders are its own (0700), and
// an unprivileged runner user must reach its folders under them.
func Reachable(dir string) error {
	for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if info, err := os.Stat(dir); err == nil && info.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(dir, info.Mode().Perm()|0o005); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteUser kills whatever still runs as the user, then deletes it.
func DeleteUser(name string) {
	if name == "" {
		return
	}
	for range 50 {
		exec.Command("pkill", "-KILL", "-u", name).Run()
		if exec.Command("userdel", name).Run() == nil {
			return
		}
		time.Sleep(time.Duration(50+rand.IntN(150)) * time.Millisecond)
	}
}
