package sandbox_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
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
	ctx := context.Background()
	store := state.New(sb.AWS.DynamoDB(), d.Table)

	// One warm instance in the pool: a workflow's run, then its release.
	var prov provision.Output
	invoke(t, fn, d.Functions[bundle.HandlerProvision], `{"runId":"78201","pool":"linux","instanceCount":1}`, &prov)
	var rel release.Output
	invoke(t, fn, d.Functions[bundle.HandlerRelease], `{"runId":"78201"}`, &rel)
	if len(rel.Released) != 1 {
		t.Fatalf("release: %+v", rel)
	}
	warm := rel.Released[0]
	waitIdle(t, store, warm, time.Minute)

	withScaleSet(t, store, "linux", "linux-scale", 2)
	logs := &syncBuffer{}
	l, err := sb.StartListener(ctx, d.Functions[bundle.HandlerProvision], "listener-1", logs)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Stop(20 * time.Second); err != nil {
			t.Errorf("listener stopped with %v", err)
		}
		if t.Failed() {
			t.Logf("listener log:\n%s", tail(logs.String(), 8192))
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
}
