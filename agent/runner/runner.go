// Package runner drives the GitHub Actions runner software through its
// documented command-line contract: `config.sh` to register and remove,
// `run.sh` to listen for jobs. Anything honouring that contract (the real
// runner, or the fake runner of the tests) can stand in.
package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Runner is one runner installation.
type Runner struct {
	// Install holds the runner software (config.sh, run.sh, bin/), sealed:
	// the agent's alone (Seal). Dir is the copy of it the current
	// assignment runs in, made afresh for each (see layout.go).
	Install string
	Dir     string
	WorkDir string // the runner's work folder
	// User runs config.sh and run.sh; empty: the agent's own user.
	User string
	// StateDir is the agent's own directory, which the runner user cannot
	// write: the PID file is kept there. In Dir, which belongs to the job
	// user, a job could plant a symlink there that the agent, writing as
	// root, would follow, or a PID that an agent restart would adopt.
	StateDir string

	// The runner's cgroup (cgroup.go): its folder and a descriptor of it;
	// cgNone once the host was found to offer none.
	cgMu   sync.Mutex
	cgDir  string
	cgFD   int
	cgNone bool

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// PIDFile is where, in StateDir, Start notes run.sh's process id, so that
// an agent that restarts finds the runner still running (a job may be under
// way) instead of starting a second one.
const PIDFile = ".ghrunner-run.pid"

func (r *Runner) pidFile() string { return filepath.Join(r.StateDir, PIDFile) }

// adopted returns the process id of a run.sh started by an earlier agent
// process that still runs in this runner directory, or 0.
func (r *Runner) adopted() int {
	raw, err := os.ReadFile(r.pidFile())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	// Guard against a reused pid: the process must run in this directory.
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || filepath.Clean(cwd) != filepath.Clean(r.Dir) {
		return 0
	}
	return pid
}

// File is what the runner writes to .runner when configured.
type File struct {
	AgentID    int64  `json:"agentId"`
	AgentName  string `json:"agentName"`
	PoolID     int64  `json:"poolId"`
	ServerURL  string `json:"serverUrl"`
	GitHubURL  string `json:"gitHubUrl"`
	WorkFolder string `json:"workFolder"`
	// DisableUpdate: the runner never replaces itself (config.sh
	// --disableupdate).
	DisableUpdate bool `json:"disableUpdate"`
}

// Registration is what Configure needs.
type Registration struct {
	URL    string
	Token  string
	Name   string
	Labels string // comma-separated; ours is the run's label alone
	Group  string // the organization's runner group; empty: its default
}

// Configured reads .runner; ok is false when the runner is not configured.
func (r *Runner) Configured() (File, bool, error) {
	raw, err := os.ReadFile(filepath.Join(r.Dir, ".runner"))
	if errors.Is(err, os.ErrNotExist) {
		return File{}, false, nil
	}
	if err != nil {
		return File{}, false, err
	}
	// The real runner writes .runner with a UTF-8 byte order mark.
	raw = bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf"))
	var f File
	if err := json.Unmarshal(raw, &f); err != nil {
		return File{}, false, fmt.Errorf("read .runner: %w", err)
	}
	return f, true, nil
}

// disableUpdateRefused is what config.sh says when the server did not keep
// --disableupdate (actions/runner's ConfigurationManager.cs).
const disableUpdateRefused = "does not support configuring a self-hosted runner with 'DisableUpdate' flag"

// Configure registers the runner, in a fresh copy of the install, and
// returns its GitHub runner id.
func (r *Runner) Configure(ctx context.Context, reg Registration) (File, error) {
	if err := r.fresh(nil); err != nil {
		return File{}, err
	}
	if err := os.MkdirAll(r.WorkDir, 0o755); err != nil {
		return File{}, err
	}
	if err := r.chown(r.WorkDir); err != nil {
		return File{}, err
	}
	args := []string{"--unattended", "--url", reg.URL, "--name", reg.Name,
		"--labels", reg.Labels, "--no-default-labels", "--work", r.WorkDir, "--replace",
		// The runner installed is the one the pool's checksum named: a
		// self-update would swap it for another between runs.
		"--disableupdate"}
	if reg.Group != "" {
		args = append(args, "--runnergroup", reg.Group)
	}
	out, err := r.run(ctx, reg.Token, "./config.sh", args...)
	if err != nil && strings.Contains(string(out), disableUpdateRefused) {
		// Some GitHub Enterprise Server releases do not keep the flag:
		// config.sh fails after the server added the runner
		// (ConfigurationManager.cs), and --replace takes it over. Such a
		// server's runner may update itself when the server offers a
		// newer one; the File says so (DisableUpdate false).
		if err = r.fresh(nil); err != nil {
			return File{}, err
		}
		out, err = r.run(ctx, reg.Token, "./config.sh", slices.DeleteFunc(args, func(a string) bool { return a == "--disableupdate" })...)
	}
	if err != nil {
		return File{}, fmt.Errorf("config.sh: %w: %s", err, tail(out))
	}
	f, ok, err := r.Configured()
	if err != nil || !ok {
		return File{}, fmt.Errorf("config.sh succeeded but left no readable .runner (%v): %s", err, tail(out))
	}
	return f, nil
}

// Remove deregisters the runner with a remove token. config.sh remove runs
// as the runner user with the token in its environment and loads .env: it
// runs from a fresh copy of the install that holds only the runner's
// identity files, not from the copy the jobs could write to.
func (r *Runner) Remove(ctx context.Context, token string) error {
	identity, err := r.identity()
	if err != nil {
		return err
	}
	if err := r.fresh(identity); err != nil {
		return err
	}
	out, err := r.run(ctx, token, "./config.sh", "remove")
	if err != nil {
		return fmt.Errorf("config.sh remove: %w: %s", err, tail(out))
	}
	return nil
}

// identityFiles are the files configuring a runner leaves in its
// directory. Newer runners' listeners also keep the settings and
// credentials the service migrated them to (the _migrated files), and
// config.sh refuses to configure while .runner or .runner_migrated exists.
var identityFiles = []string{".runner", ".credentials", ".credentials_rsaparams", ".runner_migrated", ".credentials_migrated"}

// Leftovers reports whether any file of a runner configuration is in the
// runner directory.
func (r *Runner) Leftovers() bool {
	for _, f := range identityFiles {
		if _, err := os.Lstat(filepath.Join(r.Dir, f)); err == nil {
			return true
		}
	}
	return false
}

// Forget discards the assignment's copy of the runner with its
// registration files, for when GitHub cannot be told (no remove token) or
// was told already: the server side is left to the control plane.
func (r *Runner) Forget() error { return r.discard() }

// Start launches run.sh. It returns at once; Alive tells whether it still runs.
func (r *Runner) Start() error { return r.start(nil) }

// start launches run.sh with env added to its environment.
func (r *Runner) start(env []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil && !closed(r.exited) || r.cmd == nil && r.adopted() != 0 {
		return errors.New("runner already started")
	}
	if r.StateDir == "" {
		return errors.New("runner: StateDir is required (the PID file is kept there, out of the job user's reach)")
	}
	cmd, err := r.command(context.Background(), "./run.sh")
	if err != nil {
		return err
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := r.openOutput()
	if err != nil {
		return fmt.Errorf("run.sh's output file: %w", err)
	}
	defer out.Close() // run.sh has its own descriptor
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so a stop reaches the job's processes too.
	cmd.SysProcAttr.Setpgid = true
	if err := startInOwnSession(cmd); err != nil {
		return fmt.Errorf("start run.sh: %w", err)
	}
	exited := make(chan struct{})
	go mirror(r.outputPath(), exited)
	r.cmd, r.exited = cmd, exited
	if err := writeFileNoFollow(r.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid))); err != nil {
		// Only an agent restart during this run needs it: it would then
		// start a second run.sh, which config.sh's registration refuses.
		fmt.Fprintf(os.Stderr, "runner: note the run.sh pid: %v\n", err)
	}
	go func() {
		err := cmd.Wait()
		r.mu.Lock()
		r.err = err
		r.mu.Unlock()
		close(exited)
	}()
	return nil
}

