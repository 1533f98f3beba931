package runner

// Keys a job leaves, and keys it must never see. Invariants:
//   - config.sh and run.sh start in a session keyring of their own, new
//     for each start: a process possesses its session keyring whatever its
//     uid, so one inherited from the agent would hand a job the agent's
//     keys, and one shared between runners a job's keys to the next.
//   - Between assignments, and between the jobs of one, the runner uid's
//     user, user-session and persistent keyrings are emptied
//     (KEYCTL_CLEAR), and Verify finds any key left there: the kernel keeps
//     them for the uid after its last process is gone, and the next job of
//     the uid would read them.
//   - No thread of the agent ever takes on the runner's uid. The kernel
//     finds a uid's user keyrings only for a caller running as that uid, so
//     that work runs in a short-lived child process (keyhelper.go) that
//     drops to the uid and exits. It once ran on an agent thread switched
//     with a raw setresuid and thrown away afterwards; a thread Go ends, or
//     the main thread it wedges instead, can pass its credentials to a
//     thread the runtime clones from it, and then the agent read as the
//     runner's uid: its own kill loop killed it (issue 36 item 0).

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
// discarded, so the agent's other threads keep theirs. No uid changes here:
// at worst a thread the runtime clones from this one shares that new,
// empty keyring, which holds nothing of the agent's. A kernel without keys
// (ENOSYS) has no keyring to inherit.
func startInOwnSession(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 && e != unix.ENOSYS {
			done <- fmt.Errorf("a session keyring of its own for %s: %w", cmd.Path, e)
			return
		}
		done <- cmd.Start()
	}()
	return <-done
}

// uidKeyrings finds, in a process running as the uid (keyhelper.go), the
// keyrings the kernel keeps for it beyond its processes: its user and
// user-session keyrings, and its persistent keyring where the kernel has
// them (linked into the thread's own keyring to be found). None at all on a
// kernel without keys.
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

// clearOwnKeyrings empties the caller's user, user-session and persistent
// keyrings. Only in the helper process, running as the runner's uid.
func clearOwnKeyrings(uid uint32) error {
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
}

// ownKeys describes the keys left in the caller's user, user-session and
// persistent keyrings. The user-session keyring's link to the user keyring
// (_uid.<uid>), which the kernel makes, is not a key a job left. Only in
// the helper process, running as the runner's uid.
func ownKeys(uid uint32) ([]string, error) {
	rings, err := uidKeyrings()
	if err != nil {
		return nil, fmt.Errorf("uid %d: %w", uid, err)
	}
	var found []string
	for name, id := range rings {
		buf := make([]byte, 4096)
		n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("read the %s keyring of uid %d: %w", name, uid, err)
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
	return found, nil
}

// clearKeyrings empties the user, user-session and persistent keyrings of
// uid, from a helper process running as it.
func clearKeyrings(uid, gid uint32) error {
	_, err := askKeyHelper(helperClear, uid, gid)
	return err
}

// keysOf describes the keys left in the user, user-session and persistent
// keyrings of uid, found by a helper process running as it.
func keysOf(uid, gid uint32) ([]string, error) {
	return askKeyHelper(helperList, uid, gid)
}
