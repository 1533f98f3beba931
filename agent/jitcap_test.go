package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

const refusal = "Runner version v2.999.0-fake is deprecated and cannot receive messages."

// jitRunners counts the just-in-time runners minted for the world's run.
func jitRunners(w *world) int {
	n := 0
	for _, h := range w.fake.History() {
		if strings.HasPrefix(h.Name, "ghr-1-") {
			n++
		}
	}
	return n
}

// Issue 31 item 3: a just-in-time listener that ends at once (here GitHub
// refuses its session, as for a deprecated version) does not have the
// agent ask for runner after runner: it waits longer after each (2 s, then
// 4 s), and after the third in a row it signals UD_FAILED with the count
// and the runner's own words, and asks for no more. Shown to fail with the
// cap disabled ("UD_FAILED never came (... context deadline exceeded): 4
// runners minted", the backoff alone slowing them) and with the backoff
// disabled ("3 runners ended within 4.5s: no backoff between them").
func TestAJITRunnerThatEndsAtOnceIsBackedOffAndCapped(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w, _, inst := jitWorld(t)
	w.fake.RefuseListeners(100, refusal)
	start := time.Now()
	w.start()
	w.markRunning(inst)

	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := w.store.WaitSignal(c, inst.Key, inst.Assignment, state.SignalFailed, "", 200*time.Millisecond)
	if err != nil {
		t.Fatalf("UD_FAILED never came (%v): %d runners minted\n%s", err, jitRunners(w), w.logs.String())
	}
	took := time.Since(start)
	sig, _ := got.SignalFor(state.SignalFailed)
	if !strings.Contains(sig.Detail, "the just-in-time runner exited 3 times without taking a job") || !strings.Contains(sig.Detail, refusal) {
		t.Fatalf("UD_FAILED %q, want the count and the runner's last output", sig.Detail)
	}
	if took < 6*time.Second {
		t.Fatalf("3 runners ended within %s: no backoff between them", took.Round(100*time.Millisecond))
	}
	time.Sleep(5 * time.Second)
	if n := jitRunners(w); n != 3 {
		t.Fatalf("%d runners minted, want 3: the agent kept asking after giving up", n)
	}
	if n := strings.Count(w.logs.String(), `"signal":"UD_FAILED"`); n != 1 {
		t.Fatalf("UD_FAILED written %d times, want once", n)
	}
}

// A runner that ran a job resets the count: two runners that end at once,
// a job, two more: four such runners in all, never three in a row, and
// no UD_FAILED. Shown to fail with the reset disabled ("UD_FAILED after a
// job ran between the exits: the just-in-time runner exited 3 times ...").
func TestAJobThatRanResetsTheCountOfRunnersEndingWithoutOne(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w, _, inst := jitWorld(t)
	w.fake.RefuseListeners(2, refusal)
	w.start()
	w.markRunning(inst)
	if job := w.job("ghr-run-a-jit", "echo one"); job.ExitCode != 0 {
		t.Fatalf("job: %+v", job)
	}
	w.fake.RefuseListeners(2, refusal)
	job, err := w.fake.WaitJob(w.fake.EnqueueJob("ghr-run-a-jit", "echo two"), 60*time.Second)
	rec, gerr := w.store.Get(ctx, w.key)
	must(t, gerr)
	if sig, failed := rec.SignalFor(state.SignalFailed); failed {
		t.Fatalf("UD_FAILED after a job ran between the exits: %s", sig.Detail)
	}
	if err != nil || job.ExitCode != 0 {
		t.Fatalf("second job: %+v %v", job, err)
	}
	if n := jitRunners(w); n < 6 {
		t.Fatalf("%d runners minted, want at least 6 (two refused, one job, two refused, one job)", n)
	}
}

// Issue 36: a job deleted its runner's Worker trace (_diag/Worker_*.log,
// the runner user's to delete), which the agent read to tell whether the
// runner ran a job: three such jobs in a row and the agent took them for
// runners ending without a job, backed off before each next runner and
// then gave the assignment up. The listener's own "Running job" line, in
// run.sh's output that only root can open, now tells: the fourth job runs
// and no UD_FAILED comes. (With RanAJob reading the trace alone — tried
// once — the fourth job waits behind "UD_FAILED after jobs that deleted
// their traces: the just-in-time runner exited 3 times without taking a
// job".)
func TestJobsThatDeleteTheirWorkerTraceAreStillCountedAsJobs(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w, _, inst := jitWorld(t)
	w.start()
	w.markRunning(inst)
	const deleteTrace = `d="$(readlink /proc/$PPID/cwd)/_diag"; ls "$d"/Worker_*.log >/dev/null && rm -f "$d"/Worker_*.log && ! ls "$d"/Worker_*.log 2>/dev/null && echo deleted`
	for i := range 3 {
		job := w.job("ghr-run-a-jit", deleteTrace)
		if job.ExitCode != 0 || !strings.Contains(job.Output, "deleted") {
			t.Fatalf("job %d did not delete its Worker trace: %+v", i+1, job)
		}
	}
	job, err := w.fake.WaitJob(w.fake.EnqueueJob("ghr-run-a-jit", "echo four"), 30*time.Second)
	rec, gerr := w.store.Get(ctx, w.key)
	must(t, gerr)
	if sig, failed := rec.SignalFor(state.SignalFailed); failed {
		t.Fatalf("UD_FAILED after jobs that deleted their traces: %s", sig.Detail)
	}
	if err != nil || job.ExitCode != 0 {
		t.Fatalf("the fourth job: %+v %v\n%s", job, err, w.logs.String())
	}
	if strings.Contains(w.logs.String(), "ended without taking a job") {
		t.Fatalf("the agent took a runner whose job deleted its trace for one without a job:\n%s", w.logs.String())
	}
}
