package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TestLifecycleWalkthrough plays the lifecycle of docs/design.md end to end:
// create → running → jobs only on the run's runner → release → idle in the
// pool → a second workflow reuses the same instance → release.
func TestLifecycleWalkthrough(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	var first provisionOut
	d.call("provision", map[string]any{"runId": "7890", "pool": "linux"}, &first)
	if first.Status != "ready" || len(first.Instances) != 1 || first.Created != 1 || first.Instances[0].Source != "created" {
		t.Fatalf("first provision = %+v", first)
	}
	id := first.Instances[0].InstanceID
	rec, err := d.store.Get(ctx, id)
	must(t, err)
	if rec.State != state.Running || rec.RunID != "7890" || rec.Registration != nil {
		t.Fatalf("record after provision: %s run %q registration kept=%v", rec.State, rec.RunID, rec.Registration != nil)
	}
	foreign := d.fake.EnqueueJob("someone-else", "echo must not run")
	if job := d.job("7890", "echo build"); job.ExitCode != 0 || !strings.HasSuffix(job.Runner, id) {
		t.Fatalf("job = %+v", job)
	}

	var rel releaseOut
	d.call("release", map[string]any{"runId": "7890"}, &rel)
	if len(rel.Released) != 1 || rel.Released[0] != id || len(rel.Expired) != 0 {
		t.Fatalf("release = %+v", rel)
	}
	rec, err = d.store.Get(ctx, id)
	must(t, err)
	if rec.State != state.Idle || !rec.Clean() || rec.PooledAt == 0 || rec.RunID != "" {
		t.Fatalf("record after release: %+v", rec)
	}
	if len(d.fake.Runners()) != 0 {
		t.Fatalf("runner left on GitHub: %+v", d.fake.Runners())
	}

	var second provisionOut
	d.call("provision", map[string]any{"runId": "9999", "pool": "linux", "allowedInstanceTypes": []string{"c*", "m*"}}, &second)
	if second.Reused != 1 || second.Instances[0].InstanceID != id {
		t.Fatalf("second provision did not reuse %s: %+v", id, second)
	}
	if job := d.job("9999", "echo test"); job.ExitCode != 0 || !strings.HasSuffix(job.Runner, id) || !strings.HasPrefix(job.Runner, "ghr-2-") {
		t.Fatalf("job of the second workflow = %+v", job)
	}
	d.call("release", map[string]any{"runId": "9999"}, &rel)
	if len(rel.Released) != 1 {
		t.Fatalf("second release = %+v", rel)
	}
	if j, _ := d.fake.Job(foreign); j.State != "queued" {
		t.Fatalf("a job of another label ran: %+v", j)
	}
	if n := len(d.live()); n != 1 {
		t.Fatalf("%d live instances, want the one reused instance", n)
	}
	t.Logf("created in %.1fs, reused in %.1fs", first.ElapsedSeconds, second.ElapsedSeconds)
}

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
		if job := d.job(o.RunID, "true"); !strings.HasSuffix(job.Runner, o.Instances[0].InstanceID) {
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
	rec, err := d.store.Get(ctx, id)
	must(t, err)
	if rec.State != state.Terminated || rec.PooledAt != 0 {
		t.Fatalf("record = %+v", rec)
	}
	if n := len(d.live()); n != 0 {
		t.Fatalf("%d live instances after refresh", n)
	}
}

// TestInstanceWithoutRecordIsReconciled: an instance of the deployment that
// has no record (a provision died between CreateFleet and its records) is
// terminated by refresh once it is older than createdTTL.
func TestInstanceWithoutRecordIsReconciled(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) { p.Timings.CreatedTTL = 3 })
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
	time.Sleep(4 * time.Second)
	d.call("refresh", nil, &ref)
	if len(ref.Terminated) != 1 || ref.Terminated[0].InstanceID != lost || ref.Terminated[0].Reason != "no record" {
		t.Fatalf("refresh = %+v", ref)
	}
	if n := len(d.live()); n != 0 {
		t.Fatalf("%d live instances", n)
	}
}

// TestBadPayloads: every malformed payload is a function error naming the
// field, and changes nothing.
func TestBadPayloads(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	cases := []struct {
		handler, payload, field string
	}{
		{"provision", ``, "empty payload"},
		{"provision", `[]`, "JSON object"},
		{"provision", `{"pool":"linux"}`, "runId: required"},
		{"provision", `{"runId":"","pool":"linux"}`, "runId: required"},
		{"provision", `{"runId":"1; rm -rf /","pool":"linux"}`, "runId:"},
		{"provision", `{"runId":"a,b","pool":"linux"}`, "runId:"},
		{"provision", `{"runId":123,"pool":"linux"}`, "runId: want a string"},
		{"provision", `{"runId":"1"}`, "pool: required"},
		{"provision", `{"runId":"1","pool":"gpu"}`, `pool: unknown pool \"gpu\"; known pools: linux`},
		{"provision", `{"runId":"1","pool":"linux","instanceCount":0}`, "instanceCount: must be 1 to 20"},
		{"provision", `{"runId":"1","pool":"linux","instanceCount":21}`, "instanceCount: must be 1 to 20"},
		{"provision", `{"runId":"1","pool":"linux","instanceCount":"3"}`, "instanceCount: want an integer"},
		{"provision", `{"runId":"1","pool":"linux","usageClass":"reserved"}`, "usageClass:"},
		{"provision", `{"runId":"1","pool":"linux","allowedInstanceTypes":["r7*"]}`, "allowedInstanceTypes: [r7*] match none"},
		{"provision", `{"runId":"1","pool":"linux","allowedInstanceTypes":["c*;x"]}`, "allowedInstanceTypes[0]:"},
		{"provision", `{"runId":"1","pool":"linux","allowedInstanceTypes":"c*"}`, "allowedInstanceTypes: want an array"},
		{"provision", `{"runId":"1","pool":"linux","owner":"other-org"}`, "owner:"},
		{"provision", `{"runId":"1","pool":"linux","timeoutSeconds":5}`, "timeoutSeconds:"},
		{"provision", `{"runId":"1","pool":"linux","instancecount":2}`, "instancecount: unknown field"},
		{"provision", `{"runId":"1","pool":"linux","extra":true}`, "extra: unknown field"},
		{"release", `{}`, "runId: required"},
		{"release", `{"runId":"x y"}`, "runId:"},
		{"release", `{"runID":"1"}`, "runID: unknown field"},
		{"refresh", `{"force":true}`, "force: unknown field"},
	}
	for _, c := range cases {
		res := d.invoke(c.handler, []byte(c.payload))
		if res.FunctionError == "" || !strings.Contains(string(res.Payload), c.field) {
			t.Errorf("%s %s: %s %s, want a function error containing %q", c.handler, c.payload, res.FunctionError, res.Payload, c.field)
		}
	}
	if n := len(d.live()); n != 0 {
		t.Fatalf("bad payloads launched %d instances", n)
	}
	if _, err := d.store.GetRun(ctx, "1"); !state.IsNotFound(err) {
		t.Fatalf("a bad payload left a run item: %v", err)
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
