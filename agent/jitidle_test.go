package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// idleRemoved counts the world's runners GitHub removed while they waited
// for a job.
func idleRemoved(w *world) int {
	n := 0
	for _, h := range w.fake.History() {
		if h.EndedBy == "jit-idle" {
			n++
		}
	}
	return n
}

// Issue 37 item 7: GitHub removes a just-in-time runner whose listener
// took no job within a few minutes (actions/runner issue #4726; the fake
// here after 2 s). A run's later job behind an environment approval waits
// through several such removals, more than the three runners in a row the
// agent lets end without a job; each removed runner is replaced and not
// counted, so the job still runs on the pool once approved, and the
// stream consumer's cap (controlplane/jitcap.go) lets the replacements
// through too, one per removal. Shown to fail with the agent counting such exits as ended
// without a job (runner.RemovedByGitHub ignored in judgeJITExit): "UD_FAILED
// after 3 runners were removed while idle: the just-in-time runner exited
// 3 times without taking a job: ... The runner no longer exists on the
// server."
func TestALaterJobBehindAnApprovalStillRunsAfterGitHubRemovesIdleRunners(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	// The consumer's IdleMin under the fake's idle limit, as the default
	// (90 s) is under GitHub's reported 2 minutes: each removed runner is
	// then one that may have been removed idle, and lets one more through.
	limits := controlplane.DefaultJITLimits
	limits.IdleMin = time.Second
	w, _, inst := jitWorldWith(t, limits)
	w.fake.SetJITIdleAfter(2 * time.Second)
	w.configure(func(c *config.Config) { c.JITRemovedMin = config.Duration{Duration: time.Second} })
	upstream := w.fake.EnqueueJob("ghr-run-a-jit", "echo upstream")
	w.start()
	w.markRunning(inst)
	if job, err := w.fake.WaitJob(upstream, 60*time.Second); err != nil || job.ExitCode != 0 {
		t.Fatalf("upstream job: %+v %v\n%s", job, err, w.logs.String())
	}

	// The approval comes after five idle removals: at least five of the
	// fake's idle periods, however fast the agent replaces runners.
	const removals = 5
	deadline := time.Now().Add(3 * time.Minute)
	for idleRemoved(w) < removals {
		rec, err := w.store.Get(ctx, w.key)
		must(t, err)
		if sig, failed := rec.SignalFor(state.SignalFailed); failed {
			t.Fatalf("UD_FAILED after %d runners were removed while idle: %s", idleRemoved(w), sig.Detail)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runners removed while idle within 3 minutes, want %d: no runner waiting for the job?\n%s", idleRemoved(w), removals, w.logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	approved := w.job("ghr-run-a-jit", "echo approved")
	if approved.ExitCode != 0 || !strings.Contains(approved.Output, "approved") {
		t.Fatalf("the approved job: %+v", approved)
	}
	rec, err := w.store.Get(ctx, w.key)
	must(t, err)
	if sig, failed := rec.SignalFor(state.SignalFailed); failed {
		t.Fatalf("UD_FAILED: %s", sig.Detail)
	}
	if !strings.HasPrefix(approved.Runner, "ghr-") || rec.JITSeq < removals+2 {
		t.Fatalf("the approved job ran on %q, the record at configuration %d: want a runner after the upstream one and the %d removed", approved.Runner, rec.JITSeq, removals)
	}
	// The consumer looked past its cap and found the removed runners gone:
	// each let the next through, so they did not use the cap up.
	if rec.JITServed < 3 {
		t.Fatalf("the control plane credited runners up to %d of %d: did the replacements pass its cap?", rec.JITServed, rec.JITSeq)
	}
	if !strings.Contains(w.logs.String(), "removed by GitHub while it waited for a job") {
		t.Fatalf("the agent did not say why it replaced the runners:\n%s", w.logs.String())
	}
	// Bounded: one runner per removal, not a loop (upstream, the removed,
	// the one that took the approved job, perhaps the next one asked for).
	if n := jitRunners(w); n > idleRemoved(w)+3 {
		t.Fatalf("%d runners minted for %d removals and two jobs", n, idleRemoved(w))
	}
}

// A runner removed sooner than GitHub removes an idle one (JITRemovedMin,
// 1 minute by default; the fake here removes them after 2 s, as a script
// deleting every runner would) is not GitHub's idle removal: it counts as
// ended without a job, so such a setup ends the assignment after three
// (UD_FAILED) instead of having a runner minted every few seconds until
// the lease's runtime cap. Shown to fail with every removal taken for
// GitHub's idle one: "UD_FAILED never came (...): 14 runners minted, 13
// removed" within the minute.
func TestRunnersRemovedSoonerThanGitHubsIdleLimitStillEndTheAssignment(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w, _, inst := jitWorld(t)
	w.fake.SetJITIdleAfter(2 * time.Second)
	w.start()
	w.markRunning(inst)
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	got, err := w.store.WaitSignal(c, inst.Key, inst.Assignment, state.SignalFailed, "", 200*time.Millisecond)
	if err != nil {
		t.Fatalf("UD_FAILED never came (%v): %d runners minted, %d removed\n%s", err, jitRunners(w), idleRemoved(w), w.logs.String())
	}
	sig, _ := got.SignalFor(state.SignalFailed)
	if !strings.Contains(sig.Detail, "the just-in-time runner exited 3 times without taking a job") || !strings.Contains(sig.Detail, "The runner no longer exists on the server.") {
		t.Fatalf("UD_FAILED %q, want the count and the runner's own words", sig.Detail)
	}
	time.Sleep(5 * time.Second)
	if n := jitRunners(w); n != 3 {
		t.Fatalf("%d runners minted, want 3", n)
	}
}
