package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Issue 36 item 0: work done as the runner uid (clearing and listing its
// keyrings) ran on an agent thread switched with a raw setresuid and
// thrown away afterwards. On the main thread Go wedged that thread instead
// of ending it, and elsewhere a thread the runtime cloned from it could
// inherit the uid: the agent then read as the runner uid in
// /proc/<pid>/status, its own kill loop SIGKILLed it and Verify counted it
// as the job's process. Now that work runs in a helper process
// (keyhelper.go), and processesOf never lists the calling process.

const mainThreadProbeEnv = "GHR_MAIN_THREAD_PROBE"

// probeResult is what mainThreadProbe reports of the process it ran in.
type probeResult struct {
	UidLine string // the Uid line of /proc/self/status: the main thread's
	Listed  bool   // processesOf(the uid) listed the process itself
}

const probeUID = 54327

// mainThreadProbe runs in a child test process (TestMain): on the main
// thread it does the keyring work the way the environment says — "helper"
// as the agent does it, "in-process" as it once did, on its own thread
// (the control disabled) — then reports and exits.
func mainThreadProbe() {
	var err error
	switch os.Getenv(mainThreadProbeEnv) {
	case "helper":
		err = clearKeyrings(probeUID, probeUID)
	case "in-process":
		err = switchThisThreadTo(probeUID, probeUID, clearOwnKeyrings)
	}
	var res probeResult
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Uid:") {
			res.UidLine = strings.Join(strings.Fields(line), " ")
		}
	}
	pids, _ := processesOf(probeUID)
	res.Listed = slices.Contains(pids, os.Getpid())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	json.NewEncoder(os.Stdout).Encode(res)
	os.Exit(0)
}

// switchThisThreadTo is the old way, kept here to show what it did: the
// calling thread alone takes on uid and gid (raw system calls), then runs
// fn.
func switchThisThreadTo(uid, gid uint32, fn func(uint32) error) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
		return fmt.Errorf("setresgid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
		return fmt.Errorf("setresuid %d: %w", uid, e)
	}
	return fn(uid)
}

func runMainThreadProbe(t *testing.T, how string) probeResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainThreadProbeEnv+"="+how)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the probe (%s): %v", how, err)
	}
	var res probeResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("the probe (%s) said %q: %v", how, out, err)
	}
	return res
}

// The control shown both ways: through the helper process the agent stays
// root; done on the agent's own thread (the old way) the process itself
// takes the runner's uid — and still processesOf never lists it.
func TestKeyringWorkAsTheRunnerUIDLeavesTheAgentRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test switches to another uid: run it as root (CI does)")
	}
	helper := runMainThreadProbe(t, "helper")
	if helper.UidLine != "Uid: 0 0 0 0" {
		t.Errorf("through the helper the process reads %q; want root", helper.UidLine)
	}
	if helper.Listed {
		t.Error("through the helper: processesOf listed the process itself as the runner uid's")
	}
	old := runMainThreadProbe(t, "in-process")
	want := fmt.Sprintf("Uid: %d %d %d %d", probeUID, probeUID, probeUID, probeUID)
	if old.UidLine != want {
		t.Errorf("done on the main thread itself the probe should show the defect: the process reads %q, want %q", old.UidLine, want)
	}
	if old.Listed {
		t.Error("the process read as the runner uid and processesOf listed it: the agent's kill loop would kill the agent")
	}
}

// Many clears and listings at once, from the main thread and from others,
// leave every thread of the process root.
func TestKeyringWorkNeverChangesAThreadOfTheAgent(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test switches to another uid: run it as root (CI does)")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 3; j++ {
				if err := clearKeyrings(probeUID, probeUID); err != nil {
					errs <- err
				}
				if _, err := keysOf(probeUID, probeUID); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := 0; i < 3; i++ {
		onMainThread(func() {
			if err := clearKeyrings(probeUID, probeUID); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", os.Getpid()))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("the process's threads: %v %v", tasks, err)
	}
	for _, task := range tasks {
		status, err := os.ReadFile(task)
		if err != nil {
			continue // a thread that ended
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) == 5 && (f[0] == "Uid:" || f[0] == "Gid:") && strings.Join(f[1:], " ") != "0 0 0 0" {
				t.Errorf("%s reads %q", task, line)
			}
		}
	}
	if pids, _ := processesOf(probeUID); slices.Contains(pids, os.Getpid()) {
		t.Error("processesOf listed the process itself")
	}
}

// Bad requests to the helper are refused, naming what is wrong, before it
// changes anything (this test process keeps its ids).
func TestTheKeyringHelperRefusesABadRequest(t *testing.T) {
	for _, req := range []string{"clear", "clear:0:0", "clear:x:1", "drop:54327:54327"} {
		if _, err := keyHelperWork(req); err == nil || !strings.Contains(err.Error(), keyHelperEnv) {
			t.Errorf("%q: %v, want an error naming %s", req, err, keyHelperEnv)
		}
	}
}
