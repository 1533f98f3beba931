package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TestRunIsolationOnAPooledInstance (docs/security.md): the runner of one
// run has the runId as its only label, so a job of another run never reaches
// it; between runs the runner is deregistered, the work folder wiped and the
// remove token dropped from the record; the agent logs no GitHub credential.
func TestRunIsolationOnAPooledInstance(t *testing.T) {
	w := newWorld(t, "")
	inst := w.create("run-a", "on-demand")
	w.start()

	got := w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
	secrets := w.fake.Secrets()
	if rs := w.fake.Runners(); len(rs) != 1 || !slices.Equal(rs[0].Labels, []string{"run-a"}) {
		t.Fatalf("runners %+v, want one labelled run-a only", rs)
	}
	running, err := w.store.MarkRunning(ctx, got.Ref(), time.Hour, time.Hour)
	must(t, err)
	other := w.fake.EnqueueJob("run-b", "echo run-b must wait for its own runner")
	if job := w.job("run-a", "echo from-a > ../../leftover-a; echo ok"); job.ExitCode != 0 {
		t.Fatalf("job of run-a: %+v", job)
	}
	if j, _ := w.fake.Job(other); j.State != "queued" {
		t.Fatalf("a job of run-b ran on run-a's runner: %+v", j)
	}

	idle, err := w.store.Release(ctx, running.Ref(), "run-a", 15*time.Minute, w.removal())
	must(t, err)
	clean := w.wait(idle, state.SignalRemoveRegOK, state.SignalRemoveRegFailed)
	secrets = append(secrets, w.fake.Secrets()...)
	if len(w.fake.Runners()) != 0 {
		t.Fatalf("runner still registered after release: %+v", w.fake.Runners())
	}
	if entries, _ := os.ReadDir(filepath.Join(w.dir, "work")); len(entries) != 0 {
		t.Fatalf("work folder not wiped: %v", entries)
	}
	if clean.Registration != nil {
		t.Fatalf("remove token kept in the pooled record: %v", clean.Registration)
	}

	claimed, err := w.store.Claim(ctx, idle.Key, state.ClaimRequest{RunID: "run-b", Pool: "linux", Owner: "acme", ClaimTTL: 5 * time.Minute, Registration: w.registration()})
	must(t, err)
	w.wait(claimed, state.SignalRegOK, state.SignalRegFailed)
	secrets = append(secrets, w.fake.Secrets()...)
	if rs := w.fake.Runners(); len(rs) != 1 || !slices.Equal(rs[0].Labels, []string{"run-b"}) {
		t.Fatalf("runners %+v, want one labelled run-b only", rs)
	}
	j, err := w.fake.WaitJob(other, 20*time.Second)
	must(t, err)
	if j.ExitCode != 0 {
		t.Fatalf("run-b's job: %+v", j)
	}
	if job := w.job("run-b", "test ! -e ../../leftover-a || { echo run-a left files; exit 3; }"); job.ExitCode != 0 {
		t.Fatalf("run-b sees run-a's files: %s", job.Output)
	}

	logs := w.logs.String()
	if !strings.Contains(logs, "runner registered") {
		t.Fatalf("no agent log to check:\n%s", logs)
	}
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("a GitHub credential (%.8s…) is in the agent's log", s)
		}
	}
}

// The registration material names the runner's label and group: the agent
// registers with exactly that label (not the run id) in that group.
func TestTheRunnerTakesTheLabelAndGroupOfItsRegistration(t *testing.T) {
	w := newWorld(t, "")
	w.fake.AddRunnerGroup("acme", "ci")
	reg := w.registration()
	reg.Labels, reg.Group = "ghr-run-a-abcdefghijklmnop", "ci"
	inst, err := w.store.Create(ctx, state.NewInstance{ID: w.id, RoleID: testRoleID, Pool: "linux", Owner: "acme", RunID: "run-a", Assignment: state.NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute, Registration: reg})
	must(t, err)
	w.start()
	w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
	if rs := w.fake.Runners(); len(rs) != 1 || !slices.Equal(rs[0].Labels, []string{reg.Labels}) || rs[0].Group != "ci" {
		t.Fatalf("runners %+v, want one labelled %s only, in group ci", rs, reg.Labels)
	}
	guessed := w.fake.EnqueueJob("run-a", "echo aimed at the run id")
	if job := w.job(reg.Labels, "echo ok"); job.ExitCode != 0 {
		t.Fatalf("job: %+v", job)
	}
	if j, _ := w.fake.Job(guessed); j.State != "queued" {
		t.Fatalf("a job aimed at the run id ran: %+v", j)
	}
}

