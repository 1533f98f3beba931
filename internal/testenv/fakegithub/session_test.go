package fakegithub_test

import (
	"net/http"
	"strconv"
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

// Issue 37, item 10: a killed listener's session outlives a successor's
// conflict limit (session.go: SessionExpiry defaults to five fourths of the
// limit, which defaults to 8 retries, so a test that sets SessionRetry
// alone scales the real 30 s, 4 and 5 minutes): the listener restarted at
// once gives up with exit 5, and only the next one, started once the
// session lapsed, connects. Shown to fail with the limit at its former
// fixed 4 minutes (the second listener never exits), and with the session
// dropping as soon as the runner shows offline (the second connects).
func TestAKilledListenersSessionOutlivesTheNextListenersRetriesAndOnlyTheOneAfterConnects(t *testing.T) {
	r := newRigWith(t, fakegithub.Options{SessionRetry: 250 * time.Millisecond, OfflineAfter: time.Second})
	if out, code := r.configure("r1", "--labels", "run-1", "--no-default-labels"); code != 0 {
		t.Fatalf("config: %d\n%s", code, out)
	}
	first := r.start()
	eventually(t, 5*time.Second, "first listener online", func() bool { return r.only().Online })
	first.cmd.Process.Kill()
	first.wait(t, 5*time.Second)
	killed := time.Now()
	second := r.start()
	if err := second.wait(t, 10*time.Second); err != nil {
		t.Fatalf("run.sh of the second listener: %v, want exit 0\n%s", err, second.out.String())
	}
	if out := second.out.String(); !strings.Contains(out, "Stop retry on SessionConflictException after retried for 2 seconds.") ||
		!strings.Contains(out, "Runner listener exit with Session Conflict error") {
		t.Fatalf("the listener restarted at once did not give up on the conflict:\n%s", out)
	}
	if gaveUp := time.Since(killed); gaveUp > 2500*time.Millisecond {
		t.Fatalf("the second listener gave up %s after the kill: the dead session lapsed (2.5 s) first", gaveUp)
	}
	third := r.start()
	eventually(t, 5*time.Second, "the third listener connected", func() bool { return strings.Contains(third.out.String(), "Listening for Jobs") })
	// The dead listener was last heard at most a poll (0.5 s) before the
	// kill: its session lapses 2 s after it at the earliest.
	if since := time.Since(killed); since < 1900*time.Millisecond {
		t.Fatalf("a listener connected %s after the kill, before the dead session lapsed", since)
	}
	if job, err := r.fake.WaitJob(r.fake.EnqueueJob("run-1", "true"), 10*time.Second); err != nil || job.ExitCode != 0 {
		t.Fatalf("a job on the third listener: %+v %v\n%s", job, err, third.out.String())
	}
}

// A session GitHub ended is answered RunnerSessionInvalid at the next poll:
// a listener of 2.336.0 (actions/runner #4556) makes a new session and
// takes the next job; one of 2.335.0 reads the 403 as a deprecated version
// and ends (session.go). Shown to fail with the fake answering the poll
// 409, as it did (both listeners end with exit 5), and with the listener
// reading every 403 as deprecation.
func TestAListenerWhoseSessionEndedMakesANewOneFrom2336AndEndsAsDeprecatedBefore(t *testing.T) {
	for _, tc := range []struct {
		version  string
		recovers bool
	}{{"2.336.0", true}, {"2.335.0", false}} {
		t.Run(tc.version, func(t *testing.T) {
			r := newRig(t)
			r.installAs(tc.version)
			if out, code := r.configure("r1", "--labels", "run-1", "--no-default-labels", "--disableupdate"); code != 0 {
				t.Fatalf("config: %d\n%s", code, out)
			}
			p := r.start()
			eventually(t, 5*time.Second, "listener online", func() bool { return r.only().Online })
			r.fake.ExpireSession(r.only().ID)
			if !tc.recovers {
				if err := p.wait(t, 10*time.Second); err != nil {
					t.Fatalf("run.sh: %v\n%s", err, p.out.String())
				}
				if out := p.out.String(); !strings.Contains(out, "Runner version v2.335.0 is deprecated and cannot receive messages.") ||
					!strings.Contains(out, "Runner listener exit with terminated error") {
					t.Fatalf("a 2.335.0 listener whose session ended:\n%s\nwant the deprecation and TerminatedError", out)
				}
				return
			}
			if job, err := r.fake.WaitJob(r.fake.EnqueueJob("run-1", "true"), 10*time.Second); err != nil || job.ExitCode != 0 {
				t.Fatalf("a job after the session ended: %+v %v\n%s", job, err, p.out.String())
			}
			if out := p.out.String(); strings.Contains(out, "deprecated") || strings.Contains(out, "exit with") {
				t.Fatalf("the listener did not simply make a new session:\n%s", out)
			}
		})
	}
}

// A 403 of a poll with no error kind (here a fault) is a deprecated version
// up to 2.336.0 (BrokerHttpClient.cs, "temporary back compat") and a
// retried error after it (#4633). Shown to fail with every 403 read as
// deprecation (the 2.337.0 listener ends).
func TestABare403OfAPollIsDeprecationUpTo2336AndRetriedAfter(t *testing.T) {
	for _, tc := range []struct {
		version    string
		deprecated bool
	}{{"2.336.0", true}, {"2.337.0", false}} {
		t.Run(tc.version, func(t *testing.T) {
			r := newRig(t)
			r.installAs(tc.version)
			if out, code := r.configure("r1", "--labels", "run-1", "--no-default-labels", "--disableupdate"); code != 0 {
				t.Fatalf("config: %d\n%s", code, out)
			}
			p := r.start()
			eventually(t, 5*time.Second, "listener online", func() bool { return r.only().Online })
			r.fake.Inject(fakegithub.Fault{Path: "/_fake/runners/" + strconv.FormatInt(r.only().ID, 10) + "/poll", Status: http.StatusForbidden, Count: 1})
			if tc.deprecated {
				if err := p.wait(t, 10*time.Second); err != nil {
					t.Fatalf("run.sh: %v\n%s", err, p.out.String())
				}
				if out := p.out.String(); !strings.Contains(out, "Runner version v2.336.0 is deprecated") {
					t.Fatalf("a bare 403 to 2.336.0:\n%s\nwant a deprecated version", out)
				}
				return
			}
			eventually(t, 5*time.Second, "the 403 retried", func() bool { return strings.Contains(p.out.String(), "Retrying until reconnected.") })
			if job, err := r.fake.WaitJob(r.fake.EnqueueJob("run-1", "true"), 10*time.Second); err != nil || job.ExitCode != 0 {
				t.Fatalf("a job after a bare 403: %+v %v\n%s", job, err, p.out.String())
			}
		})
	}
}

// GitHub refusing a listening runner's version says so by the error kind
// RunnerVersionTooOld (session.go), which every release reads as a
// deprecated version, also those after #4633 that retry a bare 403. Shown
// to fail with the poll's refusal answered without its kind (the 2.337.0
// listener retries and never ends).
func TestARunnerRefusedForItsVersionWhileListeningEndsAsDeprecatedAfter2336Too(t *testing.T) {
	r := newRig(t)
	r.installAs("2.337.0")
	if out, code := r.configure("behind", "--labels", "run-1", "--no-default-labels", "--disableupdate"); code != 0 {
		t.Fatalf("config.sh: %d\n%s", code, out)
	}
	bin, _ := fakegithub.BuildRunner()
	tgz, _ := fakegithub.RunnerTarballOf(bin, "2.338.0")
	r.fake.PublishRunnerRelease("2.338.0", tgz, time.Now().Add(-29*24*time.Hour))
	p := r.start()
	eventually(t, 5*time.Second, "listener online", func() bool { return r.only().Online })
	r.advance(2 * 24 * time.Hour) // 31 days after the next release
	if err := p.wait(t, 10*time.Second); err != nil {
		t.Fatalf("run.sh: %v\n%s", err, p.out.String())
	}
	if out := p.out.String(); !strings.Contains(out, "Runner version v2.337.0 is deprecated and cannot receive messages.") ||
		!strings.Contains(out, "Runner listener exit with terminated error") {
		t.Fatalf("a 2.337.0 listener refused for its version:\n%s\nwant the deprecation and TerminatedError", out)
	}
}
