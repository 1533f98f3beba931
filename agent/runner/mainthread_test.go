package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Issue 36 item 0: work done as the runner uid (clearing and listing its
// keyrings) ran on a thread thrown away afterwards; when that thread was
// the process's main thread, Go wedged it instead of ending it, and the
// whole agent read as the runner uid in /proc/<pid>/status: its own kill
// loop then SIGKILLed it, and Verify counted it as the job's process.

const mainThreadProbeEnv = "GHR_MAIN_THREAD_PROBE"

// probeResult is what mainThreadProbe reports of the process it ran in.
type probeResult struct {
	UidLine  string // the Uid line of /proc/self/status: the main thread's
	Listed   bool   // processesOf(the uid) listed the process itself
	FnOnMain bool   // the uid-switched work ran on the main thread
}

const probeUID = 54327

// mainThreadProbe runs in a child test process (TestMain): on the main
// thread, as a goroutine that locked it would, it does what asUID does,
// with the guard as the environment says, then reports and exits.
func mainThreadProbe() {
	mainThreadGuard = os.Getenv(mainThreadProbeEnv) == "guard-on"
	var res probeResult
	err := onLockedThread(func() error {
		return switchThreadTo(probeUID, probeUID, func() error {
			res.FnOnMain = unix.Gettid() == unix.Getpid()
			return nil
		})
	})
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

func runMainThreadProbe(t *testing.T, guard string) probeResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainThreadProbeEnv+"="+guard)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the probe (%s): %v", guard, err)
	}
	var res probeResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("the probe (%s) said %q: %v", guard, out, err)
	}
	return res
}

// The control (onLockedThread's guard) shown both ways: with it, the work
// runs elsewhere and the process stays root; without it, the process
// itself takes the runner's uid — and still processesOf never lists it.
func TestWorkAsTheRunnerUIDOnTheMainThreadLeavesTheAgentRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test switches a thread to another uid: run it as root (CI does)")
	}
	on := runMainThreadProbe(t, "guard-on")
	if on.FnOnMain || on.UidLine != "Uid: 0 0 0 0" {
		t.Errorf("with the guard: the work ran on the main thread %v, the process reads %q; want elsewhere and root", on.FnOnMain, on.UidLine)
	}
	if on.Listed {
		t.Error("with the guard: processesOf listed the process itself as the runner uid's")
	}
	off := runMainThreadProbe(t, "guard-off")
	want := fmt.Sprintf("Uid: %d %d %d %d", probeUID, probeUID, probeUID, probeUID)
	if !off.FnOnMain || off.UidLine != want {
		t.Errorf("without the guard the probe should show the defect: the work ran on the main thread %v, the process reads %q, want %q", off.FnOnMain, off.UidLine, want)
	}
	if off.Listed {
		t.Error("the process read as the runner uid and processesOf listed it: the agent's kill loop would kill the agent")
	}
}

// Every thread asUID and startInOwnSession use ends with their work: run
// from the main thread many times, the process never takes the uid.
func TestAsUIDFromTheMainThreadNeverWedgesIt(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("this test switches a thread to another uid: run it as root (CI does)")
	}
	for i := 0; i < 20; i++ {
		var err error
		onMainThread(func() {
			// The main goroutine holds the main thread: the same call a
			// goroutine that landed there would make.
			err = onLockedThread(func() error {
				return switchThreadTo(probeUID, probeUID, func() error { return nil })
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if uid := mainThreadUID(t); uid != "0" {
			t.Fatalf("after %d calls the main thread is uid %s", i+1, uid)
		}
	}
	if err := asUID(probeUID, probeUID, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if uid := mainThreadUID(t); uid != "0" {
		t.Fatalf("the main thread is uid %s", uid)
	}
}

func mainThreadUID(t *testing.T) string {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", os.Getpid(), os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatal("no Uid line")
	return ""
}
