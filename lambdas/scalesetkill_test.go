package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Issue 38: a listener killed in the middle of a release (its instance
// moved to idle, the pool message not yet sent) leaves the instance idle
// and not pooled, which refresh pools again within a minute. Its successor
// finishes that release itself (adoptReleases) and waits for the instance
// rather than launching another beside it: the next job runs on the same
// instance and EC2 never has a second one. (With adoptReleases not called:
// "job two ran on a second instance".) The test never calls refresh.
func TestAReleaseAKilledListenerBeganIsFinishedByItsSuccessorWhichLaunchesNothing(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) {
		p.Registration, p.ScaleSet = state.RegistrationJIT, &state.ScaleSetConfig{Name: "linux-kill"}
	})
	first := d.startListener("task-1")
	waitFor(t, 30*time.Second, "the listener's scale set", func() bool { return len(d.fake.ScaleSets()) == 1 })

	one := d.fake.EnqueueScaleSetJob("acme", "app", "linux-kill", "sleep 10; echo one")
	rec := d.runningJobRecord(one)
	if !strings.HasPrefix(rec.RunID, "ss") {
		t.Fatalf("job one runs on %s for run %q, want a standing run", rec.ID, rec.RunID)
	}
	// A job may start before its run's provision marks the record running
	// (its runner is online first): the release this test plays is of a
	// running record.
	waitFor(t, 30*time.Second, "the standing run's record running", func() bool {
		cur, err := d.store.Get(ctx, rec.Key)
		return err == nil && cur.State == state.Running && cur.RunID == rec.RunID
	})
	// Killed as ECS kills a task that ignores SIGTERM; the job runs on.
	must(t, first.Process.Signal(syscall.SIGKILL))
	if job, err := d.fake.WaitJob(one, time.Minute); err != nil || job.Result != "succeeded" {
		t.Fatalf("job one: %+v %v", job, err)
	}
	// The release the killed listener was making, up to where it died:
	// the run marked released, the instance moved to idle, nothing more.
	_, err := d.store.SetRunStatus(ctx, rec.RunID, state.RunReleased, "released", state.RunProvisioning, state.RunReady, state.RunFailed)
	must(t, err)
	cur, err := d.store.Get(ctx, rec.Key)
	must(t, err)
	_, err = d.store.Release(ctx, cur.Ref(), rec.RunID, state.D(d.pool.Timings.IdleTTL), nil)
	must(t, err)

	d.startListener("task-2")
	two := d.fake.EnqueueScaleSetJob("acme", "app", "linux-kill", "echo two")
	job, err := d.fake.WaitJob(two, 2*time.Minute)
	if err != nil || job.Result != "succeeded" {
		t.Fatalf("job two: %+v %v", job, err)
	}
	if !strings.HasSuffix(job.Runner, rec.ID) {
		t.Errorf("job two ran on a second instance (runner %s), not on %s, whose release the killed listener began", job.Runner, rec.ID)
	}
	if live := d.live(); len(live) != 1 {
		t.Errorf("EC2 has %d instances, want the one: the successor launched instead of finishing the release", len(live))
	}
}
