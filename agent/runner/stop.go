package runner

// Stopping the runner: what it means for the job (it is cancelled) and
// for a run.sh an earlier agent process started.

import (
	"fmt"
	"syscall"
	"time"
)

// Stop stops the runner and cancels its job, if it runs one: a SIGINT to
// run.sh's process group, as Ctrl-C and the runner's own service do. The
// real listener then shuts down and tells its Worker, which cancels the
// job (reported as cancelled: "The runner has received a shutdown
// signal..."); the job's post steps and always() steps still run, then it
// exits (actions/runner src/Runner.Listener/Runner.cs CtrlCHandler,
// JobDispatcher.cs MessageType.RunnerShutdown, src/Runner.Worker/Worker.cs,
// JobRunner.cs). Nothing lets a job finish first: callers stop a runner
// only when its job must end (release, the instance terminating, its
// lease over, a spot interruption). After timeout the process group is
// killed, and the job with it.
func (r *Runner) Stop(timeout time.Duration) error {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.mu.Unlock()
	if cmd == nil {
		return stopAdopted(r.adopted(), timeout)
	}
	if closed(exited) {
		return nil
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-exited:
		return nil
	case <-time.After(timeout):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		return fmt.Errorf("run.sh did not stop within %s: killed", timeout)
	}
}

// stopAdopted stops a run.sh this agent process did not start: it cannot
// wait for it, so it polls.
func stopAdopted(pid int, timeout time.Duration) error {
	if pid == 0 {
		return nil
	}
	syscall.Kill(-pid, syscall.SIGINT)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	return fmt.Errorf("run.sh (pid %d) did not stop within %s: killed", pid, timeout)
}
