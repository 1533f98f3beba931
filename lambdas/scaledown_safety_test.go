package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/scaledown"
)

// The scale-down regression tests: each names the scenario that went wrong.
// They run without agents (the tests write the records) and, where a test
// must step in between scale-down's reads, run the handler in this process
// against the same moto and fake GitHub.

// scaleDownDeploy is a deployment without agents whose pool's idle quota
// is idle; its instances are old enough for scale-down after a second.
func scaleDownDeploy(t *testing.T, idle int, tune func(*state.PoolConfig)) *deployment {
	d := deploy(t, func(p *state.PoolConfig) {
		p.MaxInstances = 500
		p.Timings.MinRunningTime, p.Timings.BootTime = 1, 1
		p.IdleWindows = []state.IdleWindow{{Cron: "* * * * *", TimeZone: "UTC", IdleCount: idle, EvictionStrategy: "oldest_first"}}
		if tune != nil {
			tune(p)
		}
	})
	d.host.Stop()
	return d
}

// launchN starts n instances of the pool for owner in one launch.
func (d *deployment) launchN(n int, owner string) []string {
	d.t.Helper()
	req := launchRequest(d)
	req.Count, req.Owner = n, owner
	res, err := d.fleet.Launch(ctx, req)
	must(d.t, err)
	if len(res.Instances) != n {
		d.t.Fatalf("launched %d of %d", len(res.Instances), n)
	}
	ids := make([]string, n)
	for i, l := range res.Instances {
		ids[i] = l.InstanceID
	}
	return ids
}

// pooledIdle writes the record of a clean idle instance claimed uses times
// before (0: pre-warmed, never used), through the store's transitions.
func (d *deployment) pooledIdle(id, owner string, uses int, tune func(*state.NewInstance)) *state.Instance {
	d.t.Helper()
	n := state.NewInstance{ID: id, RoleID: d.pool.InstanceRoleID, Pool: d.pool.Name, Owner: owner, Assignment: state.NewAssignment(), InstanceType: "c7i.large",
		UsageClass: "on-demand", LaunchTemplateVersion: d.pool.LaunchTemplateVersion, TTL: time.Hour}
	if tune != nil {
		tune(&n)
	}
	inst, err := d.store.Create(ctx, n)
	must(d.t, err)
	must(d.t, d.store.PutSignal(ctx, d.key(id), inst.Assignment, state.SignalOK, ""))
	// A short idle lease: a renewal (the pool's 300 s) moves it later.
	inst, err = d.store.JoinPool(ctx, inst.Ref(), time.Minute)
	must(d.t, err)
	for i := 0; i < uses; i++ {
		must(d.t, d.store.PutSignal(ctx, d.key(id), inst.Assignment, state.SignalRemoveRegOK, ""))
		inst, err = d.store.Claim(ctx, d.key(id), state.ClaimRequest{RunID: fmt.Sprintf("seed-%d", i), Pool: d.pool.Name, Owner: owner, ClaimTTL: time.Hour})
		must(d.t, err)
		inst, err = d.store.Unclaim(ctx, inst.Ref(), time.Minute, nil)
		must(d.t, err)
	}
	must(d.t, d.store.PutSignal(ctx, d.key(id), inst.Assignment, state.SignalRemoveRegOK, ""))
	inst, err = d.store.Get(ctx, d.key(id))
	must(d.t, err)
	return inst
}

// gitHub is a client of the fake GitHub for handlers run in this process.
func (d *deployment) gitHub() *github.Client {
	gc, err := github.New(github.Config{BaseURL: d.fake.URL(), AppID: d.fake.AppID, PrivateKeyPEM: d.fake.PrivateKeyPEM})
	must(d.t, err)
	return gc
}

// scaleDownHere runs scale-down in this process with the given store and
// GitHub, as the bundle runs it.
func (d *deployment) scaleDownHere(c context.Context, store *state.Store, gh controlplane.GitHub) *scaledown.Output {
	d.t.Helper()
	deps := &controlplane.Deps{Store: store, SQS: d.aws.SQS(), GitHub: gh, Log: slog.New(slog.NewJSONHandler(d.logs, nil))}
	out, err := scaledown.Handle(c, scaledown.Deps{Deps: deps, EC2: d.fleet}, nil)
	must(d.t, err)
	return out
}

