// Command hostilejob does, as a job's user, what a shell script cannot:
// the tricks of a hostile job (agent/testdata/hostile-run-*.sh, the
// sandbox's hostile jobs) that need system calls. Tests build it with
// testbin and hand its path to the job. It is a test program: it never
// ships in the bundle.
//
//	hostilejob thread-daemon WATCH DROP  a daemon whose main thread exits
//	hostilejob plant-ipc TAG             SysV IPC, POSIX queue and keys left behind
//	hostilejob probe-ipc [TAG]           prints what of the above this uid still has
//	                                     (but what plant-ipc TAG left)
//	hostilejob probe-session-keyring     prints the keys of the session keyring
package main

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The main goroutine stays on the process's first thread, the thread group
// leader, so that thread-daemon can end that thread alone.
func init() { runtime.LockOSThread() }

func main() {
	if len(os.Args) < 2 {
		fail("usage: hostilejob thread-daemon|plant-ipc|probe-ipc|probe-session-keyring ...")
	}
	switch os.Args[1] {
	case "thread-daemon":
		if len(os.Args) != 4 {
			fail("usage: hostilejob thread-daemon WATCH DROP")
		}
		threadDaemon(os.Args[2], os.Args[3])
	case "plant-ipc":
		if len(os.Args) != 3 {
			fail("usage: hostilejob plant-ipc TAG")
		}
		plantIPC(os.Args[2])
	case "probe-ipc":
		tag := ""
		if len(os.Args) > 2 {
			tag = os.Args[2]
		}
		probeIPC(tag)
	case "probe-session-keyring":
		probeSessionKeyring()
	default:
		fail("unknown command " + os.Args[1])
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "hostilejob:", msg)
	os.Exit(2)
}

