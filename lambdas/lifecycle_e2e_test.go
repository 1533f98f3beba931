package main

import (
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
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
	// The pool's tags (default tags, the pool's own) reach the instance.
	live, err := fleet.New(d.aws.EC2(), d.name).List(ctx, fleet.Filter{IDs: []string{id}})
	must(t, err)
	if len(live) != 1 || live[0].Tags["cost-center"] != "ci" {
		t.Fatalf("instance %s tags %+v, want the pool's cost-center=ci", id, live)
	}
	rec, err := d.store.Get(ctx, d.key(id))
	must(t, err)
	if rec.State != state.Running || rec.RunID != "7890" || rec.Registration != nil {
		t.Fatalf("record after provision: %s run %q registration kept=%v", rec.State, rec.RunID, rec.Registration != nil)
	}
	// The runner's label is minted: a job aimed at the run id, which anyone
	// can guess, never reaches it (issue 16).
	if !strings.HasPrefix(first.Label, "ghr-7890-") || len(first.Label) != len("ghr-7890-")+16 {
		t.Fatalf("label %q, want ghr-7890-<16 random characters>", first.Label)
	}
	foreign := d.fake.EnqueueJob("someone-else", "echo must not run")
	guessed := d.fake.EnqueueJob("7890", "echo aimed at the run id: must not run")
	if job := d.job(first.Label, "echo build; id -un"); job.ExitCode != 0 || !strings.HasSuffix(job.Runner, id) || job.Output != "build\ngr-"+id+"\n" {
		t.Fatalf("job = %+v, want it run by the instance's runner user gr-%s", job, id)
	}

	var rel releaseOut
	d.call("release", map[string]any{"runId": "7890"}, &rel)
	if len(rel.Released) != 1 || rel.Released[0] != id || len(rel.Expired) != 0 {
		t.Fatalf("release = %+v", rel)
	}
	rec, err = d.store.Get(ctx, d.key(id))
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
	if second.Label == first.Label || !strings.HasPrefix(second.Label, "ghr-9999-") {
		t.Fatalf("second run's label %q (first %q)", second.Label, first.Label)
	}
	if job := d.job(second.Label, "echo test"); job.ExitCode != 0 || !strings.HasSuffix(job.Runner, id) || !strings.HasPrefix(job.Runner, "ghr-2-") {
		t.Fatalf("job of the second workflow = %+v", job)
	}
	d.call("release", map[string]any{"runId": "9999"}, &rel)
	if len(rel.Released) != 1 {
		t.Fatalf("second release = %+v", rel)
	}
	if j, _ := d.fake.Job(guessed); j.State != "queued" {
		t.Fatalf("a job aimed at the run id ran: %+v", j)
	}
	if j, _ := d.fake.Job(foreign); j.State != "queued" {
		t.Fatalf("a job of another label ran: %+v", j)
	}
	if n := len(d.live()); n != 1 {
		t.Fatalf("%d live instances, want the one reused instance", n)
	}
	t.Logf("created in %.1fs, reused in %.1fs", first.ElapsedSeconds, second.ElapsedSeconds)
}
