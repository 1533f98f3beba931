package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Issue 37, item 4: a provision waiting for capacity (or a slow boot) held
// one connection idle for minutes, which NAT gateways drop. A call with
// waitSeconds for a run another call provisions answers status
// provisioning within that bound, with the run's label and how far it
// got, and is asked again until the run is ready; then it reports the
// instances the first call got. Asking again with the very token of a
// call passes (the same operation of the same run), and takes no fair
// share lease of its own: with max_provisions_per_repository 1 the first
// call holds the only one. (Without the bound the second call waits for
// the run like the first; with the lease taken by joins it is refused.)
func TestACallAskedAgainAnswersProvisioningWithinWaitSecondsUntilTheRunIsReady(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) { p.MaxInstances, p.MaxProvisionsPerRepository = 1, 1 })
	var a provisionOut
	d.call("provision", map[string]any{"runId": "w-a", "pool": "linux"}, &a)
	first := make(chan provisionOut, 1)
	go func() {
		var out provisionOut
		d.call("provision", map[string]any{"runId": "w-b", "pool": "linux", "timeoutSeconds": 300}, &out)
		first <- out
	}()
	time.Sleep(2 * time.Second) // w-b's first call queues behind w-a
	again := d.signed(ownRepo, map[string]any{"runId": "w-b", "pool": "linux", "timeoutSeconds": 300, "waitSeconds": 1})
	for range 2 { // a second call, then the same call again with its token
		began := time.Now()
		res := d.invoke("provision", again)
		var out provisionOut
		if err := json.Unmarshal(res.Payload, &out); res.FunctionError != "" || err != nil {
			t.Fatalf("asked again: %s (%v)", res.Payload, err)
		}
		if took := time.Since(began); took > 4*time.Second {
			t.Errorf("asked again with waitSeconds 1, answered after %s", took)
		}
		if out.Status != "provisioning" || !strings.HasPrefix(out.Label, "ghr-w-b-") || len(out.Instances) != 0 ||
			out.Progress != "0 of 1 runners: waiting for the pool's capacity or a launch" || out.ElapsedSeconds < 2 {
			t.Fatalf("asked again while w-b waits for capacity: %+v", out)
		}
	}
	var rel releaseOut
	d.call("release", map[string]any{"runId": "w-a"}, &rel)
	var ready provisionOut
	for deadline := time.Now().Add(2 * time.Minute); ready.Status != "ready"; {
		if time.Now().After(deadline) {
			t.Fatalf("w-b not ready two minutes after w-a's release: %+v", ready)
		}
		d.call("provision", map[string]any{"runId": "w-b", "pool": "linux", "timeoutSeconds": 300, "waitSeconds": 1}, &ready)
	}
	got := <-first
	if got.Status != "ready" || len(ready.Instances) != 1 || ready.Instances[0].InstanceID != got.Instances[0].InstanceID || ready.Label != got.Label ||
		ready.ElapsedSeconds < 4 { // since the run began, not the last call

		t.Fatalf("asked again: %+v; the first call: %+v", ready, got)
	}
}
