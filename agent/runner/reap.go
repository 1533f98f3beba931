package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What a job leaves running. The runner stops its own process group, but a
// job can leave it (setsid, nohup, a double fork): such a process would
// watch the next run's work folder and read, from /proc/<pid>/environ of
// config.sh (same user), the token of the next registration or removal.
// Before the runner is removed and the instance offered again, and
// between the jobs of a just-in-time assignment, everything in the
// runner's cgroup (cgroup.go) and every process of the runner user is
// killed. Invariant: a thread group counts as alive while any of its tasks
// is, whatever its leader's state reads.

// KillUserProcesses kills everything in the runner's cgroup (cgroup.go,
// where the host has one), then every process of the runner user, and
// returns how many it killed. With no User (the runner runs as the
// agent's own user) only the cgroup's are the job's to kill.
func (r *Runner) KillUserProcesses() (int, error) {
	n, cgErr := r.killCgroup()
	uid, ok, err := r.jobUID()
	if !ok || err != nil {
		return n, errors.Join(cgErr, err)
	}
	m, err := killUID(uid)
	return n + m, errors.Join(cgErr, err)
}

// jobUID is the uid whose processes and files are the job's alone: ok is
// false with no User (the runner runs as the agent's own user), and a User
// that is root or the agent's own is an error, never a uid to clean up.
func (r *Runner) jobUID() (uid uint32, ok bool, err error) {
	if r.User == "" {
		return 0, false, nil
	}
	uid, _, _, _, err = lookup(r.User)
	if err != nil {
		return 0, false, err
	}
	if uid == 0 || int(uid) == os.Getuid() {
		return 0, false, fmt.Errorf("runner user %q is uid %d, the agent's own or root's: its processes and files are left alone", r.User, uid)
	}
	return uid, true, nil
}