// ec2States maps each instance of the deployment, terminated ones
// included, to its EC2 state.
func (d *deployment) ec2States() map[string]string {
	d.t.Helper()
	insts, err := d.fleet.List(ctx, fleet.Filter{States: []string{"pending", "running", "stopping", "stopped", "shutting-down", "terminated"}})
	must(d.t, err)
	out := map[string]string{}
	for _, in := range insts {
		out[in.ID] = in.State
	}
	return out
}

func alive(ec2State string) bool {
	return ec2State != "" && ec2State != "shutting-down" && ec2State != "terminated"
}

// listHook is the GitHub client with something done right before the
// first runner listing: the moment between scale-down's record reads and
// its listing.
type listHook struct {
	*github.Client
	once   sync.Once
	before func()
}

func (h *listHook) ListRunners(c context.Context, owner string) ([]github.Runner, error) {
	h.once.Do(h.before)
	return h.Client.ListRunners(c, owner)
}

// TestScaleDownSparesTheRunnerOfARunThatClaimedMeanwhile: scale-down reads
// a clean idle instance beyond the idle quota; before it lists the runners,
// a provision claims the instance and its agent registers the new run's
// runner (ghr-<uses>-<id>, uses one more). The runner of the new run must
// survive, and so must the instance and the claim.
func TestScaleDownSparesTheRunnerOfARunThatClaimedMeanwhile(t *testing.T) {
	t.Parallel()
	d := scaleDownDeploy(t, 0, nil)
	id := d.launchN(1, "acme")[0]
	d.pooledIdle(id, "acme", 1, nil)
	time.Sleep(1100 * time.Millisecond) // past the minimum running time
	var newRunner int64
	gh := &listHook{Client: d.gitHub(), before: func() {
		claimed, err := d.store.Claim(ctx, d.key(id), state.ClaimRequest{RunID: "late-run", Pool: "linux", Owner: "acme", ClaimTTL: time.Minute})
		must(t, err)
		newRunner = d.fake.AddRunner("acme", state.RunnerName(claimed.Uses, id), false, "late-run")
	}}
	out := d.scaleDownHere(ctx, d.store, gh)
	if _, ok := d.fake.Runner(newRunner); !ok {
		t.Fatalf("the runner of the run that claimed the instance was deleted; output %+v", out)
	}
	rec, err := d.store.Get(ctx, d.key(id))
	must(t, err)
	if rec.State != state.Claimed || rec.RunID != "late-run" {
		t.Fatalf("record: %s for %q, want claimed for late-run", rec.State, rec.RunID)
	}
	if st := d.ec2States()[id]; !alive(st) {
		t.Fatalf("the claimed instance is %s", st)
	}
}

// TestScaleDownRetiresIdleInstancesNoClaimCanTake: idle instances within
// the quota that no claim can take (too old, used maxUses times, launched
// from another launch template version) are retired, each with its rule,
// and do not hold the quota; a reusable one is kept.
func TestScaleDownRetiresIdleInstancesNoClaimCanTake(t *testing.T) {
	t.Parallel()
	d := scaleDownDeploy(t, 10, func(p *state.PoolConfig) { p.Timings.MaxUses = 2 })
	ids := d.launchN(4, "acme")
	d.pooledIdle(ids[0], "acme", 0, func(n *state.NewInstance) { n.LaunchedAt = time.Now().Add(-48 * time.Hour) })
	d.pooledIdle(ids[1], "acme", 2, nil)
	d.pooledIdle(ids[2], "acme", 1, func(n *state.NewInstance) { n.LaunchTemplateVersion = "0" })
	good := d.pooledIdle(ids[3], "acme", 1, nil)
	time.Sleep(1100 * time.Millisecond)
	var out scaleDownOut
	d.call(bundle.HandlerScaleDown, nil, &out)
	reasons := map[string]string{}
	for _, k := range out.Terminated {
		reasons[k.InstanceID] = k.Reason
	}
	states := d.ec2States()
	for i, rule := range []string{"maxAge", "maxUses", "launch template version"} {
		if !strings.Contains(reasons[ids[i]], rule) {
			t.Errorf("%s: terminated for %q, want a reason naming %s (output %+v)", ids[i], reasons[ids[i]], rule, out)
		}
		rec, err := d.store.Get(ctx, d.key(ids[i]))
		must(t, err)
		if rec.State != state.Terminated || alive(states[ids[i]]) {
			t.Errorf("%s: record %s, EC2 %s; want both terminated", ids[i], rec.State, states[ids[i]])
		}
	}
	rec, err := d.store.Get(ctx, d.key(ids[3]))
	must(t, err)
	if rec.State != state.Idle || rec.Threshold <= good.Threshold || !alive(states[ids[3]]) {
		t.Errorf("reusable instance: %s, lease %d (was %d), EC2 %s; want kept and renewed", rec.State, rec.Threshold, good.Threshold, states[ids[3]])
	}
}

