package ops_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

var ctx = context.Background()

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// opsRole is pool linux's instance role id: records are keyed
// <role id>:<instance id>, while operators name instances by id.
const opsRole = "AROAOPSTESTPOOL000001"

// Seed is a table with two pools: linux (just-in-time, an idle window
// always active) with two idle instances and one running for run-7 that
// holds a registration token; win (token) with nothing.
func Seed(t *testing.T) *state.Store {
	s := statetest.NewStore(t, env)
	for _, p := range []state.PoolConfig{
		{Name: "linux", Owner: "acme", QueueURL: "https://sqs/q", LaunchTemplateID: "lt-1", LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large"},
			SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand", MaxInstances: 5, Registration: state.RegistrationJIT, InstanceRoleID: opsRole,
			IdleWindows: []state.IdleWindow{{Cron: "* * * * *", TimeZone: "UTC", IdleCount: 2, EvictionStrategy: "oldest_first"}}},
		{Name: "win", Owner: "acme", QueueURL: "https://sqs/q2", LaunchTemplateID: "lt-2", LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large"},
			SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand", MaxInstances: 3},
	} {
		must(t, s.PutPoolConfig(ctx, p))
	}
	statetest.Pooled(t, s, statetest.Spec{ID: "i-idle-1", RoleID: opsRole, Pool: "linux", Owner: "acme", InstanceType: "c7i.large", UsageClass: "on-demand"})
	statetest.Pooled(t, s, statetest.Spec{ID: "i-idle-2", RoleID: opsRole, Pool: "linux", Owner: "acme", InstanceType: "c7i.large", UsageClass: "on-demand"})
	_, _, err := s.StartRun(ctx, state.Run{ID: "run-7", Pool: "linux", Owner: "acme", InstanceCount: 1, Request: "{}", Label: "ghr-run-7-x"})
	must(t, err)
	inst, err := s.Create(ctx, state.NewInstance{ID: "i-busy", RoleID: opsRole, Pool: "linux", Owner: "acme", RunID: "run-7", Assignment: state.NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute,
		Registration: &state.Registration{Purpose: state.PurposeRegister, Token: "AABSECRETTOKEN", URL: "https://github.com/acme"}})
	must(t, err)
	must(t, s.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalRegOK, "ghr-1-i-busy"))
	_, err = s.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	must(t, err)
	_, err = s.AddRunInstances(ctx, "run-7", "i-busy")
	must(t, err)
	return s
}

func TestStatusCountsEachPoolByState(t *testing.T) {
	s := Seed(t)
	pools, err := ops.Status(ctx, s, time.Now().Add(time.Minute))
	must(t, err)
	if len(pools) != 2 || pools[0].Pool != "linux" || pools[1].Pool != "win" {
		t.Fatalf("pools %+v", pools)
	}
	l := pools[0]
	if l.Counts[state.Idle] != 2 || l.Counts[state.Running] != 1 || l.Counts[state.Created] != 0 || l.Registration != "jit" ||
		l.IdleWindow == nil || l.IdleWindow.IdleCount != 2 || l.OldestIdleSeconds < 60 || strings.Join(l.RunsInFlight, ",") != "run-7" {
		t.Fatalf("linux: %+v", l)
	}
	if w := pools[1]; w.Registration != "token" || w.IdleWindow != nil || len(w.RunsInFlight) != 0 || w.Counts[state.Idle] != 0 {
		t.Fatalf("win: %+v", w)
	}
}

func TestInstancesFilterAndRefuseWhatIsNotThere(t *testing.T) {
	s := Seed(t)
	idle, err := ops.Instances(ctx, s, "linux", state.Idle)
	must(t, err)
	if len(idle) != 2 || idle[0].ID != "i-idle-1" || idle[1].ID != "i-idle-2" {
		t.Fatalf("idle of linux: %+v", idle)
	}
	all, err := ops.Instances(ctx, s, "", "")
	must(t, err)
	if len(all) != 3 {
		t.Fatalf("every live instance: %d, want 3", len(all))
	}
	for _, bad := range []struct {
		pool  string
		st    state.State
		field string
	}{{"nope", "", "--pool"}, {"", "sleeping", "--state"}, {"", state.Terminated, "--state"}} {
		_, err := ops.Instances(ctx, s, bad.pool, bad.st)
		if !ops.IsBadInput(err) || !strings.HasPrefix(err.Error(), bad.field+": ") {
			t.Errorf("pool %q state %q: %v, want a bad-input error naming %s", bad.pool, bad.st, err, bad.field)
		}
	}
}

