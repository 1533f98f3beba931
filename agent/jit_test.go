package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/streampoll"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/jitstream"
)

// jitWorld is a world whose table has a stream, read by the real stream
// consumer as Lambda would, with a pool and a run as provision leaves
// them; the instance's record gets its first just-in-time configuration
// from the control plane's MintJIT, as provision gives it.
func jitWorld(t testing.TB) (*world, *controlplane.Deps, *state.Instance) {
	return jitWorldWith(t, controlplane.JITLimits{})
}

// jitWorldWith is jitWorld whose stream consumer bounds requests with
// limits (zero: the defaults).
func jitWorldWith(t testing.TB, limits controlplane.JITLimits) (*world, *controlplane.Deps, *state.Instance) {
	w := newWorld(t, "")
	w.store = statetest.NewStore(t, env, state.TableOptions{Stream: true})
	w.configure(func(c *config.Config) { c.Table = w.store.Table() })
	d := &controlplane.Deps{Store: w.store, GitHub: w.gh, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	must(t, w.store.PutPoolConfig(ctx, state.PoolConfig{Name: "linux", Owner: "acme", QueueURL: "https://sqs/q", LaunchTemplateID: "lt-1",
		LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand", MaxInstances: 5,
		InstanceRoleID: testRoleID}))
	_, _, err := w.store.StartRun(ctx, state.Run{ID: "run-a", Pool: "linux", Owner: "acme", InstanceCount: 1, Request: "{}", Label: "ghr-run-a-jit"})
	must(t, err)
	inst, err := w.store.Create(ctx, state.NewInstance{ID: w.id, RoleID: testRoleID, Pool: "linux", Owner: "acme", RunID: "run-a", Assignment: state.NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute})
	must(t, err)
	// As provision does: the run lists its instances (the consumer mints
	// only for an instance its run lists).
	_, err = w.store.AddRunInstances(ctx, "run-a", inst.ID)
	must(t, err)
	poll, err := streampoll.New(ctx, env.Config(t).DynamoDB(), env.URL, awstest.Region, w.store.Table())
	must(t, err)
	c, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for c.Err() == nil {
			batches, err := poll.Poll(c)
			for _, b := range batches {
				if out, herr := jitstream.Handle(c, jitstream.Deps{Deps: d, Limits: limits}, b.Event); herr == nil && len(out.BatchItemFailures) > 0 {
					poll.Retry(c, b.Shard, out.BatchItemFailures[0].ItemIdentifier)
				}
			}
			if err != nil || len(batches) == 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	inst, err = d.MintJIT(ctx, inst, 1, "ghr-run-a-jit", 1)
	must(t, err)
	return w, d, inst
}

// TestAJITRunTakesEachJobOnAFreshSingleJobRunner: in a just-in-time pool
// no token reaches the instance; the run's jobs each go to a runner that
// takes that one job, the agent asking for the next through its record and
// the stream consumer answering, until release.
func TestAJITRunTakesEachJobOnAFreshSingleJobRunner(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w, _, inst := jitWorld(t)
	w.jobUser()
	w.start()
	got := w.markRunning(inst)

	seen := map[string]bool{}
	for n := 1; n <= 3; n++ {
		job := w.job("ghr-run-a-jit", fmt.Sprintf("echo job %d; test -z \"$ACTIONS_RUNNER_INPUT_JITCONFIG\"", n))
		if job.ExitCode != 0 {
			t.Fatalf("job %d (exit %d), the configuration reached the job's environment?\n%s", n, job.ExitCode, job.Output)
		}
		if want := state.JITRunnerName(got.Uses, n, w.id); job.Runner != want || seen[job.Runner] {
			t.Fatalf("job %d ran on %q, want a fresh runner %q", n, job.Runner, want)
		}
		seen[job.Runner] = true
	}
	for _, h := range w.fake.History() {
		if !strings.HasPrefix(h.Name, "ghr-1-") {
			t.Errorf("a runner not made just in time: %+v", h)
		}
	}
	if n := w.fake.Count("POST /orgs/{org}/actions/runners/registration-token"); n != 0 {
		t.Errorf("%d registration tokens asked for in a just-in-time run", n)
	}
	rec, err := w.store.Get(ctx, w.key)
	must(t, err)
	if rec.Registration != nil && rec.Registration.Token != "" {
		t.Fatalf("a token in the record: %v", rec.Registration)
	}

	rec, err = w.store.Get(ctx, w.key) // the agent may have asked for one more
	must(t, err)
	idle, err := w.store.Release(ctx, rec.Ref(), "run-a", 15*time.Minute, nil)
	must(t, err)
	clean := w.wait(idle, state.SignalRemoveRegOK, state.SignalRemoveRegFailed)
	if sig, ok := clean.SignalFor(state.SignalRemoveRegOK); !ok {
		t.Fatalf("after release: %v %v", clean.Signals, sig)
	}
	for _, rn := range w.fake.Runners() {
		if rn.Online {
			t.Errorf("runner %s still listening after release", rn.Name)
		}
	}
}

// TestAJITJobOfARunReachesNothingOfTheNextJobOfTheSameRun (issue 29 item
// 4): the next job of a run may be one behind an environment approval,
// and the jobs before it untrusted. Between the jobs of a just-in-time
// assignment the agent cleans up as between assignments: the first job's
// hostile tricks (testdata/hostile-run-a.sh) leave nothing the second
// (testdata/hostile-run-b.sh) finds, and nothing of the first saw the
// second's workspace. Shown to fail with cleanBetweenJobs disabled: "run
// B found run A's leftovers: LEFT process ...: ghr-daemon-..." and "run
// A's spy saw the next job's workspace".
func TestAJITJobOfARunReachesNothingOfTheNextJobOfTheSameRun(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w, _, inst := jitWorld(t)
	u, err := user.Lookup(w.jobUser())
	must(t, err)
	w.start()
	w.markRunning(inst)
	vars := w.hostileVars(u.Uid)
	checkHostileA(t, w.job("ghr-run-a-jit", w.hostileScript("hostile-run-a.sh", vars)), vars["D"])
	waitLog(t, w, "next just-in-time runner started", 60*time.Second)
	clearAlive(t, vars["D"])
	if b := w.job("ghr-run-a-jit", w.hostileScript("hostile-run-b.sh", vars)); b.ExitCode != 0 {
		t.Fatalf("run B found run A's leftovers:\n%s", b.Output)
	}
	checkSpied(t, vars["D"], map[string]string{"the next job's workspace": "run-b-marker-" + vars["TAG"]})
}

// waitLog waits until the agent's log holds text.
func waitLog(t *testing.T, w *world, text string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); !strings.Contains(w.logs.String(), text); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent never logged %q:\n%s", text, w.logs.String())
		}
	}
}

// TestAJITAgentStartsTheNextRunnerWithoutWaitingForItsPoll: with an
// assigned poll of a minute, the next job still finds a runner within the
// job helper's 20 s: the agent wakes when the runner exits, asks at once
// and reads the record often while the answer is due.
func TestAJITAgentStartsTheNextRunnerWithoutWaitingForItsPoll(t *testing.T) {
	w, _, inst := jitWorld(t)
	w.configure(func(c *config.Config) { c.AssignedPoll = config.Duration{Duration: time.Minute} })
	w.start()
	w.markRunning(inst)
	first := w.job("ghr-run-a-jit", "echo one")
	second := w.job("ghr-run-a-jit", "echo two")
	if first.Runner == second.Runner || second.ExitCode != 0 {
		t.Fatalf("jobs on %s and %s (exit %d)", first.Runner, second.Runner, second.ExitCode)
	}
	t.Logf("job done → next job started: %v", second.Started.Sub(first.Finished))
}
