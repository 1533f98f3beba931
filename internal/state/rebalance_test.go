package state

import (
	"testing"
	"time"
)

// An idle instance whose agent said EC2 recommends rebalancing it is never
// claimed: the claim is refused on the rebalance clause and the record stays
// idle under its assignment.
func TestAnIdleInstanceWhoseAgentSaidRebalanceIsNotClaimed(t *testing.T) {
	s, _ := newStore(t)
	inst := pooled(t, s, "i-0rebalidle")
	must(t, s.PutSignal(ctx, inst.Key, inst.Assignment, SignalRebalance, "noticeTime 2026-11-28T22:00:00Z"))
	_, err := s.Claim(ctx, inst.Key, claimReq("run-1"))
	wantClause(t, err, ClauseRebalance)
	got, err := s.Get(ctx, inst.Key)
	must(t, err)
	if got.State != Idle || got.Assignment != inst.Assignment || got.RunID != "" {
		t.Fatalf("a refused claim changed the record: %+v", got)
	}
}

// The recommendation is the instance's, not its run's: one said while the
// instance ran a job still keeps it from the next claim after its release.
func TestARebalanceSaidWhileRunningKeepsTheInstanceFromTheNextClaim(t *testing.T) {
	s, _ := newStore(t)
	inst := running(t, s, "i-0rebalrun", "run-a")
	must(t, s.PutSignal(ctx, inst.Key, inst.Assignment, SignalRebalance, "noticeTime 2026-11-28T22:00:00Z"))
	idle, err := s.Release(ctx, inst.Ref(), inst.RunID, 15*time.Minute, nil)
	must(t, err)
	must(t, s.PutSignal(ctx, idle.Key, idle.Assignment, SignalRemoveRegOK, ""))
	if !idle.HasRebalance() {
		t.Fatal("release dropped the rebalance signal")
	}
	_, err = s.Claim(ctx, idle.Key, claimReq("run-b"))
	wantClause(t, err, ClauseRebalance)
}
