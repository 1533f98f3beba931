package runner

// Kernel objects a job leaves. Invariant: between assignments, and between
// the jobs of one, no SysV shared memory segment, message queue or
// semaphore set and no POSIX message queue of the runner uid is left, and
// Verify finds any that is: they outlive every process of the uid, and a
// later job of the same uid could read what an earlier one left there, or
// leave it data to trust. POSIX queues live in the kernel's own mqueue
// file system whether or not /dev/mqueue is mounted: when it is not, the
// agent mounts one of its own to list them.

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// sysvIPC is one SysV IPC object: its kind (shm, msg, sem) and id.
type sysvIPC struct {
	kind string
	id   int
}

func (o sysvIPC) String() string { return fmt.Sprintf("SysV %s %d", o.kind, o.id) }

// sysvIPCDir is where the kernel lists the SysV IPC objects, one file per
// kind, with a header naming the columns.
var sysvIPCDir = "/proc/sysvipc"

// sysvIPCOf lists the SysV IPC objects that uid owns or created (an
// owner may hand an object to another uid with IPC_SET; its creator stays).
func sysvIPCOf(uid uint32) ([]sysvIPC, error) {
	want := strconv.FormatUint(uint64(uid), 10)
	var found []sysvIPC
	for _, kind := range []string{"shm", "msg", "sem"} {
		raw, err := os.ReadFile(sysvIPCDir + "/" + kind)
		if errors.Is(err, os.ErrNotExist) {
			continue // a kernel without SysV IPC
		}
		if err != nil {
			return nil, err
		}
		lines := strings.Split(string(raw), "\n")
		col := map[string]int{}
		for i, name := range strings.Fields(lines[0]) {
			col[name] = i
		}
		idCol, ok := col[map[string]string{"shm": "shmid", "msg": "msqid", "sem": "semid"}[kind]]
		if !ok {
			return nil, fmt.Errorf("%s/%s: no id column in %q", sysvIPCDir, kind, lines[0])
		}
		for _, line := range lines[1:] {
			f := strings.Fields(line)
			if len(f) <= idCol || !(field(f, col, "uid") == want || field(f, col, "cuid") == want) {
				continue
			}
			id, err := strconv.Atoi(f[idCol])
			if err != nil {
				return nil, fmt.Errorf("%s/%s: id %q", sysvIPCDir, kind, f[idCol])
			}
			found = append(found, sysvIPC{kind, id})
		}
	}
	return found, nil
}

func field(f []string, col map[string]int, name string) string {
	if i, ok := col[name]; ok && i < len(f) {
		return f[i]
	}
	return ""
}

// removeSysvIPC removes the SysV IPC objects of uid (IPC_RMID; a segment
// still attached goes with its last process, and the uid's are killed).
func removeSysvIPC(uid uint32) error {
	objs, err := sysvIPCOf(uid)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		var e unix.Errno
		switch o.kind {
		case "shm":
			_, _, e = unix.Syscall(unix.SYS_SHMCTL, uintptr(o.id), unix.IPC_RMID, 0)
		case "msg":
			_, _, e = unix.Syscall(unix.SYS_MSGCTL, uintptr(o.id), unix.IPC_RMID, 0)
		case "sem":
			_, _, e = unix.Syscall6(unix.SYS_SEMCTL, uintptr(o.id), 0, unix.IPC_RMID, 0, 0, 0)
		}
		if e != 0 && e != unix.EINVAL && e != unix.EIDRM { // EINVAL, EIDRM: gone meanwhile
			errs = append(errs, fmt.Errorf("remove %v: %w", o, e))
		}
	}
	return errors.Join(errs...)
}

// withMqueue calls fn with a folder listing the POSIX message queues of
// this IPC namespace: /dev/mqueue when mounted, else an mqueue file system
// the agent mounts for the call.
func withMqueue(fn func(dir string) error) error {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/mqueue", &st); err == nil && st.Type == mqueueMagic {
		return fn("/dev/mqueue")
	}
	dir, err := os.MkdirTemp("", "ghr-mqueue")
	if err != nil {
		return err
	}
	defer os.Remove(dir)
	if err := unix.Mount("mqueue", dir, "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount an mqueue file system to list POSIX message queues: %w", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	return fn(dir)
}

// mqueueMagic is the mqueue file system's statfs type.
const mqueueMagic = 0x19800202

// removeIPC removes the SysV IPC objects and POSIX message queues of uid.
func removeIPC(uid uint32) error {
	return errors.Join(removeSysvIPC(uid), withMqueue(func(dir string) error { return removeOwnedBy(dir, uid) }))
}

// ipcOf lists the SysV IPC objects and POSIX message queues uid has left.
func ipcOf(uid uint32) ([]string, error) {
	objs, err := sysvIPCOf(uid)
	var found []string
	for _, o := range objs {
		found = append(found, o.String())
	}
	mqErr := withMqueue(func(dir string) error {
		for _, name := range entriesOf(dir, uid) {
			found = append(found, "POSIX message queue /"+name)
		}
		return nil
	})
	return found, errors.Join(err, mqErr)
}
