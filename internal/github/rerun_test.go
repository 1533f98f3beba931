package github

import (
	"errors"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// The re-run of a workflow run's failed jobs, against the fake's route as
// GitHub's description and users' reports have it: refused while the run
// is in progress, done once it failed (a new attempt of the same run),
// refused without the App's actions: write, 404 for a run that is not.
func TestFailedJobsAreRerunOnceTheRunHasCompletedAndOnlyWithActionsWrite(t *testing.T) {
	fake, c, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	id := fake.EnqueueJob("ghr-lost", "true")
	var refused *RerunRefusedError
	if err := c.RerunFailedJobs(ctx, "acme/repo", id); !errors.As(err, &refused) || !strings.Contains(refused.Message, "already running") {
		t.Fatalf("re-run of a run in progress: %v, want GitHub's 403", err)
	}
	fake.LoseJob(id)
	if err := c.RerunFailedJobs(ctx, "acme/repo", id); err != nil {
		t.Fatalf("re-run of a failed run: %v", err)
	}
	lost, _ := fake.Job(id)
	again, ok := fake.Job(lost.RerunAs)
	if !ok || again.WorkflowRun != id || again.RerunOf != id || again.State != fakegithub.JobQueued || again.Label != "ghr-lost" {
		t.Fatalf("re-run job %+v (of %+v), want a queued copy in workflow run %d", again, lost, id)
	}
	if err := c.RerunFailedJobs(ctx, "acme/missing", 999999); !IsNotFound(err) {
		t.Fatalf("re-run of an unknown run: %v, want not found", err)
	}
	other := fake.EnqueueJob("ghr-lost-2", "true")
	fake.LoseJob(other)
	fake.WithoutAppPermission("actions")
	if err := c.RerunFailedJobs(ctx, "acme/repo", other); !errors.As(err, &refused) || !strings.Contains(refused.Message, "not accessible by integration") {
		t.Fatalf("re-run without actions: write: %v, want GitHub's 403", err)
	}
	if j, _ := fake.Job(other); j.RerunAs != 0 {
		t.Fatal("a refused re-run queued a job")
	}
}
