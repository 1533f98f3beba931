package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

type scaleDownOut struct {
	Kept       []struct{ InstanceID, Pool, Reason string } `json:"kept"`
	Terminated []struct{ InstanceID, Pool, Reason string } `json:"terminated"`
	Orphaned   []struct{ InstanceID, Pool, Reason string } `json:"orphaned"`
	Untagged   []struct{ InstanceID, Pool, Reason string } `json:"untagged"`
	Errors     []string                                    `json:"errors"`
}

// TestScaleDownAtScale: instances of five owners in two pools, idle, busy
// and unrecorded, decided by scale-down through the bundle. It checks the
// decisions, one GitHub listing per owner and terminations in batches.
//
// Not parallel: it counts TerminateInstances calls, which the emulator's
// proxy counts for the whole package; the parallel tests wait for it.
func TestScaleDownAtScale(t *testing.T) {
	d := deploy(t, func(p *state.PoolConfig) {
		p.MaxInstances = 500
		p.Timings.MinRunningTime, p.Timings.BootTime = 1, 1
		p.IdleWindows = []state.IdleWindow{{Cron: "* * * * *", TimeZone: "UTC", IdleCount: 5, EvictionStrategy: "oldest_first"}}
	})
	d.host.Stop() // no agents: the test writes the records
	second := d.pool
	second.Name = "linux-large"
	second.IdleWindows = []state.IdleWindow{{Cron: "* * * * *", TimeZone: "Asia/Tokyo", IdleCount: 3, EvictionStrategy: "newest_first"}}
	must(t, d.store.PutPoolConfig(ctx, second))

	owners := []string{"acme", "acme/api", "acme/web", "acme/ops", "acme/data"}
	want := map[string]string{}
	var idle []string
	n := 0
	for _, pool := range []string{"linux", "linux-large"} {
		for i := 0; i < 100; i++ {
			owner := owners[n%len(owners)]
			n++
			req := launchRequest(d)
			req.Pool, req.Owner = pool, owner
			res, err := d.fleet.Launch(ctx, req)
			must(t, err)
			id := res.Instances[0].InstanceID
			switch i % 3 {
			case 0: // clean idle in the pool
				inst, err := d.store.Create(ctx, state.NewInstance{ID: id, RoleID: d.pool.InstanceRoleID, Pool: pool, Owner: owner, RunID: "seed", Assignment: req.Assignment, InstanceType: "c7i.large", UsageClass: "on-demand", TTL: time.Hour,
					LaunchTemplateVersion: d.pool.LaunchTemplateVersion})
				must(t, err)
				must(t, d.store.PutSignal(ctx, d.key(id), inst.Assignment, state.SignalRegOK, ""))
				inst, err = d.store.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
				must(t, err)
				inst, err = d.store.Release(ctx, inst.Ref(), "seed", time.Hour, nil)
				must(t, err)
				must(t, d.store.PutSignal(ctx, d.key(id), inst.Assignment, state.SignalRemoveRegOK, ""))
				idle = append(idle, id)
				want[id] = "idle"
			case 1: // running for a run, registered and busy
				inst, err := d.store.Create(ctx, state.NewInstance{ID: id, RoleID: d.pool.InstanceRoleID, Pool: pool, Owner: owner, RunID: "busy-run", Assignment: req.Assignment, InstanceType: "c7i.large", UsageClass: "on-demand", TTL: time.Hour})
				must(t, err)
				must(t, d.store.PutSignal(ctx, d.key(id), inst.Assignment, state.SignalRegOK, ""))
				_, err = d.store.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
				must(t, err)
				d.fake.AddRunner(owner, fmt.Sprintf("ghr-1-%s", id), true, "busy-run")
				want[id] = "kept"
			case 2: // launched, never recorded
				want[id] = "orphaned"
			}
		}
	}
	// One more idle instance beyond the quota whose last run's runner is
	// still registered and, when listed, running a job: it is kept for the
	// next run rather than have its job killed.
	req := launchRequest(d)
	res, err := d.fleet.Launch(ctx, req)
	must(t, err)
	stuck := res.Instances[0].InstanceID
	inst, err := d.store.Create(ctx, state.NewInstance{ID: stuck, RoleID: d.pool.InstanceRoleID, Pool: "linux", Owner: "acme", RunID: "seed", Assignment: req.Assignment, InstanceType: "c7i.large", UsageClass: "on-demand", TTL: time.Hour, LaunchedAt: time.Now().Add(-48 * time.Hour)})
	must(t, err)
	must(t, d.store.PutSignal(ctx, d.key(stuck), inst.Assignment, state.SignalRegOK, ""))
	inst, err = d.store.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	must(t, err)
	inst, err = d.store.Release(ctx, inst.Ref(), "seed", time.Hour, nil)
	must(t, err)
	must(t, d.store.PutSignal(ctx, d.key(stuck), inst.Assignment, state.SignalRemoveRegOK, ""))
	runnerID := d.fake.AddRunner("acme", "ghr-1-"+stuck, false, "seed")
	d.fake.SetBusy(runnerID, false)

	time.Sleep(1100 * time.Millisecond) // past the minimum running and boot times of 1 s
	d.fake.SetBusy(runnerID, true)      // busy by the time scale-down re-reads it
	termBefore := env.Calls("TerminateInstances")
	// The fake marks a runner offline once it has not been heard from for
	// a few seconds; a loaded machine can take that long to get to the
	// re-read. This runner's listener is alive all along.
	keepOnline := func() (stop func()) {
		heard := make(chan struct{})
		go func() {
			for {
				d.fake.SetOnline(runnerID, true)
				select {
				case <-heard:
					return
				case <-time.After(500 * time.Millisecond):
				}
			}
		}()
		return func() { close(heard) }
	}
	stop := keepOnline()
	var out scaleDownOut
	d.call(bundle.HandlerScaleDown, map[string]any{}, &out)
	stop()
	if len(out.Errors) != 0 {
		t.Fatalf("errors: %v", out.Errors)
	}
	got := map[string]string{}
	for _, k := range out.Kept {
		got[k.InstanceID] = "kept"
	}
	for _, k := range out.Terminated {
		got[k.InstanceID] = "terminated"
	}
	for _, k := range out.Orphaned {
		got[k.InstanceID] = "orphaned"
	}
	kept := map[string]int{}
	for _, id := range idle {
		kept[got[id]]++
	}
	// The linux pool keeps 5 idle, linux-large 3; the rest go.
	if kept["kept"] != 8 || kept["terminated"] != len(idle)-8 {
		t.Fatalf("idle instances: %v; kept: %+v; terminated: %+v", kept, out.Kept, out.Terminated)
	}
	for id, w := range want {
		if w != "idle" && got[id] != w {
			t.Errorf("%s: %s, want %s", id, got[id], w)
		}
	}
	var stuckReason string
	for _, k := range out.Kept {
		if k.InstanceID == stuck {
			stuckReason = k.Reason
		}
	}
	if !strings.Contains(stuckReason, "is running a job right now: kept for the next run") {
		t.Fatalf("instance whose runner is running a job: %q", stuckReason)
	}
	if org, repo := d.fake.Count("GET /orgs/{org}/actions/runners"), d.fake.Count("GET /repos/{org}/{repo}/actions/runners"); org != 1 || repo != 4 {
		t.Fatalf("runner listings: %d org + %d repo, want one per owner (1 + 4)", org, repo)
	}
	// Batches as the run goes (each sent when full or half a second after
	// its first id), not one call per instance nor one at the end. How
	// many half-seconds the run takes depends on the machine's load (a
	// loaded fresh-clone run made 11 calls): the bound is five
	// terminations a call on average, far from one per instance.
	if term := env.Calls("TerminateInstances") - termBefore; term < 1 || term*5 > int64(len(out.Terminated)) {
		t.Fatalf("%d TerminateInstances calls for %d terminations, want batches of five or more on average", term, len(out.Terminated))
	}

	// The next run terminates the orphans it tagged (no record, no runner id).
	// The stuck runner is still on its job (the fake would report it offline
	// after 5 s without a listener, and an offline busy runner is a ghost).
	stop = keepOnline()
	var next scaleDownOut
	d.call(bundle.HandlerScaleDown, nil, &next)
	stop()
	orphans := 0
	for _, k := range next.Terminated {
		if want[k.InstanceID] == "orphaned" {
			orphans++
		}
	}
	if orphans != 66 {
		t.Fatalf("second run terminated %d orphans, want 66", orphans)
	}
	live, err := d.fleet.List(ctx, fleet.Filter{})
	must(t, err)
	if len(live) != 8+66+1 {
		t.Fatalf("%d live instances, want 8 idle + 66 running + the stuck one", len(live))
	}
}
