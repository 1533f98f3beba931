package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Issue 31 item 5: stopping the runner cancels its job, as the real runner
// does when it is stopped (SIGINT: the listener shuts down and its Worker
// cancels the job; the job's post steps still run), and the agent stops a
// runner only when it means to, here at release. The job is reported
// cancelled, never finished, its post step ran, and the runner left within
// the stop's timeout, not killed. Shown to fail with Stop killing run.sh's
// group at once instead of interrupting it: the job is never settled, the
// runner stays busy at GitHub and cannot be removed ("waiting for
// UD_REMOVE_REG_OK: instance ... signalled UD_REMOVE_REG_FAILED: config.sh
// remove: exit status 1").
func TestReleasingAnInstanceCancelsItsRunningJobAndRunsItsPostSteps(t *testing.T) {
	w := newWorld(t, "")
	w.start()
	inst := w.create("run-a", "on-demand")
	running := w.markRunning(inst)
	started := filepath.Join(w.dir, "job-started")
	id := w.fake.EnqueueJobWithPost("run-a", "touch "+started+"; sleep 60; echo the job ran to its end", "echo post step ran")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job never started\n%s", w.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	begin := time.Now()
	idle, err := w.store.Release(ctx, running.Ref(), "run-a", 15*time.Minute, w.removal())
	must(t, err)
	clean := w.wait(idle, state.SignalRemoveRegOK, state.SignalRemoveRegFailed)
	if _, ok := clean.SignalFor(state.SignalRemoveRegOK); !ok {
		t.Fatalf("after release: %v", clean.Signals)
	}
	job, err := w.fake.WaitJob(id, 5*time.Second)
	if err != nil || job.Result != "cancelled" || strings.Contains(job.Output, "ran to its end") ||
		!strings.Contains(job.Output, "The runner has received a shutdown signal") || !strings.Contains(job.Output, "post step ran") {
		t.Fatalf("job after release: %+v %v, want it cancelled with its post step run", job, err)
	}
	if took := time.Since(begin); took > 10*time.Second {
		t.Fatalf("the release took %s: the runner was killed at the stop's timeout, not stopped", took)
	}
	if strings.Contains(w.logs.String(), "did not stop within") {
		t.Fatalf("run.sh was killed, not stopped:\n%s", w.logs.String())
	}
}
