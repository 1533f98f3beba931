package jitstream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// meeting is GitHub whose generate-jitconfig answers only once want calls
// are in flight together: served one after the other, the first call
// waits for a second that never comes, gives up after a guard (a
// deadlock guard, not a measure of speed) and fails as GitHub failing.
type meeting struct {
	controlplane.GitHub
	want int

	mu      sync.Mutex
	arrived int
	met     chan struct{}
}

func (m *meeting) GenerateJITConfig(ctx context.Context, owner, name string, groupID int64, labels []string) (github.JITConfig, error) {
	m.mu.Lock()
	if m.arrived++; m.arrived == m.want {
		close(m.met)
	}
	m.mu.Unlock()
	select {
	case <-m.met:
		return m.GitHub.GenerateJITConfig(ctx, owner, name, groupID, labels)
	case <-time.After(5 * time.Second):
		return github.JITConfig{}, errors.New("no other request of the batch was served meanwhile")
	}
}

// The requests of a batch are those of instances whose jobs ended
// together: each waits for its own reads, writes and GitHub call, not for
// every request before it in the batch. (Served one after the other, the
// first GitHub call is alone, gives up, and its instance gets nothing.)
func TestTheRequestsOfDifferentInstancesInOneBatchAreServedAtOnce(t *testing.T) {
	r := newRig(t)
	other := r.otherOwner("globex")
	r.deps.GitHub = &meeting{GitHub: r.deps.GitHub, want: 2, met: make(chan struct{})}
	must(t, r.store.PutSignal(ctx, r.inst.Key, r.inst.Assignment, state.SignalJITNext, "2"))
	must(t, r.store.PutSignal(ctx, other.Key, other.Assignment, state.SignalJITNext, "2"))
	batches, answers := r.deliver()
	if len(batches) != 1 {
		t.Fatalf("%d batches: the test needs both requests in one", len(batches))
	}
	if len(answers[0].BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %+v", answers[0].BatchItemFailures)
	}
	for _, key := range []state.Key{r.inst.Key, other.Key} {
		if rec, _ := r.store.Get(ctx, key); rec.JITSeq != 2 {
			t.Errorf("%s: configuration %d, want 2: the requests were not served at once", key, rec.JITSeq)
		}
	}
}
