package main

import (
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/streampoll"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/jitstream"
)

// jitFlood is one just-in-time instance of run-1 in pool linux of owner
// acme, with provision's first configuration written, whose requests the
// real stream consumer serves from the table's stream against the fake
// GitHub, on the control plane's clock (clock, moved by the test).
type jitFlood struct {
	t      *testing.T
	fake   *fakegithub.Server
	gh     *github.Client
	store  *state.Store
	groups *controlplane.GroupIDs
	poll   *streampoll.Poller
	inst   *state.Instance
	clock  time.Time
	outs   []*jitstream.Output
	asks   int
}

// newJITFlood sets it up; group, when set, is the pool's runner group.
func newJITFlood(t *testing.T, role, instanceID, group string) *jitFlood {
	f := &jitFlood{t: t, fake: fakegithub.New("acme"), clock: time.Now()}
	t.Cleanup(f.fake.Close)
	if group != "" {
		f.fake.AddRunnerGroup("acme", group)
	}
	f.store = statetest.NewStore(t, env, state.TableOptions{Stream: true})
	var err error
	f.gh, err = github.New(github.Config{BaseURL: f.fake.URL(), AppID: f.fake.AppID, PrivateKeyPEM: f.fake.PrivateKeyPEM})
	must(t, err)
	// As the bundle runs it: one group cache for the execution environment.
	f.groups = &controlplane.GroupIDs{TTL: groupIDsFor}
	must(t, f.store.PutPoolConfig(ctx, state.PoolConfig{Name: "linux", Owner: "acme", QueueURL: "https://sqs/q", LaunchTemplateID: "lt-1",
		LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand", MaxInstances: 5,
		InstanceRoleID: role, RunnerGroup: group}))
	_, _, err = f.store.StartRun(ctx, state.Run{ID: "run-1", Pool: "linux", Owner: "acme", InstanceCount: 1, Request: "{}", Label: "ghr-run-1-secret"})
	must(t, err)
	f.inst, err = f.store.Create(ctx, state.NewInstance{ID: instanceID, RoleID: role, Pool: "linux", Owner: "acme", RunID: "run-1", Assignment: state.NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: time.Hour})
	must(t, err)
	_, err = f.store.AddRunInstances(ctx, "run-1", f.inst.ID)
	must(t, err)
	// Provision's first configuration, in the pool's group.
	d := f.deps()
	p, err := d.Pool(ctx, "linux")
	must(t, err)
	groupID, err := d.GroupID(ctx, p)
	must(t, err)
	_, err = d.MintJIT(ctx, f.inst, 1, "ghr-run-1-secret", groupID)
	must(t, err)
	f.poll, err = streampoll.New(ctx, env.Config(t).DynamoDB(), env.URL, awstest.Region, f.store.Table())
	must(t, err)
	return f
}

func (f *jitFlood) deps() jitstream.Deps {
	return jitstream.Deps{Deps: &controlplane.Deps{Store: f.store, GitHub: f.gh, Groups: f.groups, Log: slog.New(slog.NewTextHandler(io.Discard, nil))},
		Now: func() time.Time { return f.clock }}
}

// flood writes n requests, step apart on the control plane's clock, each
// served by the consumer before the next.
func (f *jitFlood) flood(n int, step time.Duration) {
	f.t.Helper()
	for range n {
		f.clock = f.clock.Add(step)
		rec, err := f.store.Get(ctx, f.inst.Key)
		must(f.t, err)
		// What the role allows: a signal of its own record, for its
		// assignment, asking for the next number.
		must(f.t, f.store.PutSignal(ctx, f.inst.Key, rec.Assignment, state.SignalJITNext, strconv.Itoa(rec.JITSeq+1)))
		f.asks++
		batches, err := f.poll.Poll(ctx)
		must(f.t, err)
		for _, b := range batches {
			out, err := jitstream.Handle(ctx, f.deps(), b.Event)
			must(f.t, err)
			f.outs = append(f.outs, out)
		}
	}
}

// jitRunners are the fake's just-in-time runners.
func (f *jitFlood) jitRunners() []fakegithub.RunnerInfo {
	var out []fakegithub.RunnerInfo
	for _, r := range f.fake.Runners() {
		if r.JIT {
			out = append(out, r)
		}
	}
	return out
}
