package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// syncBuffer is a listener's log, written by its process and read by the
// test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// withScaleSet gives pool the scale set name, as an apply of its scale_set
// block does.
func withScaleSet(t *testing.T, store *state.Store, pool, name string, max int) {
	t.Helper()
	ctx := context.Background()
	cfg, err := store.GetPoolConfig(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ScaleSet = &state.ScaleSetConfig{Name: name, MaxRunners: max}
	if err := store.PutPoolConfig(ctx, *cfg); err != nil {
		t.Fatal(err)
	}
}

// warmOne leaves one warm instance in pool linux: a workflow's run of
// one instance, then its release.
func warmOne(t *testing.T, fn *lambda.Client, d sandbox.Deployment, store *state.Store, runID string) string {
	t.Helper()
	var prov provision.Output
	invoke(t, fn, d.Functions[bundle.HandlerProvision], `{"runId":"`+runID+`","pool":"linux","instanceCount":1}`, &prov)
	var rel release.Output
	invoke(t, fn, d.Functions[bundle.HandlerRelease], `{"runId":"`+runID+`"}`, &rel)
	if len(rel.Released) != 1 {
		t.Fatalf("release: %+v", rel)
	}
	waitIdle(t, store, rel.Released[0], time.Minute)
	return rel.Released[0]
}

// startListener starts the bundle as the listener name; its log is shown
// when the test fails.
func startListener(t *testing.T, sb *sandbox.Sandbox, d sandbox.Deployment, name string, logs *syncBuffer) *sandbox.Listener {
	t.Helper()
	l, err := sb.StartListener(context.Background(), d.Functions[bundle.HandlerProvision], name, logs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		l.Kill()
		if t.Failed() {
			var kept []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if !strings.Contains(line, `"msg":"Getting next message"`) { // the library's every poll
					kept = append(kept, line)
				}
			}
			t.Logf("%s log:\n%s", name, tail(strings.Join(kept, "\n"), 8192))
		}
	})
	return l
}

