package state

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Security properties of the store that docs/security.md relies on.

// TestRegistrationMaterialLifetime: GitHub material is written only into the
// record of the instance it is for, bound to that instance's assignment, and
// is gone from the record once used — the registration token when the
// runner is registered, the remove token when it is deregistered — and when
// the record ends.
func TestRegistrationMaterialLifetime(t *testing.T) {
	s, _ := newStore(t)
	other := pooled(t, s, "i-sec-other")
	p := pooled(t, s, "i-sec-own")

	req := claimReq("r-sec")
	req.Registration = &Registration{Purpose: PurposeRegister, Token: "REGTOKEN-SEC", URL: "https://github.com/acme"}
	c, err := s.Claim(ctx, p.Key, req)
	must(t, err)
	if c.Registration == nil || c.Registration.Assignment != c.Assignment {
		t.Fatalf("claim: registration %v for assignment %s", c.Registration, c.Assignment)
	}
	if got, err := s.Get(ctx, other.Key); err != nil || got.Registration != nil {
		t.Fatalf("material reached another instance's record: %v %v", got.Registration, err)
	}

	// Registered: the register token goes.
	must(t, s.PutSignal(ctx, c.Key, c.Assignment, SignalRegOK, ""))
	must(t, s.SetRunner(ctx, c.Key, c.Assignment, 11, "ghr-2-"+c.ID))
	r, err := s.MarkRunning(ctx, c.Ref(), time.Hour, time.Hour)
	must(t, err)
	if r.Registration != nil {
		t.Fatal("register token kept after registration")
	}

	// Released: the remove token arrives, bound to the new assignment.
	idle, err := s.Release(ctx, r.Ref(), "r-sec", 15*time.Minute, &Registration{Purpose: PurposeRemove, Token: "RMTOKEN-SEC"})
	must(t, err)
	if idle.Registration == nil || idle.Registration.Assignment != idle.Assignment || idle.Registration.Purpose != PurposeRemove {
		t.Fatalf("release: registration %v", idle.Registration)
	}
	// A stale assignment cannot clear (or touch) the new material.
	if err := s.SetRunner(ctx, c.Key, c.Assignment, 0, ""); ClauseOf(err) != ClauseAssignment {
		t.Fatalf("clear with the old assignment = %v, want refused", err)
	}
	// Deregistered: the remove token goes too; no token stays in an idle record.
	must(t, s.SetRunner(ctx, c.Key, idle.Assignment, 0, ""))
	got, err := s.Get(ctx, c.Key)
	must(t, err)
	if got.Registration != nil || got.GithubRunnerID != 0 {
		t.Fatalf("after deregistration: registration %v runner %d", got.Registration, got.GithubRunnerID)
	}

	// Terminated: any material left (a failed deregistration) is removed.
	again, err := s.Release(ctx, running(t, s, "i-sec-term", "r-t").Ref(), "r-t", time.Minute, &Registration{Purpose: PurposeRemove, Token: "RMTOKEN-TERM"})
	must(t, err)
	term, err := s.Terminate(ctx, again.Key, Termination{Assignment: again.Assignment})
	must(t, err)
	if term.Registration != nil {
		t.Fatal("terminated record keeps its remove token")
	}
}

// TestAgentWritesCannotForge: the writes the agent makes cannot create a
// record, resurrect a terminated one, answer an assignment other than the
// record's, or touch the fields that decide ownership (state, runId,
// assignment, lease).
func TestAgentWritesCannotForge(t *testing.T) {
	s, _ := newStore(t)
	r := running(t, s, "i-forge", "r-own")

	// No record: nothing is created by any agent write.
	for name, write := range map[string]func() error{
		"heartbeat": func() error { return s.Heartbeat(ctx, "i-forge-ghost") },
		"signal":    func() error { return s.PutSignal(ctx, "i-forge-ghost", "x", SignalRegOK, "") },
		"runner":    func() error { return s.SetRunner(ctx, "i-forge-ghost", "x", 1, "n") },
		"clear":     func() error { return s.ClearRegistration(ctx, "i-forge-ghost", "x") },
	} {
		if err := write(); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s on no record = %v, want not found", name, err)
		}
	}
	if _, err := s.Get(ctx, "i-forge-ghost"); !IsNotFound(err) {
		t.Fatalf("an agent write created a record: %v", err)
	}

	// A signal for another assignment is refused and changes nothing.
	before, err := s.Get(ctx, r.Key)
	must(t, err)
	if err := s.PutSignal(ctx, r.Key, "forged-assignment", SignalRemoveRegOK, ""); ClauseOf(err) != ClauseAssignment {
		t.Fatalf("forged signal = %v, want refused on the assignment", err)
	}
	after, err := s.Get(ctx, r.Key)
	must(t, err)
	if after.Version != before.Version || len(after.Signals) != len(before.Signals) {
		t.Fatalf("refused signal changed the record: version %d → %d", before.Version, after.Version)
	}

	// The agent's own writes leave ownership alone.
	must(t, s.Heartbeat(ctx, r.Key))
	must(t, s.PutSignal(ctx, r.Key, r.Assignment, SignalInterrupted, "spot"))
	must(t, s.SetRunner(ctx, r.Key, r.Assignment, 5, "ghr-1-i-forge"))
	got, err := s.Get(ctx, r.Key)
	must(t, err)
	if got.State != r.State || got.RunID != r.RunID || got.Assignment != r.Assignment || got.Threshold != r.Threshold || got.PoolState != r.PoolState {
		t.Fatalf("agent writes moved ownership: %+v", got)
	}

	// Terminated: no agent write brings it back.
	term, err := s.Terminate(ctx, r.Key, Termination{Assignment: r.Assignment})
	must(t, err)
	for name, err := range map[string]error{
		"heartbeat": s.Heartbeat(ctx, r.Key),
		"signal":    s.PutSignal(ctx, r.Key, r.Assignment, SignalRegOK, ""),
		"runner":    s.SetRunner(ctx, r.Key, r.Assignment, 6, "n"),
	} {
		if ClauseOf(err) != ClauseState && ClauseOf(err) != ClauseAssignment {
			t.Errorf("%s on a terminated record = %v, want refused", name, err)
		}
	}
	final, err := s.Get(ctx, r.Key)
	must(t, err)
	if final.State != Terminated || final.Version != term.Version {
		t.Fatalf("terminated record changed: %+v", final)
	}
}

// TestRegistrationNeverPrinted: the token is redacted wherever the material
// is formatted (logs, errors).
func TestRegistrationNeverPrinted(t *testing.T) {
	reg := &Registration{Assignment: "a1", Purpose: PurposeRegister, URL: "https://github.com/acme", Token: "AAAASECRETTOKEN"}
	for _, out := range []string{fmt.Sprint(reg), fmt.Sprintf("%v", reg), fmt.Sprintf("%s", reg), fmt.Sprintf("%+v", Instance{ID: "i-1", Registration: reg}), fmt.Sprintf("%+v", &Instance{Registration: reg}), (&ConditionError{Key: "i-1", Transition: "t", Clause: ClauseState, Detail: fmt.Sprint(reg)}).Error()} {
		if strings.Contains(out, "AAAASECRETTOKEN") {
			t.Errorf("token printed: %s", out)
		}
	}
}
