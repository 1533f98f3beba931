package instancehost

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/imdsstub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/pinned"
)

// One instance's agent process: started with its own metadata service,
// folders, runner user and output, stopped with every process of its
// instance, and what tests read of it.

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
