package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Verify checks, once an assignment's cleanup is done and before the
// instance may be offered to another run, that nothing of the assignment is
// left: no task in the runner's cgroup, no process of the runner user; no file of it in the temporary
// folders (however deep in their world-writable folders) or the at spools,
// no crontab, nothing in its runtime folder (/run/user/<uid>), no SysV IPC object, POSIX message queue or key in its user
// keyrings; nothing in its home but what
// /etc/skel holds; an empty work folder; no runner copy; the install still
// the agent's alone. It reports every finding; any means the instance must
// not be pooled.
func (r *Runner) Verify() error {
	var found []error
	if uid, ok, err := r.jobUID(); err != nil {
		found = append(found, err)
	} else if ok {
		if pids, err := processesOf(uid); err != nil || len(pids) > 0 {
			found = append(found, fmt.Errorf("processes of %s still run: %v (%v)", r.User, pids, err))
		}
		for _, dir := range TempDirs {
			if paths := ownedInTree(dir, uid); len(paths) > 0 {
				found = append(found, fmt.Errorf("%s still holds %s's %v", dir, r.User, paths))
			}
		}
		for _, dir := range atSpools {
			if names := entriesOf(dir, uid); len(names) > 0 {
				found = append(found, fmt.Errorf("%s still holds %s's %v", dir, r.User, names))
			}
		}
		for _, dir := range crontabs {
			if _, err := os.Lstat(filepath.Join(dir, r.User)); err == nil {
				found = append(found, fmt.Errorf("%s still has a crontab in %s", r.User, dir))
			}
		}
		if names, err := runtimeLeftovers(RuntimeDirRoot, uid); err != nil || len(names) > 0 {
			found = append(found, fmt.Errorf("the runtime folder of %s under %s still holds %v (%v)", r.User, RuntimeDirRoot, names, err))
		}
		if _, err := os.Lstat(filepath.Join(lingerDir, r.User)); err == nil {
			found = append(found, fmt.Errorf("%s still lingers (%s)", r.User, lingerDir))
		}
		if objs, err := ipcOf(uid); err != nil || len(objs) > 0 {
			found = append(found, fmt.Errorf("IPC objects of %s are left: %v (%v)", r.User, objs, err))
		}
		if _, gid, _, _, err := lookup(r.User); err == nil {
			if keys, err := keysOf(uid, gid); err != nil || len(keys) > 0 {
				found = append(found, fmt.Errorf("keys of %s are left: %v (%v)", r.User, keys, err))
			}
		}
		if extra := r.homeExtras(); len(extra) > 0 {
			found = append(found, fmt.Errorf("the home of %s holds %v beyond %s", r.User, extra, Skel))
		}
	}
	if dir, _ := r.cgroup(); dir != "" {
		if tasks, err := tasksIn(dir); err != nil || len(tasks) > 0 {
			found = append(found, fmt.Errorf("the runner's cgroup %s still holds tasks %v (%v)", dir, tasks, err))
		}
	}
	if entries, err := os.ReadDir(r.WorkDir); err == nil && len(entries) > 0 {
		found = append(found, fmt.Errorf("the work folder %s is not empty (%d entries)", r.WorkDir, len(entries)))
	}
	if _, err := os.Lstat(r.Dir); err == nil {
		found = append(found, fmt.Errorf("the runner copy %s is still there", r.Dir))
	}
	if err := r.checkSealed(); err != nil {
		found = append(found, err)
	}
	return errors.Join(found...)
}

// entriesOf lists the entries of dir that uid owns.
func entriesOf(dir string, uid uint32) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == uid {
				names = append(names, e.Name())
			}
		}
	}
	return names
}

// homeExtras lists what the runner user's home holds that Skel does not
// (the agent's own folders placed there by the operator excepted).
func (r *Runner) homeExtras() []string {
	_, _, _, home, err := lookup(r.User)
	if err != nil {
		return nil
	}
	entries, _ := os.ReadDir(home)
	var extra []string
	for _, e := range entries {
		path := filepath.Join(home, e.Name())
		if _, err := os.Lstat(filepath.Join(Skel, e.Name())); err == nil || holds(path, r.Install) || holds(path, r.StateDir) {
			continue
		}
		extra = append(extra, e.Name())
	}
	return extra
}

// checkSealed reports the first entry of the install that is no longer the
// agent's alone (Seal made every one so).
func (r *Runner) checkSealed() error {
	me := uint32(os.Getuid())
	return r.walkInstall(func(path string, info fs.FileInfo) error { return sealed(path, info, me) })
}

// sealed says whether one entry of the install is still the agent's alone:
// owned by it, writable by no one else (a symlink's own mode means nothing).
func sealed(path string, info fs.FileInfo, me uint32) error {
	if info.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	if st, ok := info.Sys().(*syscall.Stat_t); !ok || st.Uid != me || info.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("runner install: %s is no longer the agent's alone (owner or mode changed): refusing to run from it", path)
	}
	return nil
}
