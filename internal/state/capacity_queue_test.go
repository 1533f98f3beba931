package state

import (
	"context"
	"testing"
	"time"
)

// Provisions that find their pool full wait in the order they began (issue
// 32): the head may take capacity, the others wait; an entry leaves when its
// provision is served or its deadline passes (a provision that died), and a
// reservation keeps the queue as it is.
func TestProvisionsWaitForCapacityFirstComeFirstServed(t *testing.T) {
	s, clk := newStore(t)
	t0 := clk.Now()
	early, late, later := t0, t0.Add(time.Second), t0.Add(2*time.Second)
	must(t, s.Queue(ctx, testPool, "r-late", "", late, t0.Add(10*time.Minute), 0))
	must(t, s.Queue(ctx, testPool, "r-early", "", early, t0.Add(10*time.Minute), 0))
	ahead := func(run string, since time.Time) int {
		n, err := s.Ahead(ctx, testPool, run, since)
		must(t, err)
		return n
	}
	if a, b, c := ahead("r-early", early), ahead("r-late", late), ahead("r-new", later); a != 0 || b != 1 || c != 2 {
		t.Fatalf("ahead: early %d, late %d, a newcomer %d; want 0, 1, 2", a, b, c)
	}
	noneLive := func(context.Context) (map[string]string, error) { return map[string]string{}, nil }
	must(t, s.Reserve(ctx, testPool, "a1", 1, 5, time.Minute, noneLive))
	if ahead("r-late", late) != 1 {
		t.Fatal("a reservation dropped the queue")
	}
	must(t, s.Unqueue(ctx, testPool, "r-early"))
	if a := ahead("r-late", late); a != 0 {
		t.Fatalf("after the head was served: %d ahead of r-late, want 0", a)
	}
	// A provision that died: its entry goes with its deadline.
	must(t, s.Queue(ctx, testPool, "r-dead", "", t0.Add(-time.Minute), t0.Add(time.Minute), 0))
	if a := ahead("r-late", late); a != 1 {
		t.Fatalf("%d ahead of r-late, want the dead provision's entry", a)
	}
	clk.Add(2 * time.Minute)
	if a := ahead("r-late", late); a != 0 {
		t.Fatalf("%d ahead of r-late after the dead provision's deadline, want 0", a)
	}
}
