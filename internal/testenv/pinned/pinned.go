// Package pinned starts the test world's long-lived helper processes (moto,
// dockerd, function processes, agents) from one OS thread that never ends.
// Linux sends a child its parent-death signal (SysProcAttr.Pdeathsig) when
// the *thread* that forked it ends, not the process; and Go ends a thread
// when a goroutine locked to it returns (runtime.LockOSThread without
// unlock, as the keyring code and its tests do). A child forked on a thread
// that such a goroutine later took would die at that goroutine's end: CI
// saw a test's dockerd go away mid-test that way. Test world only.
package pinned

import (
	"os/exec"
	"runtime"
)

var starts = make(chan func())

func init() {
	go func() {
		runtime.LockOSThread() // never unlocked: this thread outlives every child
		for f := range starts {
			f()
		}
	}()
}

// Start is cmd.Start on the pinned thread.
func Start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	starts <- func() { done <- cmd.Start() }
	return <-done
}
