package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

// The main goroutine stays on the main thread (see onMainThread).
func init() { runtime.LockOSThread() }

// mainThreadWork is served by the main goroutine, on the process's main
// thread, while the tests run on others.
var mainThreadWork = make(chan func())

// onMainThread runs f on the process's main thread.
func onMainThread(f func()) {
	done := make(chan struct{})
	mainThreadWork <- func() { defer close(done); f() }
	<-done
}

func TestMain(m *testing.M) {
	if os.Getenv(mainThreadProbeEnv) != "" {
		mainThreadProbe() // exits
	}
	exit := make(chan int)
	go func() {
		code := m.Run()
		testbin.Remove()
		removeMadeCgroups()
		exit <- code
	}()
	for {
		select {
		case f := <-mainThreadWork:
			f()
		case code := <-exit:
			os.Exit(code)
		}
	}
}

// hostileJob builds internal/testenv/hostilejob, the job tricks a shell
// cannot play, and returns its path.
func hostileJob(t *testing.T) string {
	t.Helper()
	bin, err := testbin.Build(testbin.Module + "/internal/testenv/hostilejob")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// sharedDir is a fresh folder every uid may write to (t.TempDir's parents
// are root's alone).
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ghr-shared")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A daemon whose main thread exited while a worker thread lives reads
// State: Z in /proc/<pid>/status; it is found and killed all the same
// (issue 29 item 2). Shown to fail with liveTasks disabled (zombies
// skipped as before): "the daemon whose main thread exited was not found".
func TestKillUIDKillsADaemonWhoseMainThreadExited(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test starts processes as another uid: run it as root (CI does)")
	}
	const uid = 54323
	drop := sharedDir(t)
	cmd := exec.Command(hostileJob(t), "thread-daemon", drop, drop)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() { syscall.Kill(cmd.Process.Pid, syscall.SIGKILL) })
	alive := filepath.Join(drop, "thread-alive")
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status")
		if _, err := os.Stat(alive); err == nil && strings.Contains(string(status), "State:\tZ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's main thread did not exit with its worker alive:\n%s", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pids, _ := processesOf(uid); len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Fatalf("the daemon whose main thread exited was not found: %v, want [%d]", pids, cmd.Process.Pid)
	}
	if n, err := killUID(uid); err != nil || n != 1 {
		t.Fatalf("killed %d, %v", n, err)
	}
	os.Remove(alive)
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(alive); err == nil {
		t.Fatal("the daemon's worker thread still runs after the kill")
	}
	if pids, _ := processesOf(uid); len(pids) != 0 {
		t.Fatalf("still alive: %v", pids)
	}
}