// killUID sends SIGKILL to every process of uid until a pass finds none: a
// process may fork between the listing and the kill, so one pass is not
// enough. It gives up after 50 passes (a fork bomb outrunning it).
func killUID(uid uint32) (int, error) {
	// Processes, not kills: one still dying at the next pass (a thread
	// group whose threads take longer than a pass to end, on a busy
	// machine) is killed again but counted once.
	killed := map[int]bool{}
	for pass := 0; pass < 50; pass++ {
		pids, err := processesOf(uid)
		if err != nil {
			return len(killed), err
		}
		if len(pids) == 0 {
			return len(killed), nil
		}
		for _, pid := range pids {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed[pid] = true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return len(killed), fmt.Errorf("processes of uid %d still appear after 50 rounds of killing", uid)
}

// processesOf lists the live processes whose real or effective uid is uid.
// It counts tasks, not only processes: a thread group whose leader thread
// ended (it called exit, not exit_group) reads State Z like a zombie, yet
// its other threads still run, and SIGKILL to its pid ends them all. A
// true zombie, all of whose threads are dead, is left to its parent. The
// calling process itself is never listed: whatever uid one of its threads
// shows, it is not the job's, and killing it would kill the agent.
func processesOf(uid uint32) ([]int, error) {
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue // gone meanwhile
		}
		mine, zombie := ownedBy(string(status), uid)
		if mine && (!zombie || liveTasks("/proc/"+e.Name()+"/task")) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// liveTasks reports whether a thread group holds a task that is not a
// zombie (its leader's own entry included).
func liveTasks(taskDir string) bool {
	tasks, _ := os.ReadDir(taskDir)
	for _, t := range tasks {
		status, err := os.ReadFile(filepath.Join(taskDir, t.Name(), "status"))
		if err != nil {
			continue
		}
		if _, zombie := ownedBy(string(status), 0); !zombie {
			return true
		}
	}
	return false
}

// ownedBy reads a /proc/<pid>/status: the Uid line holds the real,
// effective, saved and filesystem uids; State Z is a zombie (or, for a
// thread group leader, a leader thread that ended before its threads).
func ownedBy(status string, uid uint32) (mine, zombie bool) {
	want := strconv.FormatUint(uint64(uid), 10)
	for _, line := range strings.Split(status, "\n") {
		switch {
		case strings.HasPrefix(line, "State:"):
			zombie = strings.Contains(line, "Z")
		case strings.HasPrefix(line, "Uid:"):
			f := strings.Fields(line)
			mine = len(f) >= 3 && (f[1] == want || f[2] == want)
		}
	}
	return mine, zombie
}

// Shared places a job can write to outside its work folder, and where a
// later run's job would find it: files there owned by the runner user are
// removed with the work folder (a file another user owns is left alone,
// even when it sits in the runner user's directory of another owner's).
// /run/lock, /var/crash and /dev/mqueue (POSIX message queues) are
// writable by every user on Debian, Ubuntu and Amazon Linux too.
var TempDirs = []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/var/crash", "/dev/mqueue"}

// crontabs are where cron keeps a user's table (Debian's, then Red Hat's).
var crontabs = []string{"/var/spool/cron/crontabs", "/var/spool/cron"}

// atSpools are where at keeps its queued jobs, one file per job, owned by
// the user who queued it (Debian's, then Red Hat's).
var atSpools = []string{"/var/spool/cron/atjobs", "/var/spool/at"}

// lingerDir is where logind notes the users whose systemd user manager
// starts at boot and outlives their sessions (loginctl enable-linger): a
// job's user units would come back with it.
var lingerDir = "/var/lib/systemd/linger"

// RemoveUserLeftovers removes what the runner user left in TempDirs (to
// the bottom of their world-writable folders: tmptree.go), its crontab, at
// jobs and lingering, what its runtime folder holds (runtimedir.go), its SysV IPC objects and POSIX message queues
// (ipc.go) and the keys of its user keyrings (keyrings.go), and resets its
// home to /etc/skel. With no User there is nothing that is the job's alone.
func (r *Runner) RemoveUserLeftovers() error {
	uid, ok, err := r.jobUID()
	if !ok || err != nil {
		return err
	}
	var errs []error
	if err := r.resetHome(uid); err != nil {
		errs = append(errs, fmt.Errorf("reset the runner user's home: %w", err))
	}
	for _, dir := range TempDirs {
		errs = append(errs, removeOwnedTree(dir, uid))
	}
	for _, dir := range append(append([]string{}, crontabs...), lingerDir) {
		if err := os.Remove(filepath.Join(dir, r.User)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, dir := range atSpools {
		errs = append(errs, removeOwnedBy(dir, uid))
	}
	errs = append(errs, clearRuntimeDir(RuntimeDirRoot, uid))
	errs = append(errs, removeIPC(uid))
	if _, gid, _, _, err := lookup(r.User); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, clearKeyrings(uid, gid))
	}
	return errors.Join(errs...)
}

// removeOwnedBy removes the entries of dir that uid owns, with what they
// hold; os.RemoveAll removes a symlink, never what it points to.
func removeOwnedBy(dir string, uid uint32) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		info, err := os.Lstat(path)
		if err != nil {
			continue
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == uid {
			errs = append(errs, os.RemoveAll(path))
		}
	}
	return errors.Join(errs...)
}

// Skel is what a home is reset to (useradd --create-home copies it).
var Skel = "/etc/skel"

// resetHome empties the runner user's home and copies Skel into it. A job
// writes there what later tools read and run: ~/.gitconfig (core.hooksPath,
// core.fsmonitor), ~/.npmrc, ~/.docker/config.json, ~/.ssh, shell profiles.
// The home must be a directory of the user's own, not a symlink and not /:
// anything else is an error, never a folder to empty.
func (r *Runner) resetHome(uid uint32) error {
	_, gid, _, home, err := lookup(r.User)
	if err != nil {
		return err
	}
	home = filepath.Clean(home)
	info, err := os.Lstat(home)
	if errors.Is(err, os.ErrNotExist) {
		return nil // a user without a home has none to reset
	}
	if err != nil {
		return err
	}
	st, _ := info.Sys().(*syscall.Stat_t)
	if !filepath.IsAbs(home) || home == "/" || !info.IsDir() || st == nil || st.Uid != uid {
		return fmt.Errorf("home %q of %s is not a directory of its own: left alone", home, r.User)
	}
	entries, err := os.ReadDir(home)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		path := filepath.Join(home, e.Name())
		if holds(path, r.Install) || holds(path, r.StateDir) {
			continue // the agent's, placed in the home by the operator
		}
		errs = append(errs, os.RemoveAll(path))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return copySkel(Skel, home, int(uid), int(gid))
}

// holds reports whether dir is path or one of its parents.
func holds(dir, path string) bool {
	return path != "" && strings.HasPrefix(filepath.Clean(path)+"/", filepath.Clean(dir)+"/")
}

// copySkel copies the directories and regular files of skel into home,
// owned by the user; it does not follow symlinks.
func copySkel(skel, home string, uid, gid int) error {
	err := filepath.WalkDir(skel, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == skel {
			return err
		}
		rel, _ := filepath.Rel(skel, path)
		target := filepath.Join(home, rel)
		switch {
		case d.IsDir():
			if err := os.Mkdir(target, 0o755); err != nil {
				return err
			}
		case d.Type().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := writeFileNoFollow(target, data); err != nil {
				return err
			}
		default:
			return nil
		}
		return os.Lchown(target, uid, gid)
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