// No GitHub material leaves through ops: a record's registration token
// (or just-in-time configuration) is named by its purpose only.
func TestNoTokenInWhatOpsShows(t *testing.T) {
	s := Seed(t)
	all, err := ops.Instances(ctx, s, "", "")
	must(t, err)
	run, err := ops.Run(ctx, s, "run-7")
	must(t, err)
	raw, _ := json.Marshal([]any{all, run})
	if strings.Contains(string(raw), "AABSECRETTOKEN") {
		t.Fatalf("the token is in the output: %s", raw)
	}
	if len(run.Instances) != 1 || run.Instances[0].Registration != state.PurposeRegister || run.Instances[0].Signals[state.SignalRegOK].Detail != "ghr-1-i-busy" {
		t.Fatalf("run view: %+v", run)
	}
	if _, err := ops.Run(ctx, s, "run-404"); !ops.IsBadInput(err) {
		t.Fatalf("an unknown run: %v", err)
	}
}

func TestRetireTakesIdleInstancesOnly(t *testing.T) {
	s := Seed(t)
	v, err := ops.Retire(ctx, s, "i-idle-1", "bad disk")
	must(t, err)
	rec, err := s.FindInstance(ctx, "i-idle-1")
	must(t, err)
	if v.Terminated != "retired: bad disk" || rec.TerminatedReason != "retired: bad disk" || rec.Threshold > time.Now().Unix() {
		t.Fatalf("after retire: view %+v, record lease %d reason %q", v, rec.Threshold, rec.TerminatedReason)
	}
	// An instance serving a run: refused, the record as it was.
	before, err := s.FindInstance(ctx, "i-busy")
	must(t, err)
	_, err = ops.Retire(ctx, s, "i-busy", "")
	if !ops.IsBadInput(err) || !strings.Contains(err.Error(), "running for run run-7") || !strings.Contains(err.Error(), "nothing changed") {
		t.Fatalf("retire of a running instance: %v", err)
	}
	after, err := s.FindInstance(ctx, "i-busy")
	must(t, err)
	if after.Version != before.Version || after.Threshold != before.Threshold {
		t.Fatalf("the refused retire wrote: version %d → %d", before.Version, after.Version)
	}
}

// claimFirst is the table with a provision claiming the instance between
// Retire's read and its write.
type claimFirst struct {
	*state.Store
	t *testing.T
}

func (c claimFirst) Expire(ctx context.Context, r state.Ref, reason string) (*state.Instance, error) {
	_, err := c.Claim(ctx, r.Key, state.ClaimRequest{RunID: "run-8", Pool: "linux", Owner: "acme", ClaimTTL: time.Minute})
	must(c.t, err)
	return c.Store.Expire(ctx, r, reason)
}

func TestRetireLosesToAConcurrentClaimAndChangesNothing(t *testing.T) {
	s := Seed(t)
	_, err := ops.Retire(ctx, claimFirst{s, t}, "i-idle-2", "")
	if !ops.IsBadInput(err) || !strings.Contains(err.Error(), "changed while retiring") {
		t.Fatalf("retire racing a claim: %v", err)
	}
	rec, err := s.FindInstance(ctx, "i-idle-2")
	must(t, err)
	if rec.State != state.Claimed || rec.RunID != "run-8" || rec.TerminatedReason != "" || rec.Threshold <= time.Now().Unix() {
		t.Fatalf("the claim must stand untouched: %+v", rec)
	}
}