// waitSession waits until the scale set name exists at GitHub and owner
// holds its message session: jobs queued before would be no scale set's.
func waitSession(t *testing.T, gh *fakegithub.Server, name, owner string, within time.Duration) fakegithub.ScaleSetInfo {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, set := range gh.ScaleSets() {
			if set.Name == name && set.SessionOwner == owner {
				return set
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session of %s held by %s within %s: %+v", name, owner, within, gh.ScaleSets())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitLog waits until the listener logged what n times.
func waitLog(t *testing.T, logs *syncBuffer, what string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for strings.Count(logs.String(), what) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the listener did not log %s %d times within %s", what, n, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitStatus waits until pool linux's scale set status (what ghrunner
// status shows) names holder as its session's, and a poll answered if
// polled (written once per report, every 15 s).
func waitStatus(t *testing.T, store *state.Store, holder string, polled bool, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
		st, err := store.GetScaleSetStatus(context.Background(), "linux")
		if err == nil && st != nil && st.Holder == holder && (!polled || st.PolledAt > 0) && st.ScaleSet == "linux-scale" && st.ScaleSetID != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scale set's status: %+v %v; want held by %q (a poll answered: %v)", st, err, holder, polled)
		}
	}
}

// waitIdle waits until instance id is idle in the pool again: released,
// reaped, wiped and checked.
func waitIdle(t *testing.T, store *state.Store, id string, within time.Duration) *state.Instance {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec, err := store.FindInstance(context.Background(), id)
		if err == nil && rec.State == state.Idle && rec.RunID == "" {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s not idle within %s: %+v %v", id, within, rec, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestE2E_AScaleSetJobRunsOnAWarmPooledInstanceWithNoInvokingJob plays the
// scale-set mode: the bundle runs as the listener (the binary the functions
// run), a job that names only the scale set in runs-on runs on the pool's
// warm instance with no provision or release call, the instance is wiped
// and pooled after the job, and the next job — another repository's — runs
// on it again without seeing what the first left.
func TestE2E_AScaleSetJobRunsOnAWarmPooledInstanceWithNoInvokingJob(t *testing.T) {
	t.Parallel()
	sb, d, fn := deployed(t)
	store := state.New(sb.AWS.DynamoDB(), d.Table)

	warm := warmOne(t, fn, d, store, "78201")
	withScaleSet(t, store, "linux", "linux-scale", 2)
	logs := &syncBuffer{}
	l := startListener(t, sb, d, "listener-1", logs)
	defer func() {
		if err := l.Stop(20 * time.Second); err != nil {
			t.Errorf("listener stopped with %v", err)
		}
	}()
	waitSession(t, sb.GitHub, "linux-scale", "listener-1", time.Minute)
	calls := sb.Invocations()

	first := sb.GitHub.EnqueueJob("linux-scale", "echo secret-of-the-first >$HOME/left-behind; echo first")
	j, err := sb.GitHub.WaitJob(first, 90*time.Second)
	if err != nil || j.Result != "succeeded" {
		t.Fatalf("the scale set's first job: %+v %v", j, err)
	}
	if !strings.HasSuffix(j.Runner, warm) {
		t.Errorf("the first job ran on runner %s, want one of the warm instance %s", j.Runner, warm)
	}
	// Pooled again once its release answered: wiped, checked and queued
	// for the next claim (an idle record alone is not yet claimable).
	waitLog(t, logs, `"msg":"standing run released"`, 1, time.Minute)
	waitIdle(t, store, warm, time.Minute)

	second := sb.GitHub.EnqueueJob("linux-scale", "test ! -e $HOME/left-behind && echo clean")
	j, err = sb.GitHub.WaitJob(second, 90*time.Second)
	if err != nil || j.Result != "succeeded" || !strings.Contains(j.Output, "clean") {
		t.Fatalf("the second job (the first's file must be gone): %+v %v", j, err)
	}
	if !strings.HasSuffix(j.Runner, warm) {
		t.Errorf("the second job ran on runner %s, want the reused warm instance %s", j.Runner, warm)
	}
	for name, n := range sb.Invocations() {
		if (name == d.Functions[bundle.HandlerProvision] || name == d.Functions[bundle.HandlerRelease]) && n != calls[name] {
			t.Errorf("%s was invoked %d times during the scale set's jobs: the mode needs no invoking job", name, n-calls[name])
		}
	}
	// What ghrunner status shows of the scale set, and the listener's
	// metrics (issue 38 item 6): its session's holder and a poll answered
	// (written once per report, every 15 s), both jobs counted.
	waitStatus(t, store, "listener-1", true, 30*time.Second)
	points, err := metrics.Read(strings.NewReader(logs.String()))
	if err != nil {
		t.Fatal(err)
	}
	listenerLinux := map[string]string{"function": "listener", "pool": "linux"}
	if n, _ := metrics.Sum(points, "JobsStarted", listenerLinux); n != 2 {
		t.Errorf("the listener's JobsStarted: %v, want 2", n)
	}
	// GitHub's timestamps, as the library decodes the fake's messages.
	if sum, n := metrics.Sum(points, "JobQueuedToStartedSeconds", listenerLinux); n != 2 || sum <= 0 || sum > 180 {
		t.Errorf("the listener's JobQueuedToStartedSeconds: %d values summing to %.1f s, want 2 jobs' waits", n, sum)
	}
}

// TestE2E_AListenerKilledMidJobLeaksNothingAndItsSuccessorFinishesTheRun
// kills the listener while its job runs: the job still ends once, the
// killed listener's session ends once nobody polls it, the next listener
// takes the scale set over, adopts the run from the records and releases
// it when its runner ended — though it never saw the job's completion —
// and the instance is back in the pool; no standing run is left. The
// killed listener's provision never marked the instance running: taking
// such a claim for given up (as a workflow's run may: its jobs wait for
// provision's answer) expired the instance under its job, and this test
// failed with "instance … not idle … State:terminated".
func TestE2E_AListenerKilledMidJobLeaksNothingAndItsSuccessorFinishesTheRun(t *testing.T) {
	t.Parallel()
	sb, d, fn := deployed(t)
	store := state.New(sb.AWS.DynamoDB(), d.Table)
	warm := warmOne(t, fn, d, store, "78301")
	withScaleSet(t, store, "linux", "linux-scale", 2)
	first := startListener(t, sb, d, "listener-1", &syncBuffer{})
	waitSession(t, sb.GitHub, "linux-scale", "listener-1", time.Minute)

	id := sb.GitHub.EnqueueJob("linux-scale", "sleep 4; echo done")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if j, _ := sb.GitHub.Job(id); j.State == fakegithub.JobRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not start within a minute")
		}
	}
	first.Kill()
	logs := &syncBuffer{}
	second := startListener(t, sb, d, "listener-2", logs)
	j, err := sb.GitHub.WaitJob(id, time.Minute)
	if err != nil || j.Result != "succeeded" || !strings.HasSuffix(j.Runner, warm) {
		t.Fatalf("the job: %+v %v", j, err)
	}
	if done, err := second.Exited(); done {
		t.Fatalf("listener-2 ended: %v", err)
	}
	waitSession(t, sb.GitHub, "linux-scale", "listener-2", time.Minute)
	// The status names the successor once it holds the session (the
	// killed listener wrote nothing as it died).
	waitStatus(t, store, "listener-2", false, 10*time.Second)
	waitLog(t, logs, `"msg":"standing run adopted"`, 1, time.Minute)
	waitLog(t, logs, `"msg":"standing run released"`, 1, time.Minute)
	waitIdle(t, store, warm, time.Minute)
	for _, st := range []state.State{state.Created, state.Claimed, state.Running} {
		recs, err := store.ByPoolState(context.Background(), "linux", st, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			t.Errorf("instance %s is still %s for %s", r.ID, st, r.RunID)
		}
	}
	if err := second.Stop(20 * time.Second); err != nil {
		t.Errorf("listener-2 stopped with %v", err)
	}
	// A listener stopped says so at once: nobody holds the session.
	waitStatus(t, store, "", false, 5*time.Second)
	if n := len(sb.GitHub.Runners()); n != 0 {
		t.Errorf("%d runners still registered: %s", n, fmt.Sprint(sb.GitHub.Runners()))
	}
}
