package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"maps"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/ec2capacity"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/lambdart"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/scaledown"
)

type stoppedScaleDownOut struct {
	Stopped    []struct{ InstanceID, Reason string } `json:"stopped"`
	Terminated []struct{ InstanceID, Reason string } `json:"terminated"`
	Errors     []string                              `json:"errors"`
}

// ec2State is EC2's state of one instance ("" once it is terminated).
func (d *deployment) ec2State(id string) string {
	d.t.Helper()
	insts, err := d.fleet.List(ctx, fleet.Filter{IDs: []string{id}})
	must(d.t, err)
	if len(insts) == 0 {
		return ""
	}
	return insts[0].State
}

// TestAnIdleInstanceIsStoppedThenStartedForTheNextRunAndEndedPastItsKeepTime:
// a pool with a stopped tier and no idle quota; scale-down stops its idle
// instance instead of retiring it; the next workflow finds no warm
// instance and starts the stopped one (the same instance, its agent
// booted again), whose job runs; released and stopped again, it is
// terminated once its keep time has passed.
func TestAnIdleInstanceIsStoppedThenStartedForTheNextRunAndEndedPastItsKeepTime(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) {
		p.Timings.MinRunningTime = 1
		p.Stopped = &state.StoppedTier{Max: 1, KeepSeconds: 60}
	})
	var first provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "before-stop", "pool": "linux", "instanceCount": 1}, &first)
	if len(first.Instances) != 1 {
		t.Fatalf("first provision: %+v", first)
	}
	id := first.Instances[0].InstanceID
	if job := d.job(first.Label, "touch \"$HOME/left-before-the-stop\""); job.Result != "succeeded" {
		t.Fatalf("job before the stop: %+v", job)
	}
	var rel releaseOut
	d.call(bundle.HandlerRelease, map[string]any{"runId": "before-stop"}, &rel)
	if len(rel.Released) != 1 {
		t.Fatalf("first release: %+v", rel)
	}
	d.waitPooled(id)
	bootBefore := d.bootID(id)

	var sd stoppedScaleDownOut
	d.call(bundle.HandlerScaleDown, nil, &sd)
	if len(sd.Stopped) != 1 || sd.Stopped[0].InstanceID != id || len(sd.Terminated) != 0 || len(sd.Errors) != 0 {
		t.Fatalf("scale-down beyond the idle quota: %+v, want %s stopped", sd, id)
	}
	if st := d.ec2State(id); st != "stopped" && st != "stopping" {
		t.Fatalf("EC2 shows the stopped instance %q", st)
	}
	rec, err := d.store.Get(ctx, d.key(id))
	must(t, err)
	if rec.State != state.Stopped {
		t.Fatalf("record after the stop: %s", rec.State)
	}

	// While it sleeps the pool moves to a newer runner release: the
	// started instance must run its job on it, not on the install its
	// disk kept.
	next := "2.337.0"
	d.pool.Runner = d.servedRelease(next)
	must(t, d.store.PutPoolConfig(ctx, d.pool))

	start := time.Now()
	var out provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "after-stop", "pool": "linux", "instanceCount": 1}, &out)
	online := time.Since(start)
	if out.Started != 1 || out.Created != 0 || len(out.Instances) != 1 || out.Instances[0].InstanceID != id || out.Instances[0].Source != "started" {
		t.Fatalf("provision with a stopped instance and no warm one: %+v, want %s started", out, id)
	}
	t.Logf("stopped → runner online: %s", online.Round(10*time.Millisecond))
	if boot := d.bootID(id); boot == "" || boot == bootBefore {
		t.Fatalf("the started instance's agent runs under boot %q, before the stop %q: want a new boot", boot, bootBefore)
	}
	// Reused, verified clean: nothing of the run before the stop is left.
	job := d.job(out.Label, "test ! -e \"$HOME/left-before-the-stop\"")
	if job.Result != "succeeded" {
		t.Fatalf("job on the started instance (fails if the earlier run's file is still there): %+v", job)
	}
	if job.RunnerVersion != next {
		t.Fatalf("the started instance's job ran on runner %q, want the pool's release %s, published while it was stopped", job.RunnerVersion, next)
	}
	d.call(bundle.HandlerRelease, map[string]any{"runId": "after-stop"}, &rel)
	if len(rel.Released) != 1 {
		t.Fatalf("release of the started instance: %+v", rel)
	}
	d.waitPooled(id)

	d.call(bundle.HandlerScaleDown, nil, &sd)
	if len(sd.Stopped) != 1 || sd.Stopped[0].InstanceID != id {
		t.Fatalf("second scale-down: %+v, want %s stopped again", sd, id)
	}
	// Past its keep time: the record's lease, the control plane's clock.
	rec, err = d.store.Get(ctx, d.key(id))
	must(t, err)
	_, err = d.store.Expire(ctx, rec.Ref(), "test: past the keep time")
	must(t, err)
	d.call(bundle.HandlerScaleDown, nil, &sd)
	if len(sd.Terminated) != 1 || sd.Terminated[0].InstanceID != id {
		t.Fatalf("scale-down past the keep time: %+v, want %s terminated", sd, id)
	}
	waitFor(t, 30*time.Second, "the instance gone from EC2", func() bool { return d.ec2State(id) == "" || d.ec2State(id) == "shutting-down" })
}

