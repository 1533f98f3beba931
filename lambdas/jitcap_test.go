package main

import (
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/streampoll"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/jitstream"
)

// The GitHub calls a request can cost, as the fake counts them.
const (
	callMint   = "POST /orgs/{org}/actions/runners/generate-jitconfig"
	callGroups = "GET /orgs/{org}/actions/runner-groups"
	callLook   = "GET /orgs/{org}/actions/runners" // RunnerNamed: ?name=
)

// TestAnInstanceFloodingJITRequestsCostsTheOwnerAtMostTheBound (issue 36
// item 1): root on an instance wrote UD_JIT_NEXT 20 times in 1.6 s, each
// asking for the successor of the last configuration written, and got 21
// configurations: 20 generate-jitconfig calls against the owner's
// installation budget, 21 runners under the run's label, and with
// runner_group set a page through the owner's runner groups for each.
// Replayed here with the signal write the instance role allows
// (state.PutSignal on its own record), read from the table's stream and
// served by the real consumer, against the fake GitHub:
//   - the burst as it happened (the control plane's clock still): one
//     configuration, every other request refused by the instance's rate;
//   - the same burst spread out (the clock moved past the rate before each
//     write): the cap holds: the first configuration and at most
//     DefaultJITLimits.Unused more while none of the runners takes a job,
//     and the looks at GitHub that find none are backed off.
//
// Every refusal is in the record (what ghrunner instances shows) and in
// the function's JITRequestsRefused metric; the runner groups are listed
// once. With the control disabled (DecideJIT always minting, the rate
// clause of TakeJITRequest taken out; tried once) it reports: "40
// generate-jitconfig calls and 41 runners for one instance's 40 requests,
// want at most 2 and 3"; without the group cache (Deps.Groups nil):
// "the owner's runner groups were listed 3 times, want once", one per
// mint.
func TestAnInstanceFloodingJITRequestsCostsTheOwnerAtMostTheBound(t *testing.T) {
	const role = "AROAJITCAPTESTROLE001"
	fake := fakegithub.New("acme")
	t.Cleanup(fake.Close)
	fake.AddRunnerGroup("acme", "large")
	store := statetest.NewStore(t, env, state.TableOptions{Stream: true})
	gh, err := github.New(github.Config{BaseURL: fake.URL(), AppID: fake.AppID, PrivateKeyPEM: fake.PrivateKeyPEM})
	must(t, err)
	// As the bundle runs it: one group cache for the execution environment.
	groups := &controlplane.GroupIDs{TTL: groupIDsFor}
	clock := time.Now()
	deps := func() jitstream.Deps {
		return jitstream.Deps{Deps: &controlplane.Deps{Store: store, GitHub: gh, Groups: groups, Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
			Now: func() time.Time { return clock }}
	}
	must(t, store.PutPoolConfig(ctx, state.PoolConfig{Name: "linux", Owner: "acme", QueueURL: "https://sqs/q", LaunchTemplateID: "lt-1",
		LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand", MaxInstances: 5,
		OS: "linux", InstanceRoleID: role, RunnerGroup: "large"}))
	_, _, err = store.StartRun(ctx, state.Run{ID: "run-1", Pool: "linux", Owner: "acme", InstanceCount: 1, Request: "{}", Label: "ghr-run-1-secret"})
	must(t, err)
	inst, err := store.Create(ctx, state.NewInstance{ID: "i-0flood", RoleID: role, Pool: "linux", Owner: "acme", RunID: "run-1", Assignment: state.NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: time.Hour})
	must(t, err)
	_, err = store.AddRunInstances(ctx, "run-1", inst.ID)
	must(t, err)
	// Provision's first configuration, in the pool's group.
	d := deps()
	p, err := d.Pool(ctx, "linux")
	must(t, err)
	group, err := d.GroupID(ctx, p)
	must(t, err)
	_, err = d.MintJIT(ctx, inst, 1, "ghr-run-1-secret", group)
	must(t, err)
	poll, err := streampoll.New(ctx, env.Config(t).DynamoDB(), env.URL, awstest.Region, store.Table())
	must(t, err)
	before := fake.Counts()

	var outs []*jitstream.Output
	asks := 0
	flood := func(n int, step time.Duration) {
		for range n {
			clock = clock.Add(step)
			rec, err := store.Get(ctx, inst.Key)
			must(t, err)
			// What the role allows: a signal of its own record, for its
			// assignment, asking for the next number.
			must(t, store.PutSignal(ctx, inst.Key, rec.Assignment, state.SignalJITNext, strconv.Itoa(rec.JITSeq+1)))
			asks++
			batches, err := poll.Poll(ctx)
			must(t, err)
			for _, b := range batches {
				out, err := jitstream.Handle(ctx, deps(), b.Event)
				must(t, err)
				outs = append(outs, out)
			}
		}
	}
	flood(20, 0)                                                        // as it happened
	mintsInBurst := fake.Counts()[callMint] - before[callMint]          // the rate alone
	flood(20, controlplane.DefaultJITLimits.Every+500*time.Millisecond) // spread out

	after := fake.Counts()
	mints, looks, listed := after[callMint]-before[callMint], after[callLook]-before[callLook], after[callGroups]
	var runners int
	for _, r := range fake.Runners() {
		if r.JIT {
			runners++
		}
	}
	limit := controlplane.DefaultJITLimits.Unused
	t.Logf("%d requests: %d generate-jitconfig calls (%d in the burst), %d looks at a runner, %d runner group listings, %d runners", asks, mints, mintsInBurst, looks, listed, runners)
	if mints > limit || runners > limit+1 {
		t.Fatalf("%d generate-jitconfig calls and %d runners for one instance's %d requests, want at most %d and %d", mints, runners, asks, limit, limit+1)
	}
	if mintsInBurst != limit {
		t.Errorf("%d generate-jitconfig calls within the burst, want %d: the cap's, then one look within the instance's rate", mintsInBurst, limit)
	}
	// Looks: at most one per runner not seen, at the cap and then after
	// 10 s, 20 s, … (the spread-out burst lasts 50 s): 3 looks here.
	if maxLooks := (limit + 1) * 3; looks > maxLooks {
		t.Errorf("%d looks at runners, want at most %d", looks, maxLooks)
	}
	if listed != 1 {
		t.Errorf("the owner's runner groups were listed %d times, want once (cached)", listed)
	}

	// Refused, recorded and seen.
	rec, err := store.Get(ctx, inst.Key)
	must(t, err)
	r := rec.JITRefusedNow()
	refused := asks - mints
	if r.Count != refused || r.Clause != state.ClauseJITUnused || r.Why == "" || r.Looks == 0 {
		t.Errorf("the record's last refusal: %+v; want %d refused, the last for runners that took no job, with the looks made", r, refused)
	}
	if v := ops.View(*rec); v.JITRefused == nil || v.JITRefused.Count != refused {
		t.Errorf("ghrunner instances shows %+v, want the refusals", v.JITRefused)
	}
	if _, asked := rec.Signals[state.SignalJITNext]; asked {
		t.Error("a refused request is still in the record: its next write would deliver it again")
	}
	var recs []metrics.Record
	byClause := map[state.Clause]int{}
	for _, o := range outs {
		recs = append(recs, invocationMetrics(bundle.HandlerJIT, nil, o, false, 0.1, -1)...)
		for _, r := range o.Refused {
			byClause[r.Clause]++
		}
	}
	points := read(t, recs)
	for clause, n := range byClause {
		if got := sum(points, "JITRequestsRefused", map[string]string{"function": bundle.HandlerJIT, "pool": "linux", "reason": string(clause)}); got != float64(n) {
			t.Errorf("JITRequestsRefused for %s = %v, want %d", clause, got, n)
		}
	}
	if total, _ := metrics.Sum(points, "JITRequestsRefused", nil); total != float64(refused) || byClause[state.ClauseJITRate] == 0 || byClause[state.ClauseJITUnused] == 0 {
		t.Errorf("JITRequestsRefused = %v (%v), want %d, both the rate and the cap", total, byClause, refused)
	}
}
