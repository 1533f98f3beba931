package jitstream_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TestReleaseDeletesEveryRunnerMintedForTheAssignmentNotOnlyTheOneTheRecordNames
// (chaos, the runner release published mid-run): the instance's first
// just-in-time runner is listening when GitHub publishes a new
// actions/runner release, and exits for the update without taking a job,
// still registered (offline) under the run's label. The agent asks for the
// next, starts it and notes it in the record, which from then on names
// only the second. Release must delete both: otherwise the instance is
// pooled while a runner of it stays registered under the run's label
// (chaos invariant 4, then 2 once the next run claims it). With release
// deleting only the runners the record names (controlplane.RunnerIDs
// without jitRunners), this fails with "runner ghr-1-1-i-0abc (…) of the
// released instance still registered".
func TestReleaseDeletesEveryRunnerMintedForTheAssignmentNotOnlyTheOneTheRecordNames(t *testing.T) {
	r := newRig(t)
	jitPool(t, r)
	key, assignment := r.inst.Key, r.inst.Assignment
	first := r.inst.Registration
	// The agent starts the first runner and notes it; provision sees it ready.
	must(t, r.store.SetRunner(ctx, key, assignment, first.RunnerID, first.RunnerName))
	must(t, r.store.PutSignal(ctx, key, assignment, state.SignalRegOK, first.RunnerName))
	running, err := r.store.MarkRunning(ctx, r.inst.Ref(), time.Hour, time.Hour)
	must(t, err)
	// Its listener connects, then exits for the update without a job: at
	// GitHub it stays registered, offline.
	r.fake.SetOnline(first.RunnerID, true)
	r.fake.SetOnline(first.RunnerID, false)

	// The agent asks for the next; the stream consumer mints it.
	must(t, r.store.PutSignal(ctx, key, assignment, state.SignalJITNext, "2"))
	r.deliver()
	rec, err := r.store.Get(ctx, key)
	must(t, err)
	if rec.JITSeq != 2 || rec.Registration == nil || rec.Registration.Seq != 2 {
		t.Fatalf("after the request: seq %d, registration %v", rec.JITSeq, rec.Registration)
	}
	second := rec.Registration
	must(t, r.store.SetRunner(ctx, key, assignment, second.RunnerID, second.RunnerName))
	if !slices.Equal(rec.JITRunners, []int64{first.RunnerID, second.RunnerID}) {
		t.Fatalf("jitRunners %v, want both runners minted, %d and %d", rec.JITRunners, first.RunnerID, second.RunnerID)
	}
	if ids := r.instanceRunners(); len(ids) != 2 {
		t.Fatalf("before the release GitHub lists %v, want the two runners", ids)
	}

	// The run is released (no agent answers here: the instance is then
	// expired rather than pooled; what matters is what GitHub still lists).
	if _, err := r.deps.ReleaseInstance(ctx, running.RunID, key); err != nil {
		t.Fatal(err)
	}
	for _, rn := range r.fake.Runners() {
		if github.NameMatchesInstance(rn.Name, r.inst.ID) {
			t.Errorf("runner %s (%d) of the released instance still registered (labels %v)", rn.Name, rn.ID, rn.Labels)
		}
	}
}

// jitPool makes the rig's pool a just-in-time one (release then deletes the
// runners itself) whose release waits a second for the agent.
func jitPool(t *testing.T, r *rig) {
	t.Helper()
	p, err := r.store.GetPoolConfig(ctx, "linux")
	must(t, err)
	p.Registration = state.RegistrationJIT
	p.Timings.ReleaseWait = 1
	must(t, r.store.PutPoolConfig(ctx, *p))
}

// instanceRunners are the ids of the runners GitHub lists named after the
// rig's instance.
func (r *rig) instanceRunners() []int64 {
	var ids []int64
	for _, rn := range r.fake.Runners() {
		if github.NameMatchesInstance(rn.Name, r.inst.ID) {
			ids = append(ids, rn.ID)
		}
	}
	return ids
}

// TestARetiredInstanceLeavesNoRunnerMintedForItRegistered: refresh retires
// an instance (its release could not delete its runners and expired it, or
// EC2 lost it) and deletes every runner its record names, the ones minted
// for its last assignment among them, not only the one its agent noted
// last.
func TestARetiredInstanceLeavesNoRunnerMintedForItRegistered(t *testing.T) {
	r := newRig(t)
	key, assignment := r.inst.Key, r.inst.Assignment
	first := r.inst.Registration
	must(t, r.store.SetRunner(ctx, key, assignment, first.RunnerID, first.RunnerName))
	must(t, r.store.PutSignal(ctx, key, assignment, state.SignalJITNext, "2"))
	r.deliver()
	rec, err := r.store.Get(ctx, key)
	must(t, err)
	must(t, r.store.SetRunner(ctx, key, assignment, rec.Registration.RunnerID, rec.Registration.RunnerName))
	if rec, err = r.store.Get(ctx, key); err != nil || len(rec.JITRunners) != 2 || len(r.instanceRunners()) != 2 {
		t.Fatalf("before: jitRunners %v, GitHub lists %v (err %v); want two", rec.JITRunners, r.instanceRunners(), err)
	}
	var ended []string
	retired, err := r.deps.Retire(ctx, terminator(func(ids []string) { ended = append(ended, ids...) }), []*state.Instance{rec}, "test", false)
	must(t, err)
	if len(retired) != 1 || !slices.Equal(ended, []string{r.inst.ID}) {
		t.Fatalf("retired %d, terminated %v", len(retired), ended)
	}
	if ids := r.instanceRunners(); len(ids) != 0 {
		t.Fatalf("runners %v of the retired instance still registered", ids)
	}
}

type terminator func(ids []string)

func (f terminator) Terminate(_ context.Context, ids []string) error { f(ids); return nil }
