package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// On EC2's rebalance recommendation the agent says UD_REBALANCE on its
// record and keeps its runner: the job it may be running is not killed,
// the control plane only claims the instance no more.
func TestARebalanceRecommendationIsSaidAndTheRunnerKeepsRunning(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w := newWorld(t, "")
	inst := w.create("run-rebalance", "spot")
	w.start()
	w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
	pid := w.runnerPID()
	notice := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	w.imds.RecommendRebalance(notice)
	got := w.wait(inst, state.SignalRebalance, "")
	if sig := got.Signals[state.SignalRebalance]; sig.Detail != "noticeTime "+notice.Format(time.RFC3339) {
		t.Fatalf("rebalance signal %+v does not carry EC2's noticeTime %s", sig, notice)
	}
	time.Sleep(6 * time.Second) // one more turn of the spot watch
	if syscall.Kill(pid, 0) != nil {
		t.Fatalf("runner (pid %d) stopped on a rebalance recommendation\n%s", pid, w.logs.String())
	}
}
