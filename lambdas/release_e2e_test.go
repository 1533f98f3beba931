package main

import (
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TestAgentDiesDuringRelease: an instance whose agent stops answering is
// expired by release, never pooled, and terminated by refresh.
func TestAgentDiesDuringRelease(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) { p.Timings.ReleaseWait = 3 })
	var out provisionOut
	d.call("provision", map[string]any{"runId": "dies", "pool": "linux"}, &out)
	id := out.Instances[0].InstanceID
	if !d.host.Freeze(id) {
		t.Fatal("no agent to freeze")
	}
	var rel releaseOut
	d.call("release", map[string]any{"runId": "dies"}, &rel)
	if len(rel.Expired) != 1 || len(rel.Released) != 0 {
		t.Fatalf("release = %+v", rel)
	}
	var ref struct {
		Terminated []struct{ InstanceID, Reason string } `json:"terminated"`
	}
	d.call("refresh", map[string]any{}, &ref)
	if len(ref.Terminated) != 1 || ref.Terminated[0].InstanceID != id {
		t.Fatalf("refresh = %+v", ref)
	}
	rec, err := d.store.Get(ctx, d.key(id))
	must(t, err)
	if rec.State != state.Terminated || rec.PooledAt != 0 {
		t.Fatalf("record = %+v", rec)
	}
	if n := len(d.live()); n != 0 {
		t.Fatalf("%d live instances after refresh", n)
	}
}
