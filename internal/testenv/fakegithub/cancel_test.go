package fakegithub_test

import (
	"context"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// TestAScaleSetJobCancelledBeforeARunnerTookItLeavesTheAssignedCount: a
// job the listener acquired is held from its runner, then its run is
// cancelled: the job ends cancelled without running, the scale set hears
// JobCompleted (canceled, no runner) and its count of assigned jobs falls
// to 0 — what a listener sizes the scale set by. (Without the
// JobCompleted in CancelQueuedJob the listener hears nothing of it and
// this fails waiting for the message.)
func TestAScaleSetJobCancelledBeforeARunnerTookItLeavesTheAssignedCount(t *testing.T) {
	fake := newScaleSetFake(t, fakegithub.ScaleSetOptions{PollWait: 200 * time.Millisecond, JobPickup: time.Minute})
	c := newScaleSetClient(t, fake, "acme")
	ctx := context.Background()
	set := createScaleSet(t, c, "ssc", false)
	session, err := c.MessageSessionClient(ctx, set.ID, "listener-1")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	runListener(t, session, set.ID, &jitScaler{t: t, client: c, setID: set.ID, max: 1, start: true, active: map[string]bool{}}, rec)

	fake.HoldScaleSetJobs(true)
	id := fake.EnqueueScaleSetJob("acme", "api", "ssc", "echo must-not-run")
	eventually(t, 10*time.Second, "the job assigned to the scale set", func() bool {
		stats, _, _ := rec.snapshot()
		return len(stats) > 0 && stats[len(stats)-1].TotalAssignedJobs == 1
	})
	if !fake.CancelQueuedJob(id) {
		t.Fatal("CancelQueuedJob of a queued job said it was not queued")
	}
	fake.HoldScaleSetJobs(false)
	job, err := fake.WaitJob(id, 5*time.Second)
	if err != nil || job.Result != "cancelled" || job.Runner != "" {
		t.Fatalf("the cancelled job: %+v %v", job, err)
	}
	eventually(t, 10*time.Second, "JobCompleted of the cancelled job", func() bool { _, _, done := rec.snapshot(); return len(done) == 1 })
	_, _, done := rec.snapshot()
	if done[0].Result != "canceled" || done[0].RunnerName != "" || done[0].RunnerRequestID != id {
		t.Fatalf("JobCompleted %+v", done[0])
	}
	stats, _, _ := rec.snapshot()
	if last := stats[len(stats)-1]; last.TotalAssignedJobs != 0 {
		t.Fatalf("after the cancel the scale set counts %d assigned jobs, want 0", last.TotalAssignedJobs)
	}
	if fake.CancelQueuedJob(id) {
		t.Fatal("a settled job was cancelled again")
	}
}
