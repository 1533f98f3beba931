package main

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrentProvisionsShareNothing: two workflows race for one pooled
// instance: one reuses it, the other gets a new one.
func TestConcurrentProvisionsShareNothing(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	d.seedPool(1)

	outs := make([]provisionOut, 2)
	var wg sync.WaitGroup
	for i, run := range []string{"race-a", "race-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.call("provision", map[string]any{"runId": run, "pool": "linux"}, &outs[i])
		}()
	}
	wg.Wait()
	if outs[0].Reused+outs[1].Reused != 1 || outs[0].Created+outs[1].Created != 1 {
		t.Fatalf("race results %+v / %+v: want one reuse and one create", outs[0], outs[1])
	}
	if outs[0].Instances[0].InstanceID == outs[1].Instances[0].InstanceID {
		t.Fatal("two runs share an instance")
	}
	for _, o := range outs {
		if job := d.job(o.Label, "true"); !strings.HasSuffix(job.Runner, o.Instances[0].InstanceID) {
			t.Fatalf("job of %s ran on %s", o.RunID, job.Runner)
		}
	}
}

// TestMoreThanThePool: the pool has one instance, the run wants three.
func TestMoreThanThePool(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	d.seedPool(1)
	var rel releaseOut
	var out provisionOut
	d.call("provision", map[string]any{"runId": "big", "pool": "linux", "instanceCount": 3}, &out)
	if out.Reused != 1 || out.Created != 2 || len(out.Instances) != 3 {
		t.Fatalf("provision = %+v", out)
	}
	for _, in := range out.Instances {
		// A token pool's registration comes with the claim.
		if in.ClaimedSeconds <= 0 || in.ConfiguredSeconds != in.ClaimedSeconds || in.ReadySeconds < in.ConfiguredSeconds || in.ReadySeconds > out.ElapsedSeconds {
			t.Errorf("%s (%s): claimed %.3f, configured %.3f, ready %.3f of %.3f s", in.InstanceID, in.Source, in.ClaimedSeconds, in.ConfiguredSeconds, in.ReadySeconds, out.ElapsedSeconds)
		}
	}
	// Provision retried for the same runId joins the run: same instances, no new ones.
	var again provisionOut
	d.call("provision", map[string]any{"runId": "big", "pool": "linux", "instanceCount": 3}, &again)
	if len(again.Instances) != 3 || len(d.live()) != 3 {
		t.Fatalf("retry: %+v, %d live instances", again, len(d.live()))
	}
	// The same runId with another payload is refused.
	res := d.invoke("provision", map[string]any{"runId": "big", "pool": "linux", "instanceCount": 2})
	if res.FunctionError == "" || !strings.Contains(string(res.Payload), "runId") {
		t.Fatalf("different payload for a runId: %s", res.Payload)
	}
	d.call("release", map[string]any{"runId": "big"}, &rel)
	if len(rel.Released) != 3 {
		t.Fatalf("release = %+v", rel)
	}
	var twice releaseOut
	d.call("release", map[string]any{"runId": "big"}, &twice)
	if len(twice.Released) != 0 || !strings.Contains(twice.Note, "released already") {
		t.Fatalf("second release = %+v", twice)
	}
	var none releaseOut
	d.call("release", map[string]any{"runId": "never-provisioned"}, &none)
	if !strings.Contains(none.Note, "nothing to release") {
		t.Fatalf("release of an unknown run = %+v", none)
	}
}