// Alive reports whether run.sh is running; when it is not, err is how it ended.
func (r *Runner) Alive() (alive bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return r.adopted() != 0, nil
	}
	if closed(r.exited) {
		return false, r.err
	}
	return true, nil
}

// Exited is closed when the run.sh this Runner started exits; nil (never
// ready) when it started none, or adopted one after a restart of the agent.
func (r *Runner) Exited() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return nil
	}
	return r.exited
}

// PID is run.sh's process id, 0 when not running.
func (r *Runner) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return r.adopted()
	}
	if closed(r.exited) {
		return 0
	}
	return r.cmd.Process.Pid
}

// Wipe discards the assignment's copy of the runner and empties the work
// folder, keeping the folder itself.
func (r *Runner) Wipe() error {
	if err := r.discard(); err != nil {
		return err
	}
	entries, err := os.ReadDir(r.WorkDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(r.WorkDir, e.Name())))
	}
	return errors.Join(errs...)
}

// run runs a runner command. The token goes in ACTIONS_RUNNER_INPUT_TOKEN,
// which config.sh reads like --token: a command line is visible to every
// user of the machine in ps, a process's environment only to its own user.
func (r *Runner) run(ctx context.Context, token, name string, args ...string) ([]byte, error) {
	cmd, err := r.command(ctx, name, args...)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(cmd.Env, "ACTIONS_RUNNER_INPUT_TOKEN="+token)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := startInOwnSession(cmd); err != nil {
		return nil, err
	}
	err = cmd.Wait()
	return out.Bytes(), err
}

func (r *Runner) command(ctx context.Context, name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = r.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if _, fd := r.cgroup(); fd >= 0 {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	cmd.Env = r.environment("", "") // env.go: built, never inherited
	if r.User != "" {
		uid, gid, groups, home, err := lookup(r.User)
		if err != nil {
			return nil, err
		}
		// Groups as the user database lists them: a Credential without
		// them drops every supplementary group (setgroups to none), which
		// is not what the user is (a docker group member could no longer
		// reach docker), unlike what su or systemd would give.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}
		cmd.Env = r.environment(r.User, home)
	}
	return cmd, nil
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// tail keeps the end of a command's output for an error message.
func tail(out []byte) string {
	const max = 600
	out = bytes.TrimSpace(out)
	if len(out) > max {
		out = append([]byte("…"), out[len(out)-max:]...)
	}
	return string(out)
}

// writeFileNoFollow replaces path's content, refusing to follow a symlink
// at path (O_NOFOLLOW): the agent runs as root.
func writeFileNoFollow(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}
