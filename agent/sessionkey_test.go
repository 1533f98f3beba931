package main

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

// operatorSecret is a variable an operator sets for the agent alone; the
// agent's runner, and so every job, must not get it.
const operatorSecret = "GHR_OPERATOR_SECRET=for-the-agent-alone"

// agentSessionKey is the description of a key the agent starts with in its
// session keyring, as an agent started from a login session or by a tool
// that keeps credentials there would: a job possessing that keyring could
// read it, whatever its uid.
const agentSessionKey = "ghr-agent-session-secret"

// startWithSessionKey starts cmd (the agent) in a new session keyring
// holding agentSessionKey: from a thread that joined that keyring, which
// the child inherits, and which is discarded afterwards.
func startWithSessionKey(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); e != 0 {
			done <- fmt.Errorf("join a session keyring: %w", e)
			return
		}
		// Its default permissions give a possessor all: a job that
		// inherited the keyring would read it, whatever its uid.
		if _, err := unix.AddKey("user", agentSessionKey, []byte("the agent's"), unix.KEY_SPEC_SESSION_KEYRING); err != nil {
			done <- fmt.Errorf("a key in the agent's session keyring: %w", err)
			return
		}
		done <- cmd.Start()
	}()
	return <-done
}
