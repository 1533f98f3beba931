package listener

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/actions/scaleset"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
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

// counter is a store's usage counts, as a test sets them.
type counter struct{ recorded, lost int64 }

func (c *counter) UsageCounts() (int64, int64, error) { return c.recorded, c.lost, nil }

// The listener's one store serves every scale set: two scale sets'
// reports take the spans written since either last did, so their sum is
// the store's, never counted twice.
func TestTheListenersReportsCountEachUsageSpanOnceWhicheverScaleSetReports(t *testing.T) {
	src := &counter{recorded: 5}
	u := NewUsageSpans(src) // the 5 before the listener began are not its
	var out bytes.Buffer
	a, b := newTestSeen(nil, &out), newTestSeen(nil, &out)
	a.usage, b.usage = u, u
	src.recorded, src.lost = 9, 1
	a.report(context.Background())
	b.report(context.Background())
	src.recorded = 12
	b.report(context.Background())
	ps, err := metrics.Read(&out)
	if err != nil {
		t.Fatal(err)
	}
	listener := map[string]string{"function": "listener"}
	if rec, n := metrics.Sum(ps, "UsageSpansRecorded", listener); rec != 7 || n != 3 {
		t.Errorf("UsageSpansRecorded = %v over %d reports, want 7 (12 less the 5 before) over 3", rec, n)
	}
	if lost, _ := metrics.Sum(ps, "UsageSpansLost", listener); lost != 1 {
		t.Errorf("UsageSpansLost = %v, want 1", lost)
	}
}
