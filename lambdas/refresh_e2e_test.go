package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TestInstanceWithoutRecordIsReconciled: an instance of the deployment that
// has no record (a provision died between CreateFleet and its records) is
// terminated by refresh once it is older than createdTTL.
func TestInstanceWithoutRecordIsReconciled(t *testing.T) {
	t.Parallel()
	// createdTTL well above one refresh's run time, which a loaded 2-core
	// machine stretched to 15 s once, making the young instance old.
	d := deploy(t, func(p *state.PoolConfig) { p.Timings.CreatedTTL = 20 })
	res, err := d.fleet.Launch(ctx, launchRequest(d))
	must(t, err)
	lost := res.Instances[0].InstanceID
	var ref struct {
		Terminated []struct{ InstanceID, Reason string } `json:"terminated"`
	}
	d.call("refresh", nil, &ref)
	if len(ref.Terminated) != 0 {
		t.Fatalf("refresh terminated a young instance: %+v", ref)
	}
	time.Sleep(21 * time.Second)
	d.call("refresh", nil, &ref)
	if len(ref.Terminated) != 1 || ref.Terminated[0].InstanceID != lost || ref.Terminated[0].Reason != "no record" {
		t.Fatalf("refresh = %+v", ref)
	}
	if n := len(d.live()); n != 0 {
		t.Fatalf("%d live instances", n)
	}
}

// TestSilentAgentIsRetired: an instance whose agent stops sending
// heartbeats is expired by refresh, then terminated by the next refresh.
func TestSilentAgentIsRetired(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) { p.Timings.StaleAfter = 3 })
	var out provisionOut
	d.call("provision", map[string]any{"runId": "quiet", "pool": "linux"}, &out)
	id := out.Instances[0].InstanceID
	var ref struct {
		Terminated []struct{ InstanceID, Reason string } `json:"terminated"`
		Expired    []struct{ InstanceID, Reason string } `json:"expired"`
	}
	d.call("refresh", nil, &ref)
	if len(ref.Expired)+len(ref.Terminated) != 0 {
		t.Fatalf("refresh retired a healthy instance: %+v", ref)
	}
	d.host.Freeze(id)
	// Silence is judged on refresh's clock: the heartbeat counter must stand
	// still between two refreshes more than the stale limit apart (and the
	// runner, killed with its agent, must be offline on GitHub).
	for round := 0; round < 4 && len(ref.Expired) == 0; round++ {
		time.Sleep(4 * time.Second)
		d.call("refresh", nil, &ref)
	}
	if len(ref.Expired) != 1 || ref.Expired[0].InstanceID != id || !strings.Contains(ref.Expired[0].Reason, "heartbeat silent") {
		t.Fatalf("refresh after silence = %+v", ref)
	}
	d.call("refresh", nil, &ref)
	if len(ref.Terminated) != 1 || ref.Terminated[0].InstanceID != id {
		t.Fatalf("next refresh = %+v", ref)
	}
	if n := len(d.live()); n != 0 {
		t.Fatalf("%d live instances", n)
	}
}

// TestScheduledFunctionsRunOneAtATime: while an invocation of refresh (or
// scale-down) holds its single-flight lease, another does nothing and says
// so; once the lease is released, or its holder's deadline has passed, the
// next one runs. This replaces reserved concurrency 1.
func TestScheduledFunctionsRunOneAtATime(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) { p.Timings.CreatedTTL = 1 })
	res, err := d.fleet.Launch(ctx, launchRequest(d))
	must(t, err)
	lost := res.Instances[0].InstanceID
	time.Sleep(2 * time.Second) // older than createdTTL: refresh would terminate it
	for _, handler := range []string{"refresh", "scale-down"} {
		ok, err := d.store.AcquireLease(ctx, handler, "running-invocation", time.Now().Add(time.Minute))
		must(t, err)
		if !ok {
			t.Fatalf("%s lease taken before the test", handler)
		}
		var out struct {
			Skipped    string `json:"skipped"`
			Terminated []struct{ InstanceID string }
		}
		d.call(handler, nil, &out)
		if out.Skipped == "" || len(out.Terminated) != 0 {
			t.Fatalf("%s while another holds the lease: %+v", handler, out)
		}
		must(t, d.store.ReleaseLease(ctx, handler, "running-invocation"))
	}
	var ref struct {
		Skipped    string `json:"skipped"`
		Terminated []struct{ InstanceID string }
	}
	d.call("refresh", nil, &ref)
	if ref.Skipped != "" || len(ref.Terminated) != 1 || ref.Terminated[0].InstanceID != lost {
		t.Fatalf("refresh after the release: %+v", ref)
	}
	// The lease of a finished invocation is free again at once.
	d.call("refresh", nil, &ref)
	if ref.Skipped != "" {
		t.Fatalf("second refresh: %+v", ref)
	}
}
