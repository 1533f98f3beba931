package main

import (
	"crypto/sha256"
	"encoding/hex"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// The runner release through the real agent loop (agent/lifecycle/upgrade.go):
// the control plane points the record at a release; the agent brings its
// install there between assignments, never during one.

// newRelease serves the fake runner packed as version at the fake
// github.com's release download and returns the target the control plane
// would write for it. It is served, not published as the latest release: a
// just-in-time runner behind the latest would be sent an update message,
// and what is shown here is the install the agent starts runners from.
func (w *world) newRelease(version string) runnerrelease.Target {
	w.t.Helper()
	bin, err := fakegithub.BuildRunner()
	must(w.t, err)
	tarball, err := fakegithub.RunnerTarballOf(bin, version)
	must(w.t, err)
	w.fake.ServeRunnerRelease(version, tarball)
	sum := sha256.Sum256(tarball)
	return runnerrelease.Target{Version: version, URL: runnerrelease.URLAt(w.gh.RunnerURL("actions/runner"), version, runtime.GOARCH), SHA256: hex.EncodeToString(sum[:])}
}

// reports waits until the record's runnerVersion is version.
func (w *world) reports(version string, within time.Duration) *state.Instance {
	w.t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		rec, err := w.store.Get(ctx, w.key)
		must(w.t, err)
		if rec.RunnerVersion == version {
			return rec
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the record reports runner %q after %s, want %q\nagent log:\n%s", rec.RunnerVersion, within, version, w.logs.String())
		}
	}
}

// TestAnIdleAgentInstallsItsNewRunnerTargetAndRunsItsNextAssignmentOnIt: a
// just-in-time run's jobs run on the installed release even after the
// record's target moved mid-run (each job's runner starts from a fresh copy
// of the install, so a swap between them would show); once released, the
// idle agent stages the target, swaps it in, reports it, and the next run's
// job runs on it. Shown to fail with the control disabled (upgradeIdle also
// called in reconcile's just-in-time supervising pass, and its
// a.local.registered() guard removed): "the install says "2.337.0" during
// the run, want 2.336.0".
func TestAnIdleAgentInstallsItsNewRunnerTargetAndRunsItsNextAssignmentOnIt(t *testing.T) {
	w, d, inst := jitWorld(t)
	w.start()
	w.markRunning(inst)
	old, next := runnerrelease.Default, "2.337.0"
	w.reports(old, 30*time.Second)
	if job := w.job("ghr-run-a-jit", "echo first"); job.ExitCode != 0 || job.RunnerVersion != old {
		t.Fatalf("job 1 of run-a: exit %d on runner %q, want %s", job.ExitCode, job.RunnerVersion, old)
	}

	// The control plane moves the pool to a new release mid-run.
	target := w.newRelease(next)
	_, err := w.store.SetRunnerTarget(ctx, w.key, "linux", target)
	must(t, err)
	waitLog(t, w, "next just-in-time runner started", 60*time.Second)
	time.Sleep(2 * time.Second) // several assigned passes read the new target
	if job := w.job("ghr-run-a-jit", "echo second"); job.ExitCode != 0 || job.RunnerVersion != old {
		t.Fatalf("job 2 of run-a ran on runner %q after the target moved mid-run, want %s (exit %d)", job.RunnerVersion, old, job.ExitCode)
	}
	if v := runner.Version(ctx, w.dir+"/runner"); v != old {
		t.Fatalf("the install says %q during the run, want %s", v, old)
	}
	if n := w.fake.Count(fakegithub.CountReleaseDownload); n != 0 {
		t.Fatalf("%d downloads of the release while assigned: staging shares the instance with the run's jobs", n)
	}

	// Released: idle, the agent stages, swaps and reports the target.
	rec, err := w.store.Get(ctx, w.key)
	must(t, err)
	idle, err := w.store.Release(ctx, rec.Ref(), "run-a", 15*time.Minute, nil)
	must(t, err)
	w.wait(idle, state.SignalRemoveRegOK, state.SignalRemoveRegFailed)
	w.reports(next, 30*time.Second)
	if v := runner.Version(ctx, w.dir+"/runner"); v != next {
		t.Fatalf("the install says %q once idle, want %s", v, next)
	}
	if n := w.fake.Count(fakegithub.CountReleaseDownload); n != 1 {
		t.Fatalf("%d downloads of the release, want 1", n)
	}
	if !strings.Contains(w.logs.String(), "runner release installed") {
		t.Fatalf("the agent did not say it installed the release:\n%s", w.logs.String())
	}

	// The next run claims the instance; its job runs on the new release.
	_, _, err = w.store.StartRun(ctx, state.Run{ID: "run-b", Pool: "linux", Owner: "acme", InstanceCount: 1, Request: "{}", Label: "ghr-run-b-jit"})
	must(t, err)
	claimed, err := w.store.Claim(ctx, idle.Key, state.ClaimRequest{RunID: "run-b", Pool: "linux", Owner: "acme", ClaimTTL: 5 * time.Minute})
	must(t, err)
	_, err = w.store.AddRunInstances(ctx, "run-b", claimed.ID)
	must(t, err)
	claimed, err = d.MintJIT(ctx, claimed, 1, "ghr-run-b-jit", 1)
	must(t, err)
	w.markRunning(claimed)
	if job := w.job("ghr-run-b-jit", "echo on the new release"); job.ExitCode != 0 || job.RunnerVersion != next {
		t.Fatalf("run-b's job: exit %d on runner %q, want %s", job.ExitCode, job.RunnerVersion, next)
	}
	if n := w.fake.Count(fakegithub.CountUpdateMessages); n != 0 {
		t.Fatalf("%d update messages sent to the instance's runners", n)
	}
}
