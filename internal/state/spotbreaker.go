package state

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// A pool's spot circuit breaker ("spot#<pool>"): when EC2 takes back
// SpotBreakerTrips of a pool's spot instances within SpotBreakerWindow,
// the pool's launches use on-demand for SpotBreakerCooldown, where the pool
// allows on-demand (its on_demand_fallback). Only refresh writes it, when
// it closes the record of an instance EC2 took back after its interruption
// notice (lambdas/refresh); provision reads it before a launch; nothing
// an instance writes reaches it (its key is no ${aws:userid}).
//
// The numbers are fixed, not settings: an operator who wants a pool never
// to launch spot sets its usage class.

const kindSpotBreaker = "spot-breaker"

const (
	// SpotBreakerTrips interruptions within SpotBreakerWindow open the
	// breaker for SpotBreakerCooldown.
	SpotBreakerTrips    = 2
	SpotBreakerWindow   = 15 * time.Minute
	SpotBreakerCooldown = 30 * time.Minute
)

// SpotBreakerKey is the key of a pool's spot breaker.
func SpotBreakerKey(pool string) string { return "spot#" + pool }

// SpotBreaker is a pool's recent spot interruptions and whether its
// launches use on-demand now. Times are unix seconds on the control
// plane's clock.
type SpotBreaker struct {
	Pool string `dynamodbav:"pool" json:"pool"`
	// Interruptions are the instances EC2 took back within the window, by
	// instance id (one entry per instance: a refresh that noted one and
	// failed after does not count it twice).
	Interruptions map[string]int64 `dynamodbav:"interruptions" json:"interruptions"`
	// OpenUntil is when launches may use spot again (0: never opened).
	OpenUntil int64 `dynamodbav:"openUntil,omitempty" json:"openUntil,omitempty"`
	// OpenedAt is when it last opened.
	OpenedAt int64 `dynamodbav:"openedAt,omitempty" json:"openedAt,omitempty"`
}

// Open reports whether the breaker holds the pool's launches on-demand at now.
func (b *SpotBreaker) Open(now time.Time) bool { return b != nil && now.Unix() < b.OpenUntil }

// Noted is the breaker after instance id's interruption at at: entries
// older than the window are dropped, and SpotBreakerTrips of them within
// it open the breaker (again) for the cooldown from at. An instance noted
// already changes nothing but the trimming: noting is idempotent.
func (b SpotBreaker) Noted(id string, at time.Time) SpotBreaker {
	next := SpotBreaker{Pool: b.Pool, Interruptions: map[string]int64{}, OpenUntil: b.OpenUntil, OpenedAt: b.OpenedAt}
	since := at.Add(-SpotBreakerWindow).Unix()
	for k, t := range b.Interruptions {
		if t > since {
			next.Interruptions[k] = t
		}
	}
	if _, ok := b.Interruptions[id]; ok {
		return next
	}
	next.Interruptions[id] = at.Unix()
	if len(next.Interruptions) >= SpotBreakerTrips {
		if !next.Open(at) {
			next.OpenedAt = at.Unix()
		}
		next.OpenUntil = max(next.OpenUntil, at.Add(SpotBreakerCooldown).Unix())
	}
	return next
}

// Recent lists the interruptions within the window before now, oldest first.
func (b *SpotBreaker) Recent(now time.Time) []time.Time {
	if b == nil {
		return nil
	}
	var out []time.Time
	for _, t := range b.Interruptions {
		if t > now.Add(-SpotBreakerWindow).Unix() {
			out = append(out, time.Unix(t, 0))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// LaunchClass is the usage class a launch of the pool uses for a request
// of class asked: on-demand instead of spot while the pool's breaker is
// open and the pool allows on-demand (its on_demand_fallback); byBreaker
// says the breaker changed it.
func LaunchClass(asked string, p *PoolConfig, b *SpotBreaker, now time.Time) (class string, byBreaker bool) {
	if asked == UsageClassSpot && p.OnDemandFallback && b.Open(now) {
		return UsageClassOnDemand, true
	}
	return asked, false
}

type spotBreakerItem struct {
	Key     string `dynamodbav:"pk"`
	Kind    string `dynamodbav:"kind"`
	Version int64  `dynamodbav:"version"`
	SpotBreaker
}

// GetSpotBreaker reads a pool's spot breaker; nil when the pool never had
// an interruption noted.
func (s *SpotBreakers) GetSpotBreaker(ctx context.Context, pool string) (*SpotBreaker, error) {
	var it spotBreakerItem
	ok, err := s.getItem(ctx, SpotBreakerKey(pool), &it)
	if err != nil || !ok {
		return nil, err
	}
	return &it.SpotBreaker, nil
}

// NoteSpotInterruption notes that EC2 took back instance id of pool (on the
// store's clock) and returns the breaker as written. Writers race with an
// optimistic write on the item's version.
func (s *SpotBreakers) NoteSpotInterruption(ctx context.Context, pool, id string) (*SpotBreaker, error) {
	if pool == "" || id == "" {
		return nil, fmt.Errorf("note a spot interruption: pool and instance id are required")
	}
	var out SpotBreaker
	err := s.retryVersioned(ctx, "note the spot interruption of "+id+" in pool "+pool, func() (versioned, error) {
		var it spotBreakerItem
		found, err := s.getItem(ctx, SpotBreakerKey(pool), &it)
		if err != nil {
			return versioned{}, err
		}
		it.SpotBreaker.Pool = pool
		out = it.SpotBreaker.Noted(id, time.Unix(s.now(), 0))
		next := spotBreakerItem{Key: SpotBreakerKey(pool), Kind: kindSpotBreaker, Version: it.Version + 1, SpotBreaker: out}
		return versioned{next: next, found: found, version: it.Version}, nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}
