package fakegithub_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actions/scaleset"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// TestAScaleSetJobRunsOnlyOnARunnerOfItsScaleSet: a job for scale set A
// is taken neither by a runner of scale set B nor by a plain runner
// (config.sh, REST) whose label is A's name, before or after A acquired
// it; B cannot acquire it; A's JIT runner runs it. (Without the scale
// set rule in mayTake, the plain runner takes it at once and this fails
// with "taken before A acquired it".)
func TestAScaleSetJobRunsOnlyOnARunnerOfItsScaleSet(t *testing.T) {
	r := newRig(t)
	c := newScaleSetClient(t, r.fake, "acme")
	ctx := context.Background()
	a := createScaleSet(t, c, "ssa", false)
	b := createScaleSet(t, c, "ssb", false)

	if out, code := r.configure("plain", "--labels", "ssa", "--no-default-labels"); code != 0 {
		t.Fatalf("config.sh: exit %d\n%s", code, out)
	}
	plain := r.start()
	jitB, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "b-1"}, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if jitB.Runner.RunnerScaleSetID != b.ID {
		t.Fatalf("runner of B: %+v", jitB.Runner)
	}
	startJITRunner(t, jitB.EncodedJITConfig)
	eventually(t, 10*time.Second, "the plain runner and B's online", func() bool {
		n := 0
		for _, rn := range r.fake.Runners() {
			if rn.Online {
				n++
			}
		}
		return n == 2
	})

	id := r.fake.EnqueueJob("ssa", "echo on A")
	if job, _ := r.fake.Job(id); job.ScaleSetID != a.ID {
		t.Fatalf("EnqueueJob(%q) made a job of scale set %d, want %d", "ssa", job.ScaleSetID, a.ID)
	}
	time.Sleep(1500 * time.Millisecond) // both runners poll
	if job, _ := r.fake.Job(id); job.State != fakegithub.JobQueued {
		t.Fatalf("taken before A acquired it: %+v\n%s", job, plain.out.String())
	}

	sessionB, err := c.MessageSessionClient(ctx, b.ID, "listener-b")
	if err != nil {
		t.Fatal(err)
	}
	defer sessionB.Close(ctx)
	if got, err := sessionB.AcquireJobs(ctx, []int64{id}); err != nil || len(got) != 0 {
		t.Fatalf("B acquired A's job: %v %v", got, err)
	}
	sessionA, err := c.MessageSessionClient(ctx, a.ID, "listener-a")
	if err != nil {
		t.Fatal(err)
	}
	defer sessionA.Close(ctx)
	msg, err := sessionA.GetMessage(ctx, 0, 1)
	if err != nil || msg == nil || len(msg.JobAvailableMessages) != 1 {
		t.Fatalf("A's session: %+v %v", msg, err)
	}
	if err := sessionA.DeleteMessage(ctx, msg.MessageID); err != nil {
		t.Fatal(err)
	}
	if got, err := sessionA.AcquireJobs(ctx, []int64{msg.JobAvailableMessages[0].RunnerRequestID}); err != nil || len(got) != 1 {
		t.Fatalf("A acquiring its job: %v %v", got, err)
	}
	time.Sleep(1500 * time.Millisecond)
	if job, _ := r.fake.Job(id); job.State != fakegithub.JobQueued {
		t.Fatalf("taken by another runner after A acquired it: %+v", job)
	}

	jitA, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "a-1"}, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	startJITRunner(t, jitA.EncodedJITConfig)
	job, err := r.fake.WaitJob(id, 20*time.Second)
	if err != nil || job.Runner != "a-1" || job.ExitCode != 0 {
		t.Fatalf("job: %+v %v, want it run by a-1", job, err)
	}
	for _, rn := range r.fake.Runners() {
		if rn.Busy {
			t.Fatalf("%s busy: %+v", rn.Name, rn)
		}
		// The labels of a scale set's runner are the scale set's.
		if rn.Name == "b-1" && (len(rn.Labels) != 1 || rn.Labels[0] != "ssb" || !rn.JIT) {
			t.Fatalf("B's runner: %+v", rn)
		}
	}
	if _, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "b-1"}, b.ID); err == nil || !strings.Contains(err.Error(), scaleset.RunnerExistsError.Error()) {
		t.Fatalf("a taken name: %v, want RunnerExistsError", err)
	}
}

// availableCounter wraps the library's session client for the listener
// and counts the JobAvailable messages and acquisitions it sees.
type availableCounter struct {
	*scaleset.MessageSessionClient
	mu        sync.Mutex
	available int
	acquired  int
}

func (a *availableCounter) GetMessage(ctx context.Context, last, capacity int) (*scaleset.RunnerScaleSetMessage, error) {
	m, err := a.MessageSessionClient.GetMessage(ctx, last, capacity)
	if m != nil {
		a.mu.Lock()
		a.available += len(m.JobAvailableMessages)
		a.mu.Unlock()
	}
	return m, err
}

func (a *availableCounter) AcquireJobs(ctx context.Context, ids []int64) ([]int64, error) {
	got, err := a.MessageSessionClient.AcquireJobs(ctx, ids)
	a.mu.Lock()
	a.acquired += len(got)
	a.mu.Unlock()
	return got, err
}

// TestAnAcquiredJobNobodyPicksUpIsRequeuedThenCancelledAfterThreeRequeues:
// the listener acquires every JobAvailable; no runner comes; after
// JobPickup the job is available again, three times, and the fourth
// lapse cancels it (JobCompleted, canceled). (Without the limit in
// pickupLapsed the job is requeued for ever and this fails with "job
// still queued".)
func TestAnAcquiredJobNobodyPicksUpIsRequeuedThenCancelledAfterThreeRequeues(t *testing.T) {
	fake := newScaleSetFake(t, fakegithub.ScaleSetOptions{PollWait: 200 * time.Millisecond, JobPickup: 300 * time.Millisecond})
	c := newScaleSetClient(t, fake, "acme")
	ctx := context.Background()
	set := createScaleSet(t, c, "ssa", false)
	session, err := c.MessageSessionClient(ctx, set.ID, "listener-1")
	if err != nil {
		t.Fatal(err)
	}
	counter := &availableCounter{MessageSessionClient: session}
	rec := &recorder{}
	runListener(t, counter, set.ID, &jitScaler{t: t, client: c, setID: set.ID, active: map[string]bool{}}, rec)

	id := fake.EnqueueScaleSetJob("acme", "api", "ssa", "echo never")
	job, err := fake.WaitJob(id, 15*time.Second)
	if err != nil || job.State != fakegithub.JobCompleted || job.Result != "cancelled" || job.Runner != "" {
		t.Fatalf("job: %+v %v", job, err)
	}
	eventually(t, 5*time.Second, "JobCompleted", func() bool { _, _, completed := rec.snapshot(); return len(completed) == 1 })
	_, _, completed := rec.snapshot()
	if completed[0].Result != "canceled" || completed[0].RunnerRequestID != id {
		t.Fatalf("JobCompleted %+v", completed[0])
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if counter.available != 1+fakegithub.MaxRequeues || counter.acquired != 1+fakegithub.MaxRequeues {
		t.Fatalf("JobAvailable %d times, acquired %d times; want %d each (first, then %d requeues)",
			counter.available, counter.acquired, 1+fakegithub.MaxRequeues, fakegithub.MaxRequeues)
	}
}
