package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// scaleSetDeploy is a deployment whose pool serves scale set name through
// the real listener process; it returns once the listener made the scale
// set at GitHub.
func scaleSetDeploy(t *testing.T, name string) *deployment {
	d := deploy(t, func(p *state.PoolConfig) {
		p.Registration, p.ScaleSet = state.RegistrationJIT, &state.ScaleSetConfig{Name: name}
	})
	d.startListener("task-1")
	waitFor(t, 30*time.Second, "the listener's scale set", func() bool { return len(d.fake.ScaleSets()) == 1 })
	return d
}

// runningJobRecord waits until scale-set job id runs and returns the
// record of the instance whose runner took it.
func (d *deployment) runningJobRecord(id int64) *state.Instance {
	d.t.Helper()
	var job fakegithub.Job
	waitFor(d.t.(*testing.T), 60*time.Second, "runner for job "+strconv.FormatInt(id, 10), func() bool {
		job, _ = d.fake.Job(id)
		return job.State == fakegithub.JobRunning
	})
	parts := strings.SplitN(job.Runner, "-", 4) // ghr-<uses>-<n>-<instance id>
	if len(parts) != 4 {
		d.t.Fatalf("runner %q is not one of ours", job.Runner)
	}
	rec, err := d.store.Get(ctx, d.key(parts[3]))
	must(d.t, err)
	return rec
}

// Issue 38: root on a scale set's instance writes what its agent writes
// of its own record, signals included. A forged UD_REG_OK (the runner
// online) on a running standing run changes nothing: the listener and
// refresh take a standing run as running on the control plane's own
// state, and adopt a claim as running only on GitHub's word (refresh) or
// for the record's own run (listener). A forged UD_JIT_NEXT (the runner
// ended, a next one wanted) ends only the forger's own run: the listener
// releases it (reaped, wiped, checked, as at any job's end) and gives it
// no second runner. The other standing run, its instance and its job go
// on untouched. (With the listener's reconcile not releasing on a wanted
// runner: "no release of the forger's run after 20s".)
func TestAStandingRunsForgedSignalsAffectOnlyItsOwnRun(t *testing.T) {
	t.Parallel()
	d := scaleSetDeploy(t, "linux-set")
	// The other's job outlasts a reconcile pass (10 s) and refresh; the
	// forger's would outlast the test: only its release ends it.
	quiet := d.fake.EnqueueScaleSetJob("acme", "app", "linux-set", "sleep 20; echo quiet done")
	forger := d.fake.EnqueueScaleSetJob("acme", "app", "linux-set", "sleep 300; echo forger done")
	other := d.runningJobRecord(quiet)
	own := d.runningJobRecord(forger)
	if other.ID == own.ID || !strings.HasPrefix(own.RunID, "ss") || !strings.HasPrefix(other.RunID, "ss") || own.RunID == other.RunID {
		t.Fatalf("want two standing runs on two instances: %s (%s), %s (%s)", other.ID, other.RunID, own.ID, own.RunID)
	}
	mints := d.fake.Count("POST /_fake/_apis/runtime/runnerscalesets/{id}/generatejitconfig")

	// The forgeries, through the agent's own write (root runs it as the
	// agent does): its runner online again, and a next runner wanted.
	must(t, d.store.PutSignal(ctx, own.Key, own.Assignment, state.SignalRegOK, "forged"))
	must(t, d.store.PutSignal(ctx, own.Key, own.Assignment, state.SignalJITNext, strconv.Itoa(own.JITSeq+1)))
	var ref struct{}
	d.call("refresh", nil, &ref)

	waitFor(t, 20*time.Second, "release of the forger's run", func() bool {
		rec, err := d.store.Get(ctx, own.Key)
		return err == nil && rec.RunID != own.RunID
	})
	// The other run, while its job runs: same run, same assignment.
	now, err := d.store.Get(ctx, other.Key)
	must(t, err)
	if now.RunID != other.RunID || now.Assignment != other.Assignment || now.State != state.Running {
		t.Errorf("the other standing run was touched: %s %s %s, was %s %s %s", now.RunID, now.Assignment, now.State, other.RunID, other.Assignment, other.State)
	}
	job, err := d.fake.WaitJob(quiet, 60*time.Second)
	must(t, err)
	if job.Result != "succeeded" || !strings.Contains(job.Output, "quiet done") {
		t.Errorf("the other run's job: %s %q", job.Result, job.Output)
	}
	rec, err := d.store.Get(ctx, own.Key)
	must(t, err)
	fj, _ := d.fake.Job(forger)
	t.Logf("the forger's instance after its release: %s (run %q); its job: %s %s", rec.State, rec.RunID, fj.State, fj.Result)
	for _, inst := range []*state.Instance{other, own} {
		if !d.alive(inst.ID) {
			t.Errorf("instance %s was terminated", inst.ID)
		}
	}
	// No runner minted for the forger's wanted one: the scale set mints a
	// runner per standing run, only when its count asks for one.
	if got := d.fake.Count("POST /_fake/_apis/runtime/runnerscalesets/{id}/generatejitconfig") - mints; got > 1 {
		t.Errorf("%d runners minted after the forgery", got)
	}
	if n := d.fake.Count("POST /orgs/{org}/actions/runners/generate-jitconfig"); n != 0 {
		t.Errorf("%d organization runners minted for a scale set's instance", n)
	}
}

// alive: EC2 has the instance, not terminated.
func (d *deployment) alive(id string) bool {
	for _, inst := range d.live() {
		if inst.ID == id {
			return true
		}
	}
	return false
}
