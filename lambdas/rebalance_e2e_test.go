package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// An instance EC2 recommends rebalancing runs its run to the end, then
// release retires it instead of pooling it, and the next run gets a new
// instance: a recommendation only makes an instance less claimable.
func TestAnInstanceEC2RecommendsRebalancingFinishesItsRunAndIsNotPooledAgain(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	var out provisionOut
	d.call("provision", map[string]any{"runId": "rebal", "pool": "linux"}, &out)
	id := out.Instances[0].InstanceID
	a := d.host.Agent(id)
	if a == nil {
		t.Fatal("no agent for the instance")
	}
	a.IMDS.RecommendRebalance(time.Now())
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec, err := d.store.Get(ctx, d.key(id))
		must(t, err)
		if rec.HasRebalance() {
			if rec.State != state.Running {
				t.Fatalf("the recommendation changed the run's instance: %s", rec.State)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not say the rebalance recommendation")
		}
		time.Sleep(250 * time.Millisecond)
	}
	var rel releaseOut
	d.call("release", map[string]any{"runId": "rebal"}, &rel)
	if len(rel.Released) != 0 || len(rel.Expired) != 1 {
		t.Fatalf("release = %+v, want the instance expired, not pooled", rel)
	}
	rec, err := d.store.Get(ctx, d.key(id))
	must(t, err)
	if rec.PooledAt != 0 || !strings.Contains(rec.TerminatedReason, "rebalanc") {
		t.Fatalf("record after release = %+v", rec)
	}
	var next provisionOut
	d.call("provision", map[string]any{"runId": "after", "pool": "linux"}, &next)
	if next.Reused != 0 || next.Created != 1 || next.Instances[0].InstanceID == id {
		t.Fatalf("next provision = %+v, want a new instance", next)
	}
}
