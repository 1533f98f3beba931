package listener

import (
	"testing"
	"time"

	"github.com/actions/scaleset"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

func TestTheRunKeepsTheStartedJobsQueueAndRunnerStampsAndZeroForOnesMissing(t *testing.T) {
	queued := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	msg := &scaleset.JobStarted{RunnerName: "r1", JobMessageBase: scaleset.JobMessageBase{OwnerName: "acme", RepositoryName: "app",
		WorkflowRunID: 77, QueueTime: queued, ScaleSetAssignTime: queued.Add(3 * time.Second), RunnerAssignTime: queued.Add(14 * time.Second)}}
	want := state.RunJob{Repository: "acme/app", WorkflowRunID: 77, QueuedAt: queued.Unix(), StartedAt: queued.Unix() + 14}
	if got := runJobOf(msg); got != want {
		t.Fatalf("run job = %+v, want %+v", got, want)
	}
	msg.QueueTime = time.Time{}
	if got := runJobOf(msg); got.QueuedAt != 0 || got.StartedAt != want.StartedAt {
		t.Fatalf("run job of a message without QueueTime = %+v, want queuedAt 0", got)
	}
}
