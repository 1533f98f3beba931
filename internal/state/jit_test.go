package state

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// k1 is the key of instance i-1's record.
var k1 = InstanceKey(testRole, "i-1")

func jitReg(n int, runnerID int64) Registration {
	return Registration{Purpose: PurposeJIT, JITConfig: "encoded-" + strconv.Itoa(n), Seq: n, RunnerID: runnerID, RunnerName: JITRunnerName(1, n, "i-1")}
}

// TestJITConfigsAreWrittenOneAfterTheOther: the first configuration of an
// assignment, then each only as the successor of the last, never twice for
// one number, never for an assignment the instance left.
func TestJITConfigsAreWrittenOneAfterTheOther(t *testing.T) {
	s, clk := newStore(t)
	inst := created(t, s, "i-1", "run-1")
	got, err := s.PutJIT(ctx, k1, inst.Assignment, jitReg(1, 11))
	must(t, err)
	if got.JITSeq != 1 || got.Registration == nil || got.Registration.JITConfig != "encoded-1" || got.Registration.Assignment != inst.Assignment {
		t.Fatalf("after the first: seq %d, registration %+v", got.JITSeq, got.Registration)
	}
	// When it was written, on the control plane's clock: how soon GitHub
	// shows the runner gone tells a job from an idle removal (issue 37).
	if got.JITMintedAt != clk.Now().Unix() {
		t.Fatalf("jitMintedAt %d, want the store's clock %d", got.JITMintedAt, clk.Now().Unix())
	}
	_, err = s.PutJIT(ctx, k1, inst.Assignment, jitReg(1, 12))
	wantClause(t, err, ClauseJIT) // a second first: a redelivered request
	_, err = s.PutJIT(ctx, k1, inst.Assignment, jitReg(3, 13))
	wantClause(t, err, ClauseJIT) // a gap

	must(t, s.PutSignal(ctx, k1, inst.Assignment, SignalJITNext, "2"))
	rec, err := s.Get(ctx, k1)
	must(t, err)
	if rec.JITWanted() != 2 {
		t.Fatalf("JITWanted = %d after UD_JIT_NEXT 2, want 2", rec.JITWanted())
	}
	got, err = s.PutJIT(ctx, k1, inst.Assignment, jitReg(2, 14))
	must(t, err)
	if got.JITWanted() != 0 {
		t.Fatalf("JITWanted = %d once number 2 is written, want 0", got.JITWanted())
	}
	if _, asked := got.Signals[SignalJITNext]; asked {
		t.Fatal("the answered request is still in the record: every later write would invoke the consumer again")
	}
	_, err = s.PutJIT(ctx, k1, "another-assignment", jitReg(3, 15))
	wantClause(t, err, ClauseAssignment)
	// Every runner written is recorded, for release to delete whatever
	// became of it (the refused writes' runners are their minter's to
	// delete).
	if !slices.Equal(got.JITRunners, []int64{11, 14}) {
		t.Fatalf("jitRunners %v, want [11 14]", got.JITRunners)
	}
	// Written only with the runners as read: a write on a list that moved
	// is refused.
	must(t, s.PutSignal(ctx, k1, inst.Assignment, SignalJITNext, "3"))
	_, err = s.PutJITServed(ctx, k1, inst.Assignment, jitReg(3, 16), 0, []int64{11})
	wantClause(t, err, ClauseJIT)
}

// TestTheRunnersMintedAreBounded: the record keeps the last MaxJITRunners.
func TestTheRunnersMintedAreBounded(t *testing.T) {
	var minted []int64
	for id := int64(1); id <= MaxJITRunners+5; id++ {
		before := slices.Clone(minted)
		next := withMinted(minted, id)
		if !slices.Equal(minted, before) {
			t.Fatal("withMinted changed the list it was given")
		}
		minted = next
	}
	if len(minted) != MaxJITRunners || minted[0] != 6 || minted[len(minted)-1] != MaxJITRunners+5 {
		t.Fatalf("%d runners kept, from %d to %d; want the last %d", len(minted), minted[0], minted[len(minted)-1], MaxJITRunners)
	}
}

