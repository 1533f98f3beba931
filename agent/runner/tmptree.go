package runner

// What a job leaves in the shared temporary trees. Invariant: every entry
// the runner uid owns anywhere in TempDirs, and in any world-writable
// folder below them (systemd-tmpfiles makes /tmp/.X11-unix and
// /tmp/.ICE-unix root's and 1777), is removed between assignments and
// between the jobs of one, and Verify finds any that is left. The walk
// never follows a symlink: it descends with openat(O_NOFOLLOW|O_DIRECTORY)
// from the folder it already holds, so a folder swapped for a symlink to
// / is refused, not walked (the agent runs as root).

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxTreeDepth bounds the descent into world-writable folders: a job can
// nest them, and the walk must end.
const maxTreeDepth = 32

// removeOwnedTree removes, from dir and from every world-writable folder
// below it that another user owns, the entries uid owns, with all they
// hold (os.RemoveAll removes a symlink, never what it points to).
func removeOwnedTree(dir string, uid uint32) error {
	var errs []error
	err := walkShared(dir, uid, func(path string) {
		errs = append(errs, os.RemoveAll(path))
	})
	return errors.Join(append(errs, err)...)
}

// ownedInTree lists what removeOwnedTree would remove.
func ownedInTree(dir string, uid uint32) []string {
	var found []string
	walkShared(dir, uid, func(path string) { found = append(found, path) })
	return found
}

// walkShared calls owned for every entry of dir owned by uid, and descends
// into the world-writable folders of other owners. A missing dir is
// nothing to walk.
func walkShared(dir string, uid uint32, owned func(path string)) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	return walkFD(fd, dir, uid, owned, 0)
}

// walkFD walks the folder open at fd (and closes it); path names it for
// the callback and the errors.
func walkFD(fd int, path string, uid uint32, owned func(path string), depth int) error {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("list %s: %w", path, err)
	}
	var errs []error
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		child := filepath.Join(path, name)
		switch {
		case st.Uid == uid:
			owned(child)
		case st.Mode&syscall.S_IFMT == syscall.S_IFDIR && st.Mode&0o002 != 0:
			if depth >= maxTreeDepth {
				errs = append(errs, fmt.Errorf("%s: world-writable folders nested deeper than %d", child, maxTreeDepth))
				continue
			}
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				errs = append(errs, fmt.Errorf("open %s: %w", child, err))
				continue
			}
			errs = append(errs, walkFD(sub, child, uid, owned, depth+1))
		}
	}
	return errors.Join(errs...)
}