// waitPooled waits for the instance's agent to say clean and refresh to
// pool it.
func (d *deployment) waitPooled(id string) {
	d.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		rec, err := d.store.Get(ctx, d.key(id))
		must(d.t, err)
		if rec.Pooled() {
			return
		}
		if rec.Clean() {
			var ref struct{}
			d.call(bundle.HandlerRefresh, nil, &ref)
		}
	}
	d.t.Fatalf("instance %s not pooled within 30 s", id)
}

// bootID is the boot the instance's agent runs under (the instance
// host's boot id file; "" before any stop).
func (d *deployment) bootID(id string) string {
	d.t.Helper()
	a := d.host.Agent(id)
	if a == nil {
		d.t.Fatalf("no agent for %s", id)
	}
	b, _ := os.ReadFile(filepath.Join(a.Dir, "boot_id"))
	return string(b)
}

// servedRelease serves the fake runner packed as version at the fake
// github.com's release download and returns the pool's runner spec for it.
func (d *deployment) servedRelease(version string) state.RunnerSpec {
	d.t.Helper()
	tarball, err := fakegithub.RunnerTarballOf(builds.runner, version)
	must(d.t, err)
	d.fake.ServeRunnerRelease(version, tarball)
	gh, err := github.New(github.Config{BaseURL: d.fake.URL(), AppID: d.fake.AppID, PrivateKeyPEM: d.fake.PrivateKeyPEM})
	must(d.t, err)
	sum := sha256.Sum256(tarball)
	return state.RunnerSpec{Version: version, Arch: runtime.GOARCH, TarballSHA256: hex.EncodeToString(sum[:]),
		TarballURL: runnerrelease.URLAt(gh.RunnerURL("actions/runner"), version, runtime.GOARCH)}
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if ok() {
			return
		}
	}
	t.Fatalf("%s: not within %s", what, within)
}

