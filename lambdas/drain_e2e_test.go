package main

import (
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TestADrainingPoolFinishesItsRunsAndTakesNoNewOne: an operator drains a
// pool while a run uses it and another instance waits idle. The idle one
// is retired at once; the run's job still runs; a new run is refused
// naming the drain, a retried provision of the run under way is not; the
// release retires the run's instance instead of pooling it; refresh ends
// both; scale-down and refresh launch nothing for the pool.
func TestADrainingPoolFinishesItsRunsAndTakesNoNewOne(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) {
		p.IdleWindows = []state.IdleWindow{{Cron: "* * * * *", TimeZone: "UTC", IdleCount: 1, EvictionStrategy: "oldest_first"}}
	})
	// Two instances in the pool; the run claims one, the other stays idle.
	d.seedPool(2)
	var busy provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "busy", "pool": "linux", "instanceCount": 1}, &busy)
	if busy.Created != 0 {
		t.Fatalf("the run did not reuse a pooled instance: %+v", busy)
	}

	v, err := ops.Drain(ctx, d.store, "linux", true)
	must(t, err)
	if len(v.Retired) != 1 || strings.Join(v.RunsInFlight, ",") != "busy" {
		t.Fatalf("drain: %+v", v)
	}
	if job := d.job(busy.Label, "echo still running"); job.Result != "succeeded" {
		t.Fatalf("the run's job while draining: %+v", job)
	}
	res := d.invoke(bundle.HandlerProvision, map[string]any{"runId": "new", "pool": "linux", "instanceCount": 1})
	if res.FunctionError == "" || !strings.Contains(string(res.Payload), "draining") {
		t.Fatalf("a new run on a draining pool: %s", res.Payload)
	}
	var again provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "busy", "pool": "linux", "instanceCount": 1}, &again)
	if again.Status != "ready" || again.Instances[0].InstanceID != busy.Instances[0].InstanceID {
		t.Fatalf("a retried provision of the run under way: %+v", again)
	}
	var rel releaseOut
	d.call(bundle.HandlerRelease, map[string]any{"runId": "busy"}, &rel)
	if len(rel.Released) != 0 || len(rel.Expired) != 1 {
		t.Fatalf("release on a draining pool pooled its instance: %+v", rel)
	}
	var ref refreshOut
	d.call(bundle.HandlerRefresh, nil, &ref)
	if len(ref.Prewarmed) != 0 {
		t.Fatalf("refresh pre-warmed a draining pool: %+v", ref)
	}
	d.call(bundle.HandlerRefresh, nil, &ref)
	if n := len(d.live()); n != 0 {
		t.Fatalf("%d instances live after the drain and two refreshes", n)
	}
}