// TestScaleDownRenewRemovesTheStaleRunner: an idle instance within the
// quota whose last run's runner is still registered is renewed and the
// runner removed, as the output says.
func TestScaleDownRenewRemovesTheStaleRunner(t *testing.T) {
	t.Parallel()
	d := scaleDownDeploy(t, 5, nil)
	id := d.launchN(1, "acme")[0]
	before := d.pooledIdle(id, "acme", 1, nil)
	stale := d.fake.AddRunner("acme", state.RunnerName(1, id), false, "seed-0")
	d.fake.SetOnline(stale, false)
	time.Sleep(1100 * time.Millisecond)
	var out scaleDownOut
	d.call(bundle.HandlerScaleDown, nil, &out)
	if len(out.Kept) != 1 || !strings.Contains(out.Kept[0].Reason, "within the idle quota") {
		t.Fatalf("output %+v", out)
	}
	if r, ok := d.fake.Runner(stale); ok {
		t.Fatalf("stale runner %+v still registered; scale-down said %q", r, out.Kept[0].Reason)
	}
	rec, err := d.store.Get(ctx, d.key(id))
	must(t, err)
	if rec.State != state.Idle || rec.Threshold <= before.Threshold {
		t.Fatalf("record %s, lease %d (was %d): want idle and renewed", rec.State, rec.Threshold, before.Threshold)
	}
}

// TestScaleDownSweepsGhostRunners: offline, idle runners named after an
// instance whose record is terminated are deleted, whether the instance is
// gone or still in EC2 (which scale-down then terminates); a busy or online
// one, one of a live record, one of an instance this deployment does not
// know and one not named by ghrunner stay.
func TestScaleDownSweepsGhostRunners(t *testing.T) {
	t.Parallel()
	d := scaleDownDeploy(t, 5, nil)
	ids := d.launchN(3, "acme")
	for _, id := range ids {
		inst, err := d.store.Create(ctx, state.NewInstance{ID: id, RoleID: d.pool.InstanceRoleID, Pool: "linux", Owner: "acme", RunID: "run-" + id, Assignment: state.NewAssignment(), InstanceType: "c7i.large", UsageClass: "on-demand", TTL: time.Hour})
		must(t, err)
		if id != ids[2] {
			_, err = d.store.Terminate(ctx, d.key(id), state.Termination{Assignment: inst.Assignment, Reason: "test"})
			must(t, err)
		}
	}
	_, err := d.fleet.Terminate(ctx, ids[:1])
	must(t, err)
	offline := func(name string, busy bool) int64 {
		id := d.fake.AddRunner("acme", name, busy, "x")
		d.fake.SetOnline(id, false)
		return id
	}
	ghosts := []int64{offline(state.RunnerName(1, ids[0]), false), offline(state.RunnerName(1, ids[1]), false)}
	stay := map[string]int64{
		"busy":             offline(state.RunnerName(2, ids[0]), true),
		"online":           d.fake.AddRunner("acme", state.RunnerName(3, ids[0]), false, "x"),
		"live record":      offline(state.RunnerName(1, ids[2]), false),
		"unknown instance": offline(state.RunnerName(1, "i-0123456789abcdef0"), false),
		"not ghrunner's":   offline("build-box-7", false),
	}
	time.Sleep(1100 * time.Millisecond)
	var out scaleDownOut
	d.call(bundle.HandlerScaleDown, nil, &out)
	for _, g := range ghosts {
		if r, ok := d.fake.Runner(g); ok {
			t.Errorf("ghost runner %s still registered (output %+v)", r.Name, out)
		}
	}
	for why, id := range stay {
		if _, ok := d.fake.Runner(id); !ok {
			t.Errorf("runner deleted although %s", why)
		}
	}
	if st := d.ec2States()[ids[1]]; alive(st) {
		t.Errorf("instance %s whose record is terminated is %s after scale-down", ids[1], st)
	}
}
