package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// The runner user's runtime folder. Where logind runs, a session or a
// lingering user manager of the runner user gets /run/user/<uid>
// (XDG_RUNTIME_DIR): a tmpfs of the user's own, mounted there, which a job
// can fill with sockets, scripts and files that the next run's tools look
// for (a D-Bus or ssh-agent socket, a gpg-agent's, podman's state). It
// outlives the run while logind keeps it. Its contents are removed between
// assignments and Verify finds any that are left; the folder itself stays
// (it may be a mount point). Nothing in it is followed: os.RemoveAll
// removes a symlink, never what it points to, and descends with
// openat(O_NOFOLLOW). The folder must be a real folder of the user's or
// root's: /run/user is root's, so a job cannot put a symlink in its place,
// and anything else is an error, never a folder to empty.

// RuntimeDirRoot is where logind makes the users' runtime folders.
var RuntimeDirRoot = "/run/user"

// runtimeDir opens the runtime folder of uid under root for listing: nil
// when there is none.
func runtimeDir(root string, uid uint32) (*os.File, string, error) {
	dir := filepath.Join(root, strconv.FormatUint(uint64(uid), 10))
	info, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, dir, nil
	}
	if err != nil {
		return nil, dir, err
	}
	st, _ := info.Sys().(*syscall.Stat_t)
	if !info.IsDir() || st == nil || st.Uid != uid && st.Uid != 0 {
		return nil, dir, fmt.Errorf("runtime folder %s is not a folder of uid %d or root: left alone", dir, uid)
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	return f, dir, err
}

// clearRuntimeDir removes everything in the runtime folder of uid under
// root, keeping the folder.
func clearRuntimeDir(root string, uid uint32) error {
	f, dir, err := runtimeDir(root, uid)
	if f == nil || err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	var errs []error
	for _, name := range names {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, name)))
	}
	return errors.Join(errs...)
}

// runtimeLeftovers lists what the runtime folder of uid under root holds.
func runtimeLeftovers(root string, uid uint32) ([]string, error) {
	f, _, err := runtimeDir(root, uid)
	if f == nil || err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