// threadDaemon leaves its session and process group, then ends its main
// thread alone (exit, not exit_group): /proc/<pid>/status then reads
// State: Z, as for a zombie, while a worker thread goes on listing WATCH
// into DROP/spy and touching DROP/thread-alive. A kill loop that skips
// zombies never sees it (issue 29 item 2).
func threadDaemon(watch, drop string) {
	// The main thread takes a P with it when it ends: a garbage collection
	// would wait for it forever, so there is none, and enough Ps remain.
	debug.SetGCPercent(-1)
	runtime.GOMAXPROCS(4)
	syscall.Setsid()
	started := make(chan struct{})
	go func() {
		runtime.LockOSThread() // a thread of its own, never the leader
		close(started)
		for {
			os.WriteFile(filepath.Join(drop, "thread-alive"), []byte(time.Now().String()), 0o666)
			if f, err := os.OpenFile(filepath.Join(drop, "spy"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666); err == nil {
				filepath.Walk(watch, func(path string, _ os.FileInfo, _ error) error {
					fmt.Fprintln(f, path)
					return nil
				})
				f.Close()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	<-started
	fmt.Println("thread-daemon", os.Getpid())
	os.Stdout.Sync()
	for {
		syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
	}
}

// Key specifiers of keyctl(2).
const (
	keySpecThreadKeyring      = -1
	keySpecSessionKeyring     = -3
	keySpecUserKeyring        = -4
	keySpecUserSessionKeyring = -5
)

// plantIPC leaves, for a later job of the same uid, a SysV shared memory
// segment, message queue and semaphore set, a POSIX message queue, and a key in the user and user-session keyrings.
func plantIPC(tag string) {
	var errs []string
	key := ipcKey(tag)
	if _, _, e := unix.Syscall(unix.SYS_SHMGET, key, 4096, unix.IPC_CREAT|0o600); e != 0 {
		errs = append(errs, "shmget: "+e.Error())
	}
	if _, _, e := unix.Syscall(unix.SYS_MSGGET, key, unix.IPC_CREAT|0o600, 0); e != 0 {
		errs = append(errs, "msgget: "+e.Error())
	}
	if _, _, e := unix.Syscall(unix.SYS_SEMGET, key, 1, unix.IPC_CREAT|0o600); e != 0 {
		errs = append(errs, "semget: "+e.Error())
	}
	// POSIX queues live in the kernel's mqueue file system whether or not
	// /dev/mqueue is mounted.
	name, _ := unix.BytePtrFromString("ghr-mq-" + tag)
	if fd, _, e := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(name)), uintptr(unix.O_CREAT|unix.O_RDWR), 0o600, 0, 0, 0); e != 0 {
		errs = append(errs, "mq_open: "+e.Error())
	} else {
		unix.Close(int(fd))
	}
	rings := []int{keySpecUserKeyring, keySpecUserSessionKeyring}
	if id, err := unix.KeyctlInt(unix.KEYCTL_GET_PERSISTENT, -1, keySpecThreadKeyring, 0, 0); err == nil {
		rings = append(rings, id) // where the kernel has persistent keyrings (3 days after last use)
	}
	for _, ring := range rings {
		if _, err := unix.AddKey("user", "ghr-planted-"+tag, []byte("secret of "+tag), ring); err != nil {
			errs = append(errs, fmt.Sprintf("add_key to %d: %v", ring, err))
		}
	}
	if len(errs) > 0 {
		fail(strings.Join(errs, "; "))
	}
	fmt.Println("planted IPC objects and keys")
}

// ipcKey is the SysV IPC key of what plant-ipc TAG leaves.
func ipcKey(tag string) uintptr { return uintptr(crc32.ChecksumIEEE([]byte(tag))&0x7fffffff | 1) }

// probeIPC prints one line for every IPC object and key of this uid but
// what plant-ipc TAG left (a job of the same run on a token runner, which
// takes the jobs of its run in a row, may find its own) and the link to
// the user keyring the kernel puts in the user-session keyring.
func probeIPC(tag string) {
	uid := fmt.Sprint(os.Getuid())
	own := func(line string) bool {
		return tag != "" && (strings.Contains(line, "ghr-planted-"+tag+" ") || strings.HasSuffix(line, "ghr-mq-"+tag))
	}
	for _, kind := range []string{"shm", "msg", "sem"} {
		raw, _ := os.ReadFile("/proc/sysvipc/" + kind)
		lines := strings.Split(string(raw), "\n")
		if len(lines) == 0 {
			continue
		}
		col := -1
		for i, h := range strings.Fields(lines[0]) {
			if h == "uid" {
				col = i
			}
		}
		for _, l := range lines[1:] {
			f := strings.Fields(l)
			if col < 0 || len(f) <= col || f[col] != uid || tag != "" && f[0] == fmt.Sprint(ipcKey(tag)) {
				continue
			}
			fmt.Printf("sysv %s %s\n", kind, strings.Join(f[:2], " "))
		}
	}
	mqs, _ := os.ReadDir("/dev/mqueue")
	for _, e := range mqs {
		if info, err := e.Info(); err == nil && fmt.Sprint(info.Sys().(*syscall.Stat_t).Uid) == uid && !own("mqueue "+e.Name()) {
			fmt.Println("mqueue", e.Name())
		}
	}
	rings := map[string]int{"user": keySpecUserKeyring, "user-session": keySpecUserSessionKeyring}
	if id, err := unix.KeyctlInt(unix.KEYCTL_GET_PERSISTENT, -1, keySpecThreadKeyring, 0, 0); err == nil {
		rings["persistent"] = id
	}
	for name, ring := range rings {
		for _, k := range keysIn(ring) {
			if strings.HasPrefix(k, "keyring;") && strings.Contains(k, ";_uid."+uid+" ") || own(k+" ") {
				continue
			}
			fmt.Printf("key in the %s keyring: %s\n", name, k)
		}
	}
}

// probeSessionKeyring prints the keys of the session keyring, with what
// this process can read of them: a job's session keyring must be its own,
// not the agent's.
func probeSessionKeyring() {
	for _, k := range keysIn(keySpecSessionKeyring) {
		fmt.Println("session key:", k)
	}
}

// keysIn describes the keys linked in a keyring, and the payload of those
// it can read.
func keysIn(ring int) []string {
	id, err := unix.KeyctlGetKeyringID(ring, false)
	if err != nil {
		return nil
	}
	buf := make([]byte, 4096)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, id, buf, 0)
	if err != nil || n > len(buf) {
		return nil
	}
	var out []string
	for i := 0; i+4 <= n; i += 4 {
		key := int(*(*int32)(unsafe.Pointer(&buf[i])))
		desc, _ := unix.KeyctlString(unix.KEYCTL_DESCRIBE, key)
		payload := make([]byte, 256)
		m, _ := unix.KeyctlBuffer(unix.KEYCTL_READ, key, payload, 0)
		if m < 0 || m > len(payload) {
			m = 0
		}
		out = append(out, fmt.Sprintf("%s %q", desc, payload[:m]))
	}
	return out
}
