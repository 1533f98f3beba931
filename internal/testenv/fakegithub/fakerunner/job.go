package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Running a job: the script with bash -c in the work folder, then its post
// step, cancelled by a stop as the real runner's Worker cancels it, with
// its output kept to a bound.

const shutdownMessage = "The runner has received a shutdown signal. This can happen when the runner service is stopped, or a manually started runner is canceled."

// execute runs the script with bash -c in <work>/<repo>/<repo>, then the
// post step, if any.
//
// A stop (SIGINT or SIGTERM to the listener) cancels the job, as the real
// runner's does: the listener shuts down, tells its Worker, which cancels
// the running step (actions/runner src/Runner.Listener/Runner.cs
// CtrlCHandler and Runner_Unloading → HostContext.ShutdownRunner;
// JobDispatcher.cs sends the Worker MessageType.RunnerShutdown; Worker.cs
// cancels the job; JobRunner.cs reports "The runner has received a
// shutdown signal..."), and the job's post steps still run before the
// listener exits. The script runs in a process group of its own, which
// the listener interrupts itself (then kills, after 5 s), so the job's
// fate never depends on who else the stop's signal reached.
func (l *listener) execute(ctx context.Context, repo, script, post string) (int, string, string) {
	work := l.settings.WorkFolder
	if !filepath.IsAbs(work) {
		work = filepath.Join(l.root, work)
	}
	dir := filepath.Join(work, repo, repo)
	temp := filepath.Join(work, "_temp")
	var out limitedBuffer
	for _, d := range []string{dir, temp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 1, "failed", err.Error()
		}
	}
	env := append(os.Environ(),
		"CI=true", "GITHUB_ACTIONS=true", "RUNNER_OS=Linux", "RUNNER_NAME="+l.settings.AgentName,
		"GITHUB_WORKSPACE="+dir, "RUNNER_WORKSPACE="+filepath.Join(work, repo), "RUNNER_TEMP="+temp)
	code, cancelled, err := step(ctx, dir, env, script, &out)
	if err != nil {
		fmt.Fprintln(&out, err)
	}
	if cancelled {
		fmt.Fprintln(&out, "##[error]"+shutdownMessage)
	}
	if post != "" {
		// Post steps run whatever became of the job, and a stop already
		// under way does not cancel them.
		if _, _, err := step(context.Background(), dir, env, post, &out); err != nil {
			fmt.Fprintln(&out, err)
		}
	}
	switch {
	case cancelled:
		return code, "cancelled", out.String()
	case code != 0:
		return code, "failed", out.String()
	}
	return 0, "succeeded", out.String()
}

// step runs one script in its own process group, interrupting it when ctx
// ends; it returns its exit code, whether it was cancelled, and an error
// that is not an exit status.
func step(ctx context.Context, dir string, env []string, script string, out io.Writer) (code int, cancelled bool, err error) {
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second // a background process holding the output open
	if err := cmd.Start(); err != nil {
		return 1, false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		cancelled = true
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = <-done
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), cancelled, nil
	}
	if err != nil {
		return 1, cancelled, err
	}
	return 0, cancelled, nil
}

// limitedBuffer keeps the first MiB of a job's output.
type limitedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := 1<<20 - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (w *limitedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
