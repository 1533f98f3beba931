package runner

// A cgroup of the runner's own, where the host has a writable cgroup v2
// hierarchy (the agent runs as root). Invariant: every command the Runner
// starts (config.sh, run.sh, the metadata probe) starts inside it
// (clone3 with CLONE_INTO_CGROUP: there is no moment outside), and a job
// cannot leave it, the hierarchy being root's; KillUserProcesses ends it
// whole with cgroup.kill, and Verify finds any task still in it. This
// follows what the uid cannot: a process a job started that runs as
// another uid (a set-user-ID program). The uid-based kill stays, as the
// fallback where there is no cgroup v2 and as a second net: a process of
// the runner user started outside the cgroup must die too.
//
// The cgroup is <hierarchy>/ghrunner-<hash of Dir>, one per runner
// directory (an agent restarted finds its runner's again). Once killed it
// is removed and made anew for the next command (renewCgroup says why).

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// CgroupRoots are where a cgroup v2 hierarchy is looked for: the unified
// layout's, then the hybrid layout's (v1 controllers in /sys/fs/cgroup).
var CgroupRoots = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}

// cgroup returns the runner's cgroup folder, made if needed, and an open
// descriptor of it for clone3; "" and -1 when the host offers none (no
// cgroup v2, no cgroup.kill: a kernel before 5.14, not root).
func (r *Runner) cgroup() (string, int) {
	r.cgMu.Lock()
	defer r.cgMu.Unlock()
	if r.cgDir != "" || r.cgNone {
		return r.cgDir, r.cgFD
	}
	r.cgFD, r.cgNone = -1, true
	if os.Getuid() != 0 || r.Dir == "" {
		return "", -1
	}
	for _, root := range CgroupRoots {
		var st unix.Statfs_t
		if unix.Statfs(root, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			continue
		}
		dir := filepath.Join(root, cgroupName(r.Dir))
		if err := os.Mkdir(dir, 0o755); err == nil {
			madeMu.Lock()
			made = append(made, dir)
			madeMu.Unlock()
		} else if !errors.Is(err, os.ErrExist) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
			continue
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		r.cgDir, r.cgFD, r.cgNone = dir, fd, false
		break
	}
	return r.cgDir, r.cgFD
}

// renewCgroup removes the (empty) cgroup after a kill; the next command
// makes a new one. A cgroup once killed is not used again: on Linux 6.18
// a process cloned into it (CLONE_INTO_CGROUP) after a cgroup.kill is
// killed at birth.
func (r *Runner) renewCgroup() error {
	r.cgMu.Lock()
	defer r.cgMu.Unlock()
	if r.cgDir == "" {
		return nil
	}
	unix.Close(r.cgFD)
	err := unix.Rmdir(r.cgDir)
	r.cgDir, r.cgFD, r.cgNone = "", -1, false
	if err != nil {
		return fmt.Errorf("remove the runner's killed cgroup: %w", err)
	}
	return nil
}

// tasksIn lists the thread ids in the cgroup (cgroup.threads holds every
// task, whatever its thread group).
func tasksIn(dir string) ([]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "cgroup.threads"))
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(raw)), nil
}

// killCgroup kills every task of the runner's cgroup and waits (2 s at
// most) until it is empty; it returns how many processes it held. Besides
// cgroup.kill it sends SIGKILL to every process cgroup.procs lists, every
// pass: on Linux 6.18 cgroup.kill leaves alive a thread group whose leader
// thread exited (the daemon of TestKillUIDKillsADaemonWhoseMainThreadExited),
// which a signal to its pid ends.
func (r *Runner) killCgroup() (int, error) {
	dir, _ := r.cgroup()
	if dir == "" {
		return 0, nil
	}
	first := -1
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		raw, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return 0, err
		}
		procs := strings.Fields(string(raw))
		if first < 0 {
			first = len(procs)
		}
		tasks, err := tasksIn(dir)
		if err == nil && len(tasks) == 0 {
			if first == 0 {
				return 0, nil // never killed: still fit for use
			}
			return first, r.renewCgroup()
		}
		if time.Now().After(deadline) {
			return first, fmt.Errorf("the runner's cgroup %s still holds tasks %v after cgroup.kill (%v)", dir, tasks, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
			return first, fmt.Errorf("cgroup.kill %s: %w", dir, err)
		}
		for _, p := range procs {
			if pid, err := strconv.Atoi(p); err == nil && pid > 0 {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
	}
}

// cgroupName is the name of the cgroup of the runner directory dir.
func cgroupName(dir string) string {
	h := fnv.New64a()
	h.Write([]byte(filepath.Clean(dir)))
	return fmt.Sprintf("ghrunner-%x", h.Sum64())
}

// made lists the cgroups this process made (for removeMadeCgroups).
var (
	madeMu sync.Mutex
	made   []string
)

// RemoveCgroup kills what is left in the cgroup of the runner directory
// dir (an agent's RunDir) and removes it. The agent keeps its runner's
// cgroup for its whole life: this is for tests and hosts that end an
// agent's runner directory with it.
func RemoveCgroup(dir string) {
	for _, root := range CgroupRoots {
		removeCgroupDir(filepath.Join(root, cgroupName(dir)))
	}
}

func removeCgroupDir(cg string) {
	if os.WriteFile(filepath.Join(cg, "cgroup.kill"), []byte("1"), 0) != nil {
		return
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if unix.Rmdir(cg) == nil {
			return
		}
	}
}

// removeMadeCgroups removes the cgroups this process made.
func removeMadeCgroups() {
	madeMu.Lock()
	defer madeMu.Unlock()
	for _, cg := range made {
		removeCgroupDir(cg)
	}
	made = nil
}