func TestNoJITConfigForAnIdleInstanceAndEachClaimStartsAtOne(t *testing.T) {
	s, _ := newStore(t)
	idle := pooled(t, s, "i-1")
	_, err := s.PutJIT(ctx, k1, idle.Assignment, jitReg(1, 11))
	wantClause(t, err, ClauseState)
	claimed, err := s.Claim(ctx, k1, claimReq("run-2"))
	must(t, err)
	if _, err := s.PutJIT(ctx, k1, claimed.Assignment, jitReg(1, 12)); err != nil {
		t.Fatalf("the first configuration of a claim: %v", err)
	}
	// The runners of the last run were deleted at its release: the next
	// claim's list starts empty, and pooling empties it.
	must(t, s.PutSignal(ctx, k1, claimed.Assignment, SignalRegOK, ""))
	running, err := s.MarkRunning(ctx, claimed.Ref(), time.Hour, time.Hour)
	must(t, err)
	released, err := s.Release(ctx, running.Ref(), "run-2", time.Hour, nil)
	must(t, err)
	if !slices.Equal(released.JITRunners, []int64{12}) {
		t.Fatalf("after the release jitRunners %v, want [12] (a retirement deletes them if the release could not)", released.JITRunners)
	}
	must(t, s.PutSignal(ctx, k1, released.Assignment, SignalRemoveRegOK, ""))
	again, err := s.Claim(ctx, k1, claimReq("run-3"))
	must(t, err)
	if again.JITRunners != nil {
		t.Fatalf("a new claim holds the last run's runners %v", again.JITRunners)
	}
	got, err := s.PutJIT(ctx, k1, again.Assignment, jitReg(1, 13))
	must(t, err)
	if !slices.Equal(got.JITRunners, []int64{13}) {
		t.Fatalf("jitRunners %v, want [13]", got.JITRunners)
	}
	must(t, s.PutSignal(ctx, k1, got.Assignment, SignalRegOK, ""))
	running, err = s.MarkRunning(ctx, got.Ref(), time.Hour, time.Hour)
	must(t, err)
	released, err = s.Release(ctx, running.Ref(), "run-3", time.Hour, nil)
	must(t, err)
	must(t, s.PutSignal(ctx, k1, released.Assignment, SignalRemoveRegOK, ""))
	pooledRec, err := s.MarkPooled(ctx, released.Ref())
	must(t, err)
	if pooledRec.JITRunners != nil {
		t.Fatalf("pooled (its runners deleted): jitRunners %v, want none", pooledRec.JITRunners)
	}
	if _, err := s.PutJIT(ctx, k1, claimed.Assignment, Registration{Purpose: PurposeJIT, Seq: 2}); err == nil {
		t.Fatal("a configuration without its value or runner was written")
	}
}

func TestTheJITConfigStaysOutOfLogs(t *testing.T) {
	r := jitReg(1, 11)
	if s := r.String(); s == "" || strings.Contains(s, "encoded-1") {
		t.Fatalf("String() = %q shows the configuration", s)
	}
}

func TestNoJITConfigOnceTheLeaseHasPassed(t *testing.T) {
	s, c := newStore(t)
	inst := created(t, s, "i-1", "run-1")
	c.Add(11 * time.Minute) // created with a 10-minute TTL
	_, err := s.PutJIT(ctx, k1, inst.Assignment, jitReg(1, 11))
	wantClause(t, err, ClauseLease)
}

