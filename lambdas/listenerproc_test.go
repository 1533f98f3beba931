package main

import (
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

// startListener runs the bundle as the scale-set listener, as ECS runs
// its task: the same binary and environment as the functions', with
// GHRUNNER_HANDLER=listener. It is stopped as ECS stops a task (SIGTERM,
// then killed) when the test ends.
func (d *deployment) startListener(name string) *exec.Cmd {
	d.t.Helper()
	spec := d.fnSpec(bundle.HandlerProvision)
	cmd := exec.Command(spec.Bootstrap)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GHRUNNER_LISTENER_NAME=" + name}
	for k, v := range spec.Env {
		if k != "GHRUNNER_HANDLER" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	cmd.Env = append(cmd.Env, "GHRUNNER_HANDLER="+bundle.HandlerListener)
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	must(d.t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	d.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	return cmd
}
