package state

import (
	"testing"
	"time"
)

func TestTheSpotBreakerOpensAfterTwoInterruptionsWithinFifteenMinutesForThirtyMinutes(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	type note struct {
		id string
		at time.Duration
	}
	rows := []struct {
		name      string
		notes     []note
		openAt    []time.Duration // asked after the notes: open
		closedAt  []time.Duration // and closed
		remaining int             // entries kept after the last note
	}{
		{name: "one interruption leaves it closed", notes: []note{{"i-1", 0}}, closedAt: []time.Duration{0, time.Minute}, remaining: 1},
		{name: "two within the window open it for thirty minutes from the second",
			notes: []note{{"i-1", 0}, {"i-2", 14 * time.Minute}}, openAt: []time.Duration{14 * time.Minute, 43 * time.Minute}, closedAt: []time.Duration{44 * time.Minute, 2 * time.Hour}, remaining: 2},
		{name: "two further apart than the window leave it closed",
			notes: []note{{"i-1", 0}, {"i-2", 15 * time.Minute}}, closedAt: []time.Duration{15 * time.Minute}, remaining: 1},
		{name: "the same instance noted twice (a retried refresh) counts once",
			notes: []note{{"i-1", 0}, {"i-1", time.Minute}}, closedAt: []time.Duration{time.Minute}, remaining: 1},
		{name: "a third interruption while open extends the cooldown",
			notes: []note{{"i-1", 0}, {"i-2", time.Minute}, {"i-3", 10 * time.Minute}}, openAt: []time.Duration{39 * time.Minute}, closedAt: []time.Duration{40 * time.Minute}, remaining: 3},
		{name: "after the cooldown a single interruption does not open it again",
			notes: []note{{"i-1", 0}, {"i-2", time.Minute}, {"i-3", time.Hour}}, closedAt: []time.Duration{time.Hour}, remaining: 1},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			b := SpotBreaker{Pool: "linux"}
			for _, n := range r.notes {
				b = b.Noted(n.id, at(n.at))
			}
			for _, d := range r.openAt {
				if !b.Open(at(d)) {
					t.Errorf("closed at +%s, want open: %+v", d, b)
				}
			}
			for _, d := range r.closedAt {
				if b.Open(at(d)) {
					t.Errorf("open at +%s, want closed: %+v", d, b)
				}
			}
			if len(b.Interruptions) != r.remaining {
				t.Errorf("%d interruptions kept, want %d: %v", len(b.Interruptions), r.remaining, b.Interruptions)
			}
		})
	}
}

func TestALaunchUsesOnDemandOnlyWhileTheBreakerIsOpenAndThePoolAllowsIt(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	open := &SpotBreaker{OpenUntil: now.Add(time.Minute).Unix()}
	closed := &SpotBreaker{OpenUntil: now.Unix()}
	rows := []struct {
		name      string
		asked     string
		fallback  bool
		b         *SpotBreaker
		want      string
		byBreaker bool
	}{
		{"spot, breaker open, pool allows on-demand", UsageClassSpot, true, open, UsageClassOnDemand, true},
		{"spot, breaker open, pool is spot only", UsageClassSpot, false, open, UsageClassSpot, false},
		{"spot, breaker closed", UsageClassSpot, true, closed, UsageClassSpot, false},
		{"spot, no breaker yet", UsageClassSpot, true, nil, UsageClassSpot, false},
		{"on-demand asked, breaker open", UsageClassOnDemand, true, open, UsageClassOnDemand, false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got, by := LaunchClass(r.asked, &PoolConfig{OnDemandFallback: r.fallback}, r.b, now)
			if got != r.want || by != r.byBreaker {
				t.Fatalf("LaunchClass = %s, %v; want %s, %v", got, by, r.want, r.byBreaker)
			}
		})
	}
}

// Refresh's notes race through an optimistic write: two notes of two
// instances open the pool's breaker, and a second note of one of them
// changes nothing.
func TestSpotInterruptionsNotedInTheStoreOpenThePoolsBreaker(t *testing.T) {
	s, c := newStore(t)
	if b, err := s.GetSpotBreaker(ctx, testPool); err != nil || b != nil {
		t.Fatalf("breaker of a pool without interruptions = %+v, %v; want none", b, err)
	}
	b, err := s.NoteSpotInterruption(ctx, testPool, "i-1")
	must(t, err)
	if b.Open(c.Now()) {
		t.Fatal("open after one interruption")
	}
	c.Add(5 * time.Minute)
	_, err = s.NoteSpotInterruption(ctx, testPool, "i-2")
	must(t, err)
	got, err := s.GetSpotBreaker(ctx, testPool)
	must(t, err)
	if !got.Open(c.Now()) || got.OpenUntil != c.Now().Add(SpotBreakerCooldown).Unix() || len(got.Recent(c.Now())) != 2 {
		t.Fatalf("breaker after two interruptions in five minutes = %+v, want open for %s", got, SpotBreakerCooldown)
	}
	c.Add(time.Minute)
	again, err := s.NoteSpotInterruption(ctx, testPool, "i-2")
	must(t, err)
	if again.OpenUntil != got.OpenUntil {
		t.Fatalf("a second note of one instance moved the cooldown: %d, was %d", again.OpenUntil, got.OpenUntil)
	}
}