// TestReleaseSeesTheLastJITConfig: a configuration written after the
// releaser read the record (a slow stream answer) makes the release fail
// on jitSeq, so the releaser reads again and deletes that runner too; once
// released, no configuration of the old assignment can be written.
func TestReleaseSeesTheLastJITConfig(t *testing.T) {
	s, _ := newStore(t)
	inst := created(t, s, "i-1", "run-1")
	inst, err := s.PutJIT(ctx, k1, inst.Assignment, jitReg(1, 11))
	must(t, err)
	must(t, s.PutSignal(ctx, k1, inst.Assignment, SignalRegOK, ""))
	read, err := s.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	must(t, err)
	_, err = s.PutJIT(ctx, k1, read.Assignment, jitReg(2, 12)) // after the releaser's read
	must(t, err)
	_, err = s.Release(ctx, read.Ref(), "run-1", time.Minute, nil)
	wantClause(t, err, ClauseJIT)
	again, err := s.Get(ctx, k1)
	must(t, err)
	if again.Registration == nil || again.Registration.RunnerID != 12 {
		t.Fatalf("the record read again names %+v, want runner 12", again.Registration)
	}
	if _, err := s.Release(ctx, again.Ref(), "run-1", time.Minute, nil); err != nil {
		t.Fatalf("release as read again: %v", err)
	}
	_, err = s.PutJIT(ctx, k1, again.Assignment, jitReg(3, 13))
	wantClause(t, err, ClauseState)
}

// TestAJITRequestIsTakenToGitHubOncePerRate: the control plane stamps a
// request (jitAt, its clock) before asking GitHub anything, only when the
// last stamp is old enough, so two invocations never both pass the
// instance's rate; the request leaves the record with it. A refusal is
// recorded with what a look found, and removes the request too. None of
// this is the agent's to write.
func TestAJITRequestIsTakenToGitHubOncePerRate(t *testing.T) {
	s, _ := newStore(t)
	inst := created(t, s, "i-1", "run-1")
	_, err := s.PutJIT(ctx, k1, inst.Assignment, jitReg(1, 11))
	must(t, err)
	must(t, s.PutSignal(ctx, k1, inst.Assignment, SignalJITNext, "2"))
	const at, every = 1_800_000_000, 2 * time.Second
	got, err := s.TakeJITRequest(ctx, k1, inst.Assignment, 2, at, every)
	must(t, err)
	if got.JITAt != at || got.JITWanted() != 0 {
		t.Fatalf("after the take: jitAt %d, asking for %d; want %d and the request gone", got.JITAt, got.JITWanted(), at)
	}
	_, err = s.TakeJITRequest(ctx, k1, inst.Assignment, 2, at, every) // a parallel invocation
	wantClause(t, err, ClauseJITRate)
	_, err = s.TakeJITRequest(ctx, k1, inst.Assignment, 2, at+1, every)
	wantClause(t, err, ClauseJITRate)
	_, err = s.TakeJITRequest(ctx, k1, inst.Assignment, 3, at+2, every)
	wantClause(t, err, ClauseJIT) // not the successor of the last written
	if _, err := s.TakeJITRequest(ctx, k1, inst.Assignment, 2, at+2, every); err != nil {
		t.Fatalf("a take once the rate allows it: %v", err)
	}
	_, err = s.TakeJITRequest(ctx, k1, "another-assignment", 2, at+9, every)
	wantClause(t, err, ClauseAssignment)

	must(t, s.PutSignal(ctx, k1, inst.Assignment, SignalJITNext, "2"))
	got, err = s.RefuseJIT(ctx, k1, inst.Assignment, JITRefusal{Seq: 2, At: at + 3, Clause: ClauseJITUnused, Why: "none took a job", Count: 1, Looks: 1, LookedAt: at + 3}, 1)
	must(t, err)
	if r := got.JITRefusedNow(); r.Clause != ClauseJITUnused || r.Count != 1 || r.Looks != 1 || got.JITServed != 1 || got.JITWanted() != 0 {
		t.Fatalf("after the refusal: %+v, served %d, asking for %d", r, got.JITServed, got.JITWanted())
	}
	for _, a := range []string{"jitAt", "jitServed", "jitRefused", "jitMintedAt", "jitRunners"} {
		if slices.Contains(AgentAttributes, a) {
			t.Errorf("%s is among the agent's attributes: the instance could reset its own bound", a)
		}
	}
}
