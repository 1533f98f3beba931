package state

import (
	"testing"
	"time"
)

func TestALeaseHasOneHolderUntilItIsReleasedOrItsTimePasses(t *testing.T) {
	s, _ := newStore(t)
	now := time.Now()
	s.Now = func() time.Time { return now }
	got := func(holder string, until time.Time) bool {
		t.Helper()
		ok, err := s.AcquireLease(ctx, "refresh", holder, until)
		must(t, err)
		return ok
	}
	if !got("a", now.Add(time.Minute)) {
		t.Fatal("a could not take a free lease")
	}
	if got("b", now.Add(time.Minute)) {
		t.Fatal("b took the lease a holds")
	}
	if !got("a", now.Add(2*time.Minute)) {
		t.Fatal("a could not extend its own lease")
	}
	if ok, _ := s.AcquireLease(ctx, "scale-down", "b", now.Add(time.Minute)); !ok {
		t.Fatal("another lease's name is not free")
	}
	must(t, s.ReleaseLease(ctx, "refresh", "b")) // not b's: nothing changes
	if got("c", now.Add(time.Minute)) {
		t.Fatal("a release by a non-holder freed the lease")
	}
	must(t, s.ReleaseLease(ctx, "refresh", "a"))
	if !got("c", now.Add(time.Minute)) {
		t.Fatal("c could not take a released lease")
	}
	// c dies holding it: once its time has passed, d takes it.
	now = now.Add(2 * time.Minute)
	if !got("d", now.Add(time.Minute)) {
		t.Fatal("d could not take a lease whose holder's time had passed")
	}
	if _, err := s.AcquireLease(ctx, "", "d", now); err == nil {
		t.Error("a lease without a name was accepted")
	}
}
