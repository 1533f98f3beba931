package fakegithub_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// Issue 31, item 4: a second listener for a runner whose first listener
// holds a live session is refused and retries, then gives up with the
// real listener's exit code 5 (run.sh: exit 0 and its message), while
// the first keeps its session and takes the next job
// (actions/runner src/Runner.Listener/MessageListener.cs; fakegithub
// runnerproto.go). Shown to fail with the fake handing the newcomer the
// session at once, as it did before.
func TestASecondListenerRetriesThenExitsAndTheFirstKeepsItsSession(t *testing.T) {
	r := newRig(t)
	if out, code := r.configure("r1", "--labels", "run-1", "--no-default-labels"); code != 0 {
		t.Fatalf("config: %d\n%s", code, out)
	}
	first := r.start()
	eventually(t, 5*time.Second, "first listener online", func() bool { return r.only().Online })
	began := time.Now()
	second := r.start()
	if err := second.wait(t, 10*time.Second); err != nil {
		t.Fatalf("run.sh of the second listener: %v, want exit 0\n%s", err, second.out.String())
	}
	took, out := time.Since(began), second.out.String()
	for _, want := range []string{
		"Runner connect error: A session for this runner already exists.. Retrying until reconnected.",
		"Stop retry on SessionConflictException after retried for 2 seconds.",
		"Runner listener exit with Session Conflict error, stop the service, no retry needed.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the second listener's output lacks %q:\n%s", want, out)
		}
	}
	// Twenty conflicts 100 ms apart make the 2 s limit (20 × 0.1 s), as
	// eight 30 s apart make the real 4 minutes.
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if line == "A session for this runner already exists." {
			n++
		}
	}
	if n != 20 || took < 1900*time.Millisecond {
		t.Errorf("%d conflicts in %s, want 20 over about 2 s", n, took)
	}
	select {
	case err := <-first.done:
		t.Fatalf("the first listener ended: %v\n%s", err, first.out.String())
	default:
	}
	job, err := r.fake.WaitJob(r.fake.EnqueueJob("run-1", "echo still mine"), 10*time.Second)
	if err != nil || job.State != fakegithub.JobCompleted || !strings.Contains(job.Output, "still mine") {
		t.Fatalf("a job after the conflict: %+v %v", job, err)
	}
}

// A listener whose predecessor died without ending its session gets the
// session once GitHub sees the runner offline, within its retry window.
func TestAListenerAfterAKilledOneConnectsOnceTheOldSessionLapses(t *testing.T) {
	r := newRig(t)
	if out, code := r.configure("r1", "--labels", "run-1", "--no-default-labels"); code != 0 {
		t.Fatalf("config: %d\n%s", code, out)
	}
	first := r.start()
	eventually(t, 5*time.Second, "first listener online", func() bool { return r.only().Online })
	first.cmd.Process.Kill()
	first.wait(t, 5*time.Second)
	second := r.start()
	eventually(t, 5*time.Second, "a refused session", func() bool {
		return strings.Contains(second.out.String(), "A session for this runner already exists.")
	})
	r.advance(10 * time.Second) // the dead listener's session lapses
	if job, err := r.fake.WaitJob(r.fake.EnqueueJob("run-1", "true"), 10*time.Second); err != nil || job.ExitCode != 0 {
		t.Fatalf("a job on the second listener: %+v %v\n%s", job, err, second.out.String())
	}
}
