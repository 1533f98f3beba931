package state

import (
	"testing"
)

// A started just-in-time runner is recorded, its used configuration
// dropped and the assignment answered by one write; a repeat of that write
// (its answer lost) is no error; a write for another assignment changes
// nothing.
func TestTheRunnerAndItsAnswerAreWrittenTogether(t *testing.T) {
	s, _ := newStore(t)
	c := created(t, s, "i-jitok", "r1")
	c, err := s.PutJIT(ctx, c.Key, c.Assignment, Registration{Purpose: PurposeJIT, JITConfig: "cfg", Seq: 1, RunnerID: 9, RunnerName: "ghr-1-1-i-jitok"})
	must(t, err)
	if c.Registration == nil {
		t.Fatal("no configuration to drop")
	}
	wantClause(t, s.SetRunnerAndSignal(ctx, c.Key, "another", 9, "ghr-1-1-i-jitok", SignalRegOK, "ghr-1-1-i-jitok"), ClauseAssignment)
	if got, _ := s.Get(ctx, c.Key); got.GithubRunnerID != 0 || got.Registration == nil {
		t.Fatalf("a refused write changed the record: %+v", got)
	}
	for range 2 {
		must(t, s.SetRunnerAndSignal(ctx, c.Key, c.Assignment, 9, "ghr-1-1-i-jitok", SignalRegOK, "ghr-1-1-i-jitok"))
	}
	got, err := s.Get(ctx, c.Key)
	must(t, err)
	sig, ok := got.SignalFor(SignalRegOK)
	if !ok || sig.Detail != "ghr-1-1-i-jitok" || got.GithubRunnerID != 9 || got.RunnerName != "ghr-1-1-i-jitok" || got.Registration != nil {
		t.Fatalf("record %+v, signal %+v %v: want runner 9 recorded, its configuration dropped, UD_REG_OK for the assignment", got, sig, ok)
	}
	if err := s.SetRunnerAndSignal(ctx, c.Key, c.Assignment, 9, "n", "UD_MADE_UP", ""); err == nil {
		t.Fatal("unknown signal accepted")
	}
}
