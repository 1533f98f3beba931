package runner

// Per-assignment isolation of the runner software.
//
// The real listener loads <runner root>/.env into its own environment and
// every job's, and runs scripts and binaries from the runner root
// (run-helper.sh, bin/*, config.sh). A job runs as the runner user; were the
// runner root that user's across assignments, a job of one run could plant
// LD_PRELOAD in .env or swap a binary and own the next run.
//
// So the install (Install) belongs to the agent's user and no one else may
// write to it, and each assignment runs in Dir, a copy made afresh from it:
// its directories are new and the runner user's (config.sh writes .env,
// .path, .runner and the credentials there, the listener _diag), its files
// hard links to the install's, which the runner user cannot write. A copy
// costs one link per file. Whatever a job changes in Dir dies with it: the
// copy is discarded when the assignment ends, and the deregistration
// (config.sh remove, which the runner user runs with the remove token in
// its environment) runs from a new copy holding only the runner's identity
// files, never from the one the job could write to.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Seal makes the install the agent's alone: owned by the agent's user, with
// no write permission for group or others. It refuses an install holding a
// file it cannot vouch for (a device, a pipe).
func (r *Runner) Seal() error {
	if r.Install == "" {
		return errors.New("runner: Install is required")
	}
	me := os.Getuid()
	return r.walkInstall(func(path string, info fs.FileInfo) error {
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			return os.Lchown(path, me, os.Getgid())
		case !info.Mode().IsRegular() && !info.IsDir():
			return fmt.Errorf("runner install: %s is neither a file, a directory nor a symlink", path)
		}
		if err := os.Lchown(path, me, os.Getgid()); err != nil {
			return err
		}
		return os.Chmod(path, info.Mode().Perm()&^0o022)
	})
}

// fresh replaces Dir with a new copy of the install, then writes the given
// identity files into it (the runner user's, readable by it alone).
func (r *Runner) fresh(identity map[string][]byte) error {
	if err := r.discard(); err != nil {
		return err
	}
	uid, gid, owned, err := r.owner()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.Dir), 0o755); err != nil {
		return err
	}
	me := uint32(os.Getuid())
	err = r.walkInstall(func(path string, info fs.FileInfo) error {
		rel, _ := filepath.Rel(r.Install, path)
		target := filepath.Join(r.Dir, rel)
		if err := sealed(path, info, me); err != nil {
			return err // Seal made it so at start: someone changed the install since
		}
		switch {
		case info.IsDir():
			if err := os.Mkdir(target, 0o755); err != nil {
				return err
			}
			return chownIf(owned, target, uid, gid)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		default:
			return linkOrCopy(path, target, info.Mode().Perm())
		}
	})
	if err != nil {
		return fmt.Errorf("copy the runner for this assignment: %w", err)
	}
	for name, data := range identity {
		path := filepath.Join(r.Dir, name)
		if err := writeFileNoFollow(path, data); err != nil {
			return err
		}
		if err := os.Chmod(path, 0o600); err != nil {
			return err
		}
		if err := chownIf(owned, path, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

func chownIf(owned bool, path string, uid, gid uint32) error {
	if !owned {
		return nil
	}
	return os.Chown(path, int(uid), int(gid))
}

// walkInstall calls fn for every entry of the install, the install first,
// without following symlinks.
func (r *Runner) walkInstall(fn func(path string, info fs.FileInfo) error) error {
	return filepath.WalkDir(r.Install, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return fn(path, info)
	})
}

// linkOrCopy links target to the install's file, or copies it where the two
// are on different file systems (the copy is the agent's, like the file).
func linkOrCopy(src, target string, perm fs.FileMode) error {
	err := os.Link(src, target)
	if !errors.Is(err, syscall.EXDEV) {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// discard removes Dir and all it holds (symlinks removed, never followed).
func (r *Runner) discard() error {
	if r.Dir == "" || filepath.Clean(r.Dir) == filepath.Clean(r.Install) {
		return fmt.Errorf("runner: Dir %q must be set and differ from the install", r.Dir)
	}
	return os.RemoveAll(r.Dir)
}

// identity reads the runner identity files of Dir, as the runner user left
// them: regular files only (a symlink there is a job's, and is not
// followed), at most 1 MiB each.
func (r *Runner) identity() (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, name := range identityFiles {
		f, err := os.OpenFile(filepath.Join(r.Dir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		info, err := f.Stat()
		if err == nil && !info.Mode().IsRegular() {
			err = fmt.Errorf("%s is not a regular file", name)
		}
		var data []byte
		if err == nil {
			data, err = io.ReadAll(io.LimitReader(f, 1<<20))
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		files[name] = data
	}
	return files, nil
}

// owner is the runner user's uid and gid; owned is false when the runner
// runs as the agent's own user (nothing to hand over).
func (r *Runner) owner() (uid, gid uint32, owned bool, err error) {
	if r.User == "" {
		return 0, 0, false, nil
	}
	uid, gid, _, _, err = lookup(r.User)
	return uid, gid, err == nil, err
}
