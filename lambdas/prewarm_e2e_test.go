package main

import (
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

type refreshOut struct {
	Prewarmed []struct{ InstanceID, Reason string } `json:"prewarmed"`
	Joined    []struct{ InstanceID, Reason string } `json:"joined"`
	Repooled  []struct{ InstanceID, Reason string } `json:"repooled"`
	Errors    []string                              `json:"errors"`
}

// refreshUntilPooled runs refresh until want pre-warmed instances are idle,
// clean and in the pool queue; it returns every instance refresh launched.
func (d *deployment) refreshUntilPooled(want int) map[string]bool {
	d.t.Helper()
	launched := map[string]bool{}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var out refreshOut
		d.call(bundle.HandlerRefresh, nil, &out)
		if len(out.Errors) > 0 {
			d.t.Fatalf("refresh: %v", out.Errors)
		}
		for _, p := range out.Prewarmed {
			launched[p.InstanceID] = true
		}
		idle, err := d.store.ByPoolState(ctx, d.pool.Name, state.Idle, time.Time{})
		must(d.t, err)
		pooled := 0
		for _, in := range idle {
			rec, err := d.store.Get(ctx, in.Key)
			must(d.t, err)
			if rec.Clean() && rec.PooledAt != 0 {
				pooled++
			}
		}
		if pooled >= want {
			return launched
		}
	}
	d.t.Fatalf("no %d pre-warmed instances pooled within 60 s (launched %v)", want, launched)
	return nil
}

// TestAPoolIsPrewarmedWithinItsIdleWindowAndTrimmedOutsideIt: with an idle
// window active and nothing in the pool, refresh launches the window's
// idle count with no run; they join the pool once their agents are ready
// and clean, without a runner ever registered; a first workflow is served
// from them ("reused"); and once the window is over, scale-down trims them.
func TestAPoolIsPrewarmedWithinItsIdleWindowAndTrimmedOutsideIt(t *testing.T) {
	t.Parallel()
	const windowCount = 2
	d := deploy(t, func(p *state.PoolConfig) {
		p.MaxInstances = 3
		p.Timings.MinRunningTime = 1
		p.IdleWindows = []state.IdleWindow{{Cron: "* * * * *", TimeZone: "UTC", IdleCount: windowCount, EvictionStrategy: "oldest_first"}}
	})
	launched := d.refreshUntilPooled(windowCount)
	if len(launched) != windowCount {
		t.Fatalf("refresh launched %d instances, want the window's idle count %d: %v", len(launched), windowCount, launched)
	}
	if live := d.live(); len(live) != windowCount {
		t.Fatalf("%d instances live after pre-warming, want %d", len(live), windowCount)
	}
	if regs := d.fake.Runners(); len(regs) != 0 {
		t.Fatalf("pre-warming registered runners: %+v", regs)
	}
	// Refresh again: the pool is full, nothing more is launched.
	var again refreshOut
	d.call(bundle.HandlerRefresh, nil, &again)
	if len(again.Prewarmed) != 0 {
		t.Fatalf("a full pool was topped up again: %+v", again.Prewarmed)
	}

	var out provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "first", "pool": "linux", "instanceCount": windowCount}, &out)
	if out.Reused != windowCount || out.Created != 0 {
		t.Fatalf("the first workflow: %d reused, %d created; want %d reused", out.Reused, out.Created, windowCount)
	}
	for _, in := range out.Instances {
		if !launched[in.InstanceID] || in.Source != "reused" {
			t.Errorf("instance %s (%s) was not one refresh pre-warmed", in.InstanceID, in.Source)
		}
	}
	job := d.job(out.Label, "echo warm")
	if job.Result != "succeeded" {
		t.Fatalf("job on a pre-warmed runner: %+v", job)
	}
	var rel releaseOut
	d.call(bundle.HandlerRelease, map[string]any{"runId": "first"}, &rel)
	if len(rel.Released) != windowCount {
		t.Fatalf("release: %+v", rel)
	}

	// The window closes: scale-down trims the pool to nothing, and
	// refresh launches nothing more.
	d.pool.IdleWindows[0].Cron = "0 0 1 1 *"
	if time.Now().UTC().Format("01-02 15:04") == "01-01 00:00" {
		d.pool.IdleWindows[0].Cron = "0 0 2 1 *"
	}
	must(t, d.store.PutPoolConfig(ctx, d.pool))
	var sd scaleDownOut
	d.call(bundle.HandlerScaleDown, nil, &sd)
	if len(sd.Terminated) != windowCount {
		t.Fatalf("scale-down outside the window terminated %d, want %d: %+v", len(sd.Terminated), windowCount, sd)
	}
	var after refreshOut
	d.call(bundle.HandlerRefresh, nil, &after)
	if len(after.Prewarmed) != 0 {
		t.Fatalf("refresh pre-warmed outside the window: %+v", after.Prewarmed)
	}
}

// TestPrewarmingStopsAtThePoolsCap: a window that wants more idle
// instances than max_instances allows gets max_instances, and refresh
// does not fail for it.
func TestPrewarmingStopsAtThePoolsCap(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) {
		p.MaxInstances = 2
		p.IdleWindows = []state.IdleWindow{{Cron: "* * * * *", TimeZone: "UTC", IdleCount: 5, EvictionStrategy: "oldest_first"}}
	})
	var out refreshOut
	d.call(bundle.HandlerRefresh, nil, &out)
	if len(out.Errors) > 0 {
		t.Fatalf("refresh failed at the cap: %v", out.Errors)
	}
	if len(out.Prewarmed) != 2 || len(d.live()) != 2 {
		t.Fatalf("pre-warmed %d, %d live: want max_instances, 2", len(out.Prewarmed), len(d.live()))
	}
	// What the operator's status shows of it.
	last, err := d.store.GetLastRun(ctx, bundle.HandlerRefresh)
	must(t, err)
	if last == nil || last.Counts["prewarmed"] != 2 || last.Error != "" {
		t.Fatalf("refresh's last run: %+v", last)
	}
}
