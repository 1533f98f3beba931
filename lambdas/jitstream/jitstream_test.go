package jitstream_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/streampoll"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/jitstream"
)

var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

var ctx = context.Background()

// testRole is the pool's instance role id: records are keyed
// <role id>:<instance id>, and the consumer must take the key from the
// stream's image, not the instance id.
const testRole = "AROAJITSTREAMTEST0001"

// rig is a state table with a stream read as Lambda would, a fake GitHub,
// and one instance of a run that got its first configuration from
// provision.
type rig struct {
	t     *testing.T
	store *state.Store
	fake  *fakegithub.Server
	deps  jitstream.Deps
	poll  *streampoll.Poller
	inst  *state.Instance
	// ahead moves the consumer's clock (leases, the instance's rate).
	ahead time.Duration
}

// later moves the consumer's clock past the instance's rate, as the
// agent's next ask comes seconds after the last.
func (r *rig) later() { r.ahead += controlplane.DefaultJITLimits.Every + time.Second }

func newRig(t *testing.T) *rig {
	r := &rig{t: t, fake: fakegithub.New("acme", "globex")}
	t.Cleanup(r.fake.Close)
	r.store = statetest.NewStore(t, env, state.TableOptions{Stream: true})
	gh, err := github.New(github.Config{BaseURL: r.fake.URL(), AppID: r.fake.AppID, PrivateKeyPEM: r.fake.PrivateKeyPEM})
	must(t, err)
	r.deps = jitstream.Deps{Deps: &controlplane.Deps{Store: r.store, GitHub: gh, Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		Now: func() time.Time { return time.Now().Add(r.ahead) }}
	must(t, r.store.PutPoolConfig(ctx, state.PoolConfig{Name: "linux", Owner: "acme", QueueURL: "https://sqs/q", LaunchTemplateID: "lt-1",
		LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand", MaxInstances: 5, InstanceRoleID: testRole}))
	_, _, err = r.store.StartRun(ctx, state.Run{ID: "run-1", Pool: "linux", Owner: "acme", InstanceCount: 1, Request: "{}", Label: "ghr-run-1-secret"})
	must(t, err)
	inst, err := r.store.Create(ctx, state.NewInstance{ID: "i-0abc", RoleID: testRole, Pool: "linux", Owner: "acme", RunID: "run-1", Assignment: state.NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute})
	must(t, err)
	_, err = r.store.AddRunInstances(ctx, "run-1", inst.ID)
	must(t, err)
	r.inst, err = r.deps.MintJIT(ctx, inst, 1, "ghr-run-1-secret", 1)
	must(t, err)
	r.poll, err = streampoll.New(ctx, env.Config(t).DynamoDB(), env.URL, awstest.Region, r.store.Table())
	must(t, err)
	return r
}

// deliver hands every new stream batch to the consumer, as Lambda would,
// and returns the batches and the answers.
func (r *rig) deliver() ([]streampoll.Batch, []*jitstream.Output) {
	r.t.Helper()
	batches, err := r.poll.Poll(ctx)
	must(r.t, err)
	var answers []*jitstream.Output
	for _, b := range batches {
		out, err := jitstream.Handle(ctx, r.deps, b.Event)
		must(r.t, err)
		answers = append(answers, out)
	}
	return batches, answers
}

func (r *rig) jitRunners() []fakegithub.RunnerInfo {
	var out []fakegithub.RunnerInfo
	for _, rn := range r.fake.Runners() {
		if rn.JIT {
			out = append(out, rn)
		}
	}
	return out
}

func TestTheAgentsRequestIsAnsweredOnceFromTheStream(t *testing.T) {
	r := newRig(t)
	must(t, r.store.PutSignal(ctx, r.inst.Key, r.inst.Assignment, state.SignalJITNext, "2"))
	batches, _ := r.deliver()
	rec, err := r.store.Get(ctx, r.inst.Key)
	must(t, err)
	if rec.JITSeq != 2 || rec.Registration == nil || rec.Registration.Seq != 2 || rec.Registration.RunnerName != state.JITRunnerName(rec.Uses, 2, "i-0abc") {
		t.Fatalf("after the request: seq %d, registration %v", rec.JITSeq, rec.Registration)
	}
	// The run's label and no other: a just-in-time runner has only the
	// labels it was made with (fakegithub jit.go), and the run's jobs ask
	// for that label alone.
	if rs := r.jitRunners(); len(rs) != 2 || len(rs[1].Labels) != 1 || !strings.EqualFold(rs[1].Labels[0], "ghr-run-1-secret") {
		t.Fatalf("runners %+v, want the first and the second, labelled with the run's label alone", rs)
	}
	// Lambda delivers at least once: the same batch again mints nothing.
	for _, b := range batches {
		out, err := jitstream.Handle(ctx, r.deps, b.Event)
		if err != nil || len(out.BatchItemFailures) > 0 {
			t.Fatalf("redelivery: %+v %v", out, err)
		}
	}
	if rs := r.jitRunners(); len(rs) != 2 {
		t.Fatalf("a redelivered request minted again: %+v", rs)
	}
	if rec2, _ := r.store.Get(ctx, r.inst.Key); rec2.Registration.RunnerID != rec.Registration.RunnerID {
		t.Fatal("a redelivered request replaced the configuration")
	}
}

func TestNoConfigurationForAReleasedRun(t *testing.T) {
	r := newRig(t)
	_, err := r.store.SetRunStatus(ctx, "run-1", state.RunReleased, "released", state.RunProvisioning)
	must(t, err)
	must(t, r.store.PutSignal(ctx, r.inst.Key, r.inst.Assignment, state.SignalJITNext, "2"))
	r.deliver()
	if rec, _ := r.store.Get(ctx, r.inst.Key); rec.JITSeq != 1 {
		t.Fatalf("a released run's instance got configuration %d", rec.JITSeq)
	}
	if rs := r.jitRunners(); len(rs) != 1 {
		t.Fatalf("runners %+v: one minted for a released run", rs)
	}
}

// GitHub failing for one owner (issue 30, item 9): the record is not
// reported for retry, which would hold the shard, and with it every other
// owner's requests, for up to the stream's retries; nothing is written, a
// request of another owner in the same batch is served, and the agent's
// repeated request is served once GitHub answers. (Reporting the failure
// instead fails the first check: one batch item failure.)
func TestARequestGitHubFailsForIsLeftForTheAgentsNextAskAndHoldsUpNoOtherOwner(t *testing.T) {
	r := newRig(t)
	other := r.otherOwner("globex")
	r.fake.Inject(fakegithub.Fault{Method: "POST", Path: "orgs/acme/actions/runners/generate-jitconfig", Status: 502})
	must(t, r.store.PutSignal(ctx, r.inst.Key, r.inst.Assignment, state.SignalJITNext, "2"))
	must(t, r.store.PutSignal(ctx, other.Key, other.Assignment, state.SignalJITNext, "2"))
	_, answers := r.deliver()
	for _, a := range answers {
		if len(a.BatchItemFailures) != 0 {
			t.Fatalf("batch item failures %+v: GitHub's failure for acme held up the shard", a.BatchItemFailures)
		}
	}
	if rec, _ := r.store.Get(ctx, r.inst.Key); rec.JITSeq != 1 {
		t.Fatalf("configuration %d written while GitHub failed", rec.JITSeq)
	}
	if rec, _ := r.store.Get(ctx, other.Key); rec.JITSeq != 2 {
		t.Fatalf("globex's request behind acme's failure: seq %d, want 2", rec.JITSeq)
	}
	r.fake.ClearFaults()
	// The failed call counted against the instance's rate.
	r.later()
	must(t, r.store.PutSignal(ctx, r.inst.Key, r.inst.Assignment, state.SignalJITNext, "2")) // the agent asks again
	r.deliver()
	if rec, _ := r.store.Get(ctx, r.inst.Key); rec.JITSeq != 2 {
		t.Fatalf("the repeated request was not served: seq %d", rec.JITSeq)
	}
}

// A write that loses (the run released between the read and the write)
// leaves no runner behind; an earlier attempt killed between mint and
// write leaves a runner of the same name, which is deleted and minted again.
func TestMintingLeavesNoRunnerBehind(t *testing.T) {
	r := newRig(t)
	stale := *r.inst
	stale.Assignment = "gone"
	if _, err := r.deps.MintJIT(ctx, &stale, 2, "ghr-run-1-secret", 1); state.ClauseOf(err) != state.ClauseAssignment {
		t.Fatalf("mint for a stale assignment: %v", err)
	}
	if rs := r.jitRunners(); len(rs) != 1 {
		t.Fatalf("runners %+v: the lost write's runner was not deleted", rs)
	}
	orphan, err := r.deps.GitHub.GenerateJITConfig(ctx, "acme", state.JITRunnerName(r.inst.Uses, 2, "i-0abc"), 1, []string{"x"})
	must(t, err)
	if _, err := r.deps.MintJIT(ctx, r.inst, 2, "ghr-run-1-secret", 1); err != nil {
		t.Fatalf("mint over a killed attempt's runner: %v", err)
	}
	if _, ok := r.fake.Runner(orphan.RunnerID); ok {
		t.Fatal("the killed attempt's runner is still registered")
	}
}

func TestEventsThatAreNotRequestsAreIgnored(t *testing.T) {
	r := newRig(t)
	raw, _ := json.Marshal(map[string]any{"Records": []any{map[string]any{"eventName": "MODIFY", "dynamodb": map[string]any{
		"NewImage": map[string]any{"kind": map[string]any{"S": "run"}, "pk": map[string]any{"S": "run#run-1"}}}}}})
	out, err := jitstream.Handle(ctx, r.deps, raw)
	if err != nil || len(out.BatchItemFailures) != 0 || len(r.jitRunners()) != 1 {
		t.Fatalf("a run item's change: %+v %v", out, err)
	}
	if _, err := jitstream.Handle(ctx, r.deps, json.RawMessage(`"not an event"`)); err == nil {
		t.Fatal("a payload that is not a stream event was accepted")
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A request served twice from a stale read (a redelivery, or a write whose
// answer was lost and is retried): the name is taken by the runner the
// record holds, which must survive, and nothing new is minted. (Chaos
// found the first version deleting it while its job ran.)
func TestAWrittenRunnerIsNeverDeletedByARepeatedMint(t *testing.T) {
	r := newRig(t)
	stale := *r.inst // read before number 2 was written
	must(t, r.store.PutSignal(ctx, r.inst.Key, r.inst.Assignment, state.SignalJITNext, "2"))
	written, err := r.deps.MintJIT(ctx, r.inst, 2, "ghr-run-1-secret", 1)
	must(t, err)
	again, err := r.deps.MintJIT(ctx, &stale, 2, "ghr-run-1-secret", 1)
	if err != nil || again.Registration == nil || again.Registration.RunnerID != written.Registration.RunnerID {
		t.Fatalf("the repeated mint: %v, %+v; want the written record back", err, again)
	}
	if _, ok := r.fake.Runner(written.Registration.RunnerID); !ok {
		t.Fatal("the runner the record holds was deleted")
	}
	if rs := r.jitRunners(); len(rs) != 2 {
		t.Fatalf("runners %+v, want the first and the written second", rs)
	}
}

// TestAnHonestAgentsRequestsAreServedPastTheCap: the bound on what a
// request costs (controlplane/jitcap.go) never holds back a run whose
// jobs keep coming: each runner the agent asks after took a job (busy as
// its job ends, or gone: GitHub removes a just-in-time runner after its
// job), so a look at GitHub finds it and the count starts again. Eight
// jobs on one instance, each request seconds after the last: every one is
// served, with one look per runner at most.
func TestAnHonestAgentsRequestsAreServedPastTheCap(t *testing.T) {
	r := newRig(t)
	before := r.fake.Counts()
	for n := 2; n <= 8; n++ {
		rec, err := r.store.Get(ctx, r.inst.Key)
		must(t, err)
		if n%2 == 0 {
			must(t, r.deps.GitHub.DeleteRunner(ctx, "acme", rec.Registration.RunnerID)) // its job is over: GitHub removed it
		} else {
			r.fake.SetBusy(rec.Registration.RunnerID, true) // its job ends as the agent asks
		}
		r.later()
		must(t, r.store.PutSignal(ctx, r.inst.Key, rec.Assignment, state.SignalJITNext, strconv.Itoa(n)))
		_, answers := r.deliver()
		for _, a := range answers {
			if len(a.Refused) > 0 {
				t.Fatalf("request %d refused: %+v", n, a.Refused)
			}
		}
		if rec, _ = r.store.Get(ctx, r.inst.Key); rec.JITSeq != n {
			t.Fatalf("request %d not served: the record holds %d", n, rec.JITSeq)
		}
	}
	if looks := r.fake.Counts()["GET /orgs/{org}/actions/runners"] - before["GET /orgs/{org}/actions/runners"]; looks > 7 {
		t.Errorf("%d looks at runners for 7 requests", looks)
	}
}

// TestLambdaReadsOnlyThePartialBatchResponse: the refusals are for the
// function's metrics; what Lambda reads is the partial batch response.
func TestLambdaReadsOnlyThePartialBatchResponse(t *testing.T) {
	out := &jitstream.Output{Refused: []jitstream.Refusal{{Pool: "linux", InstanceID: "i-1", Seq: 4, Clause: state.ClauseJITUnused, Why: "why"}}}
	out.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: "42"}}
	raw, err := json.Marshal(out)
	must(t, err)
	if string(raw) != `{"batchItemFailures":[{"itemIdentifier":"42"}]}` {
		t.Fatalf("the function answers %s", raw)
	}
}
