package refresh_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
)

// publish makes version GitHub's latest actions/runner release, published
// at the given time, with a tarball of its own.
func (w *world) publish(version string, at time.Time) {
	w.fake.PublishRunnerRelease(version, []byte("tarball of "+version), at)
}

func TestAPoolFollowingLatestMovesToANewReleaseAndRetiresIdleInstancesGitHubNoLongerServes(t *testing.T) {
	w := newWorld(t)
	w.pool.Runner = state.RunnerSpec{Version: runnerrelease.Latest, Arch: "amd64"}
	must(t, w.cp.PutPoolConfig(ctx, w.pool))
	// 2.337.0 came out 31 days ago (the fake's clock): 2.336.0 is refused.
	w.publish("2.337.0", time.Now().Add(-31*24*time.Hour))
	old, current := w.idle(), w.idle()
	busy, agent := w.running("run-1", 0)
	must(t, agent.SetRunnerVersion(ctx, old.Key, "2.336.0"))
	must(t, agent.SetRunnerVersion(ctx, current.Key, "2.337.0"))
	must(t, agent.SetRunnerVersion(ctx, busy.Key, "2.336.0"))

	out, err := w.refresh()
	if err != nil {
		t.Fatal(err)
	}
	p, err := w.cp.GetPoolConfig(ctx, "linux")
	must(t, err)
	want := runnerrelease.Target{Version: "2.337.0", URL: w.fake.URL() + "/actions/runner/releases/download/v2.337.0/actions-runner-linux-x64-2.337.0.tar.gz"}
	if p.LatestTarget == nil || p.LatestTarget.Version != want.Version || p.LatestTarget.URL != want.URL || len(p.LatestTarget.SHA256) != 64 {
		t.Fatalf("the pool's latest target is %+v, want %+v with the published checksum", p.LatestTarget, want)
	}
	for _, inst := range []*state.Instance{old, current, busy} {
		got, err := w.cp.Get(ctx, inst.Key)
		must(t, err)
		if got.RunnerTarget == nil || *got.RunnerTarget != *p.LatestTarget {
			t.Errorf("%s: runner target %+v, want the pool's", inst.ID, got.RunnerTarget)
		}
	}
	if len(out.Expired) != 1 || out.Expired[0].InstanceID != old.ID || out.Expired[0].Kind != refresh.KindRetired ||
		!strings.Contains(out.Expired[0].Reason, "2.336.0 is no longer served by GitHub") {
		t.Fatalf("expired %+v, want only the idle instance on 2.336.0, retired", out.Expired)
	}
	v := out.RunnerVersions["linux"]
	if v.Target != "2.337.0" || v.Instances["2.336.0"] != 2 || v.Instances["2.337.0"] != 1 || v.SecondsLeft == nil || *v.SecondsLeft >= 0 {
		t.Fatalf("the pool's versions %+v, want target 2.337.0, two on 2.336.0 (refused: seconds left < 0), one on 2.337.0", v)
	}
}

func TestRefreshAsksGitHubForReleasesAtMostEveryInterval(t *testing.T) {
	w := newWorld(t)
	w.pool.Runner = state.RunnerSpec{Version: runnerrelease.Latest, Arch: "arm64"}
	must(t, w.cp.PutPoolConfig(ctx, w.pool))
	w.publish("2.337.0", time.Now())
	every := 10 * time.Minute
	run := func() *refresh.Output {
		out, err := refresh.Handle(ctx, refresh.Deps{Deps: w.deps, EC2: refresh.FleetEC2{Fleet: w.fleet}, ReleasesEvery: every}, nil)
		must(t, err)
		return out
	}
	run()
	w.publish("2.338.0", time.Now())
	if got := run().RunnerVersions["linux"].Target; got != "2.337.0" {
		t.Fatalf("within the interval the target is %s, want the cached 2.337.0", got)
	}
	if n := w.fake.Count(fakegithub.CountLatestRelease); n != 1 {
		t.Fatalf("GitHub was asked %d times within the interval, want 1", n)
	}
	w.now = w.now.Add(every)
	if got := run().RunnerVersions["linux"].Target; got != "2.338.0" {
		t.Fatalf("after the interval the target is %s, want 2.338.0", got)
	}
}

// A throttled read of a pool's records leaves its instances alone, not
// its target: new instances install the target at boot, and a chaos run
// saw a pool left behind a release for two minutes while its reads were
// throttled (invariant 11).
func TestAPoolWhoseRecordsCannotBeReadStillMovesToANewRelease(t *testing.T) {
	w := newWorld(t)
	w.pool.Runner = state.RunnerSpec{Version: runnerrelease.Latest, Arch: "amd64"}
	must(t, w.cp.PutPoolConfig(ctx, w.pool))
	w.publish("2.337.0", time.Now().Add(-time.Hour))
	w.idle()
	w.db.set(func(op string, in any) error {
		if op == "BatchGetItem" {
			return throttled
		}
		return nil
	})
	if _, err := w.refresh(); err == nil {
		t.Fatal("refresh succeeded although it could not read the pool's records")
	}
	w.db.set(nil)
	p, err := w.cp.GetPoolConfig(ctx, "linux")
	must(t, err)
	if p.LatestTarget == nil || p.LatestTarget.Version != "2.337.0" {
		t.Fatalf("the pool's latest target is %+v, want 2.337.0 although its records could not be read", p.LatestTarget)
	}
}