func TestStatusShowsWhatTheScheduledFunctionsDidLast(t *testing.T) {
	s := Seed(t)
	last, err := ops.Scheduled(ctx, s, "refresh", "scale-down")
	must(t, err)
	if len(last) != 0 {
		t.Fatalf("before any run: %+v", last)
	}
	must(t, s.PutLastRun(ctx, state.LastRun{Handler: "refresh", Seconds: 1.5, Counts: map[string]int{"terminated": 2, "prewarmed": 1}}))
	must(t, s.PutLastRun(ctx, state.LastRun{Handler: "scale-down", Seconds: 0.4, Error: "throttled"}))
	last, err = ops.Scheduled(ctx, s, "refresh", "scale-down")
	must(t, err)
	if len(last) != 2 || last[0].Counts["terminated"] != 2 || last[0].At == 0 || last[1].Error != "throttled" {
		t.Fatalf("last runs: %+v", last)
	}
	// The items are no instances: the pools count what they did.
	pools, err := ops.Status(ctx, s, time.Now())
	must(t, err)
	if pools[0].Counts[state.Idle] != 2 || pools[0].Counts[state.Running] != 1 {
		t.Fatalf("pools after the last-run items: %+v", pools[0].Counts)
	}
}

func TestRunsListsTheRunsThatHoldInstances(t *testing.T) {
	s := Seed(t)
	runs, err := ops.Runs(ctx, s)
	must(t, err)
	if len(runs) != 1 || runs[0].ID != "run-7" || runs[0].Pool != "linux" || runs[0].Instances[state.Running] != 1 ||
		runs[0].Label != "ghr-run-7-x" || runs[0].CreatedAt == 0 {
		t.Fatalf("runs: %+v", runs)
	}
	// The run's instance released: the run holds nothing, it is not in flight.
	busy, err := s.FindInstance(ctx, "i-busy")
	must(t, err)
	_, err = s.Release(ctx, busy.Ref(), "run-7", time.Minute, nil)
	must(t, err)
	runs, err = ops.Runs(ctx, s)
	must(t, err)
	if len(runs) != 0 {
		t.Fatalf("runs after the release: %+v", runs)
	}
}

func TestTailFollowsARunUntilItIsOver(t *testing.T) {
	s := statetest.NewStore(t, env)
	must(t, s.PutPoolConfig(ctx, state.PoolConfig{Name: "linux", Owner: "acme", QueueURL: "https://sqs/q", LaunchTemplateID: "lt-1", LaunchTemplateVersion: "1",
		InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand", MaxInstances: 5, InstanceRoleID: opsRole}))
	_, _, err := s.StartRun(ctx, state.Run{ID: "run-9", Pool: "linux", Owner: "acme", InstanceCount: 1, Request: "{}", Label: "ghr-run-9-x"})
	must(t, err)
	inst, err := s.Create(ctx, state.NewInstance{ID: "i-9", RoleID: opsRole, Pool: "linux", Owner: "acme", RunID: "run-9", Assignment: state.NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute})
	must(t, err)
	_, err = s.AddRunInstances(ctx, "run-9", "i-9")
	must(t, err)

	events := make(chan ops.Event, 100)
	done := make(chan error, 1)
	go func() { done <- ops.Tail(ctx, s, "run-9", 30*time.Millisecond, func(e ops.Event) { events <- e }) }()
	var said []string
	// await reads what tail says until it says want: each change is made
	// only once tail saw the one before, so the order is the test's.
	await := func(want string) {
		t.Helper()
		for {
			select {
			case e := <-events:
				said = append(said, strings.TrimSpace(e.Instance+" "+e.What))
				if strings.Contains(said[len(said)-1], want) {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("tail did not say %q; it said:\n%s", want, strings.Join(said, "\n"))
			}
		}
	}
	await("run provisioning")
	await("i-9 instance created")
	must(t, s.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalRegOK, "ghr-1-i-9"))
	await("i-9 signal UD_REG_OK (ghr-1-i-9)")
	running, err := s.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	must(t, err)
	await("i-9 instance created → running")
	_, err = s.SetRunStatus(ctx, "run-9", state.RunReady, "", state.RunProvisioning)
	must(t, err)
	await("run ready")
	_, err = s.Release(ctx, running.Ref(), "run-9", time.Minute, nil)
	must(t, err)
	await("i-9 instance running → idle (no longer the run's)")
	_, err = s.SetRunStatus(ctx, "run-9", state.RunReleased, "", state.RunReady)
	must(t, err)
	await("run released")
	await("run over")
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("tail did not end after the run was released")
	}
	if err := ops.Tail(ctx, s, "run-404", time.Millisecond, func(ops.Event) {}); !ops.IsBadInput(err) || !strings.Contains(err.Error(), `no run "run-404"`) {
		t.Fatalf("tail of a missing run: %v", err)
	}
}
