package runner

// Keys a job leaves, and keys it must never see. Invariants:
//   - config.sh and run.sh start in a session keyring of their own, new
//     for each start: a process possesses its session keyring whatever its
//     uid, so one inherited from the agent would hand a job the agent's
//     keys, and one shared between runners a job's keys to the next.
//   - Between assignments, and between the jobs of one, the runner uid's
//     user, user-session and persistent keyrings are emptied
//     (KEYCTL_CLEAR), and Verify
//     finds any key left there: the kernel keeps them for the uid after its
//     last process is gone, and the next job of the uid would read them.
// The kernel finds a uid's user keyrings only for a caller running as that
// uid, so the agent clears and lists them from a thread that takes on the
// uid alone (setresuid on that thread, not the process) and is thrown away
// afterwards: a goroutine locked to its thread that ends without unlocking
// takes the thread with it — except the process's main thread, which Go
// cannot end and wedges instead. A uid or keyring left on the main thread
// is the process's own as /proc/<pid>/status shows it: the agent would be
// listed among the runner uid's processes and kill itself (issue 36 item
// 0). So throwaway never runs its work there.

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// startInOwnSession starts cmd from a thread that has joined a new,
// anonymous session keyring, which the child inherits; the thread is then
// discarded, so the agent's other threads keep theirs. A kernel without
// keys (ENOSYS) has no keyring to inherit.
func startInOwnSession(cmd *exec.Cmd) error {
	return throwaway(func() error {
		if _, _, e := unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 && e != unix.ENOSYS {
			return fmt.Errorf("a session keyring of its own for %s: %w", cmd.Path, e)
		}
		return cmd.Start()
	})
}

// asUID runs fn on a thread whose user and group ids are uid and gid alone
// (no supplementary group), which is thrown away afterwards.
func asUID(uid, gid uint32, fn func() error) error {
	return throwaway(func() error { return switchThreadTo(uid, gid, fn) })
}

// switchThreadTo gives the calling thread uid and gid alone, then runs fn.
// Raw system calls: syscall.Setresuid would change every thread of the
// process. Only for a thread that is thrown away (throwaway).
func switchThreadTo(uid, gid uint32, fn func() error) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("setresgid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("setresuid %d: %w", uid, e)
	}
	return fn()
}

// throwaway runs fn on an OS thread that ends with it, whatever fn changed
// on it (its uid, its session keyring), and never on the main thread.
func throwaway(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked when fn ran here: the thread ends with the goroutine
		done <- onLockedThread(fn)
	}()
	return <-done
}

// mainThreadGuard is false only in the test that shows what the guard
// prevents.
var mainThreadGuard = true

// onLockedThread runs fn on the calling goroutine's locked thread, unless
// that thread is the main one: then the main thread is held (locked to this
// goroutine, so no other goroutine can run on it) while fn runs on a fresh
// thread of its own, and handed back untouched.
func onLockedThread(fn func() error) error {
	if mainThreadGuard && unix.Gettid() == unix.Getpid() {
		err := throwaway(fn)
		runtime.UnlockOSThread()
		return err
	}
	return fn()
}

// uidKeyrings finds, from a thread running as the uid (asUID), the
// keyrings the kernel keeps for it beyond its processes: its user and
// user-session keyrings, and its persistent keyring where the kernel has
// them (linked into the throwaway thread's own keyring to be found). None
// at all on a kernel without keys.
func uidKeyrings() (map[string]int, error) {
	rings := map[string]int{}
	for name, spec := range map[string]int{"user": unix.KEY_SPEC_USER_KEYRING, "user-session": unix.KEY_SPEC_USER_SESSION_KEYRING} {
		id, err := unix.KeyctlGetKeyringID(spec, true)
		if errors.Is(err, unix.ENOSYS) {
			return nil, nil // a kernel without keys keeps none
		}
		if err != nil {
			return nil, fmt.Errorf("find the %s keyring: %w", name, err)
		}
		rings[name] = id
	}
	id, err := unix.KeyctlInt(unix.KEYCTL_GET_PERSISTENT, -1, unix.KEY_SPEC_THREAD_KEYRING, 0, 0)
	switch {
	case err == nil:
		rings["persistent"] = id
	case !errors.Is(err, unix.EOPNOTSUPP):
		return nil, fmt.Errorf("find the persistent keyring: %w", err)
	}
	return rings, nil
}

// clearKeyrings empties the user, user-session and persistent keyrings of
// uid.
func clearKeyrings(uid, gid uint32) error {
	return asUID(uid, gid, func() error {
		rings, err := uidKeyrings()
		if err != nil {
			return fmt.Errorf("uid %d: %w", uid, err)
		}
		var errs []error
		for name, id := range rings {
			if _, err := unix.KeyctlInt(unix.KEYCTL_CLEAR, id, 0, 0, 0); err != nil {
				errs = append(errs, fmt.Errorf("clear the %s keyring of uid %d: %w", name, uid, err))
			}
		}
		return errors.Join(errs...)
	})
}

// keysOf describes the keys left in the user, user-session and
// persistent keyrings of uid. The user-session keyring's link to the user keyring (_uid.<uid>),
// which the kernel makes, is not a key a job left.
func keysOf(uid, gid uint32) ([]string, error) {
	var found []string
	err := asUID(uid, gid, func() error {
		rings, err := uidKeyrings()
		if err != nil {
			return fmt.Errorf("uid %d: %w", uid, err)
		}
		for name, id := range rings {
			buf := make([]byte, 4096)
			n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
			if err != nil {
				return fmt.Errorf("read the %s keyring of uid %d: %w", name, uid, err)
			}
			if n > len(buf) {
				found = append(found, fmt.Sprintf("%d keys in the %s keyring", n/4, name))
				continue
			}
			for i := 0; i+4 <= n; i += 4 {
				key := int(*(*int32)(unsafe.Pointer(&buf[i])))
				desc, _ := unix.KeyctlString(unix.KEYCTL_DESCRIBE, key)
				if strings.HasSuffix(desc, fmt.Sprintf(";_uid.%d", uid)) && strings.HasPrefix(desc, "keyring;") {
					continue
				}
				found = append(found, fmt.Sprintf("key %q in the %s keyring", desc, name))
			}
		}
		return nil
	})
	return found, err
}