// TestAStoppedInstanceEC2CannotStartIsTerminatedAndALaunchTakesItsPlace:
// EC2 has no capacity of the stopped instance's type left in its zone
// (the capacity model answers its StartInstances with
// InsufficientInstanceCapacity); the provision terminates it, says so in
// its output and launches an instance of the pool's other type instead.
func TestAStoppedInstanceEC2CannotStartIsTerminatedAndALaunchTakesItsPlace(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) {
		p.Timings.MinRunningTime = 1
		p.Stopped = &state.StoppedTier{Max: 1, KeepSeconds: 600}
	})
	d.seedPool(1)
	stopped := d.live()[0]
	var sd stoppedScaleDownOut
	d.call(bundle.HandlerScaleDown, nil, &sd)
	if len(sd.Stopped) != 1 {
		t.Fatalf("scale-down: %+v, want the idle instance stopped", sd)
	}

	model := ec2capacity.New(d.aws.EC2())
	other := map[string]string{"c7i.large": "m7i.large", "m7i.large": "c7i.large"}[stopped.InstanceType]
	model.SetAvailable(stopped.InstanceType, "us-east-1a", 0)
	model.SetAvailable(other, "us-east-1a", 5)
	target, _ := url.Parse(env.URL)
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host }}
	front := httptest.NewServer(model.StartFront(model.Front(proxy)))
	t.Cleanup(front.Close)
	spec := d.fnSpec(bundle.HandlerProvision)
	spec.Env = maps.Clone(spec.Env)
	spec.Env["AWS_ENDPOINT_URL"] = front.URL
	host, err := lambdart.New(spec)
	must(t, err)
	t.Cleanup(host.Close)
	d.fns[bundle.HandlerProvision] = host

	var out provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "no-capacity", "pool": "linux", "instanceCount": 1}, &out)
	if out.Started != 0 || out.Created != 1 || len(out.StartsFailed) != 1 || !strings.Contains(out.StartsFailed[0], "InsufficientInstanceCapacity") {
		t.Fatalf("provision when EC2 cannot start the stopped instance: %+v, want it terminated and one launched", out)
	}
	if out.Instances[0].InstanceID == stopped.ID || out.Instances[0].InstanceType != other {
		t.Fatalf("the run got %+v, want a new %s", out.Instances[0], other)
	}
	rec, err := d.store.Get(ctx, d.key(stopped.ID))
	must(t, err)
	if rec.State != state.Terminated {
		t.Fatalf("the stopped instance EC2 could not start: record %s, want terminated", rec.State)
	}
	if st := d.ec2State(stopped.ID); st != "" && st != "shutting-down" {
		t.Fatalf("the stopped instance EC2 could not start is %q in EC2, want terminated", st)
	}
	if job := d.job(out.Label, "echo ok"); job.Result != "succeeded" {
		t.Fatalf("job on the launched instance: %+v", job)
	}
}

// refusingStop is the deployment's fleet whose stops EC2 refuses, as it
// refuses to stop a spot instance of a one-time request.
type refusingStop struct{ *fleet.Fleet }

func (refusingStop) Stop(context.Context, string) error {
	return &smithy.GenericAPIError{Code: "UnsupportedOperation", Message: "You can't stop the Spot Instance because it is associated with a one-time Spot Instance request."}
}

// TestAnIdleInstanceEC2WillNotStopIsRetiredInstead: scale-down writes the
// record stopped, EC2 refuses the stop; the instance is retired (record
// terminated, EC2 terminated), never left recorded stopped while it runs.
func TestAnIdleInstanceEC2WillNotStopIsRetiredInstead(t *testing.T) {
	t.Parallel()
	d := scaleDownDeploy(t, 0, func(p *state.PoolConfig) { p.Stopped = &state.StoppedTier{Max: 2, KeepSeconds: 600} })
	id := d.launchN(1, "acme")[0]
	d.pooledIdle(id, "acme", 1, nil)
	time.Sleep(1100 * time.Millisecond) // past the minimum running time
	deps := &controlplane.Deps{Store: d.store, SQS: d.aws.SQS(), GitHub: d.gitHub(), Log: slog.New(slog.NewJSONHandler(d.logs, nil))}
	out, err := scaledown.Handle(ctx, scaledown.Deps{Deps: deps, EC2: refusingStop{d.fleet}}, nil)
	must(t, err)
	if len(out.Terminated) != 1 || out.Terminated[0].InstanceID != id || !strings.Contains(out.Terminated[0].Reason, "retired instead") || len(out.Stopped) != 0 {
		t.Fatalf("scale-down when EC2 refuses the stop: %+v, want %s retired", out, id)
	}
	rec, err := d.store.Get(ctx, d.key(id))
	must(t, err)
	if rec.State != state.Terminated {
		t.Fatalf("record %s, want terminated", rec.State)
	}
	waitFor(t, 10*time.Second, "the instance terminated in EC2", func() bool { st := d.ec2State(id); return st == "" || st == "shutting-down" })
}