// When user data could not block the runner user's traffic to IMDS (issue
// 16: an image with neither iptables nor nft, nftables not installable), the
// agent says so with UD_FAILED and the reason, and never registers a
// runner: provision replaces the instance at once instead of handing jobs
// the instance role.
func TestAnInstanceThatCannotBlockIMDSSignalsFailedAndRunsNoJob(t *testing.T) {
	w := newWorld(t, "")
	must(t, os.WriteFile(filepath.Join(w.dir, "firewall-failed"), []byte("neither iptables nor nft is available\n"), 0o644))
	inst := w.create("run-a", "on-demand")
	w.start()
	got := w.wait(inst, state.SignalFailed, state.SignalOK)
	sig, failed := got.SignalFor(state.SignalFailed)
	if !failed || !strings.Contains(sig.Detail, "neither iptables nor nft is available") {
		t.Fatalf("signals %v, want UD_FAILED with the firewall's reason", got.Signals)
	}
	time.Sleep(2 * time.Second)
	if rs := w.fake.Runners(); len(rs) != 0 {
		t.Fatalf("a runner was registered on an instance whose jobs could reach IMDS: %+v", rs)
	}
	if rec, _ := w.store.Get(ctx, w.key); answered(rec, state.SignalRegOK) {
		t.Fatalf("UD_REG_OK on an instance whose jobs could reach IMDS: %v", rec.Signals)
	}
}

// The firewall rule is what keeps jobs from the instance role, and user
// data's report of it is not enough: a firewall service that reloads its
// rules drops it silently. The agent tries, as the runner user, to reach
// the metadata service before the first registration and before every
// return to the pool; reaching it fails the instance.
func TestARunnerUserThatReachesIMDSGetsNoJob(t *testing.T) {
	t.Run("at boot", func(t *testing.T) {
		w := newWorld(t, "")
		w.jobUser()
		w.unblock() // the rule is gone before the agent starts
		inst := w.create("run-a", "on-demand")
		w.start()
		got := w.wait(inst, state.SignalFailed, state.SignalOK)
		if sig, failed := got.SignalFor(state.SignalFailed); !failed || !strings.Contains(sig.Detail, "reaches the instance metadata service") {
			t.Fatalf("signals %v, want UD_FAILED saying the runner user reaches IMDS", got.Signals)
		}
		if rs := w.fake.Runners(); len(rs) != 0 {
			t.Fatalf("a runner was registered for a user that reaches IMDS: %+v", rs)
		}
	})
	t.Run("after a run", func(t *testing.T) {
		w := newWorld(t, "")
		w.jobUser()
		inst := w.create("run-a", "on-demand")
		w.start()
		running := w.markRunning(inst)
		w.unblock() // flushed while the run went on
		idle, err := w.store.Release(ctx, running.Ref(), "run-a", 15*time.Minute, w.removal())
		must(t, err)
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		clean, err := w.store.WaitSignal(c, idle.Key, idle.Assignment, state.SignalRemoveRegFailed, state.SignalRemoveRegOK, 100*time.Millisecond)
		must(t, err)
		if sig, failed := clean.SignalFor(state.SignalRemoveRegFailed); !failed || !strings.Contains(sig.Detail, "reaches the instance metadata service") {
			t.Fatalf("signals %v, want UD_REMOVE_REG_FAILED saying the runner user reaches IMDS (never pooled)", clean.Signals)
		}
	})
}

// .runner belongs to the job user. A job that points it at another runner of
// the owner (ids are sequential) must not get that runner deleted by the
// owner-wide remove token at its deregistration: the agent removes only the
// runner it noted at registration, and otherwise leaves the instance
// unpooled for the control plane to clean up by id.
func TestAJobCannotAimTheDeregistrationAtAnotherRunner(t *testing.T) {
	w := newWorld(t, "")
	decoy := w.fake.AddRunner("acme", "ghr-1-i-someoneelse", false, "run-b")
	inst := w.create("run-a", "on-demand")
	w.start()
	running := w.markRunning(inst)
	if job := w.job("run-a", fmt.Sprintf(`sed -i 's/"agentId": *[0-9]*/"agentId": %d/' ../../../run/.runner; grep agentId ../../../run/.runner`, decoy)); job.ExitCode != 0 || !strings.Contains(job.Output, fmt.Sprint(decoy)) {
		t.Fatalf("the job did not rewrite .runner: %+v", job)
	}
	idle, err := w.store.Release(ctx, running.Ref(), "run-a", 15*time.Minute, w.removal())
	must(t, err)
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	clean, err := w.store.WaitSignal(c, idle.Key, idle.Assignment, state.SignalRemoveRegFailed, state.SignalRemoveRegOK, 100*time.Millisecond)
	if _, ok := w.fake.Runner(decoy); !ok {
		t.Fatal("the runner the job pointed .runner at was deleted")
	}
	if err != nil {
		t.Fatalf("want UD_REMOVE_REG_FAILED: %v", err)
	}
	if sig, _ := clean.SignalFor(state.SignalRemoveRegFailed); !strings.Contains(sig.Detail, fmt.Sprintf("names runner %d", decoy)) {
		t.Fatalf("signals %v: want UD_REMOVE_REG_FAILED naming the forged runner id", clean.Signals)
	}
}
