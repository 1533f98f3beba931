package state

import (
	"context"
	"fmt"
	"time"
)

// Provisions that find their pool at its cap wait for capacity in turn,
// first come first served, instead of failing the workflow. The capacity
// item holds the queue: each waiting run with when its provision began
// (Since, milliseconds) and until when its place holds (Until, seconds: a
// few seconds ahead, renewed by its provision at every look and never past
// its deadline, so the place of a provision that died lapses in seconds,
// lambdas/provision/queue.go). A provision may claim or launch only while no waiter that began
// before it (ties: the smaller run id) is in force; a provision that found
// the pool short joins the queue and tries again when it is at its head.

// Waiter is one provision waiting for its pool's capacity.
type Waiter struct {
	Since int64 `dynamodbav:"since"` // unix milliseconds: when its provision began
	Until int64 `dynamodbav:"until"` // unix seconds: until when the place holds unless renewed
	// Repo is the repository id of the invoking job's verified token: a
	// pool bounds the places one repository holds (fairshare.go).
	Repo string `dynamodbav:"repo,omitempty"`
}

// before says whether waiter a (run id ra) comes before b (run id rb).
func before(a Waiter, ra string, b Waiter, rb string) bool {
	return a.Since < b.Since || a.Since == b.Since && ra < rb
}

// inForce are the waiters whose provision may still be waiting.
func (c capacityItem) inForce(now int64) map[string]Waiter {
	out := map[string]Waiter{}
	for id, w := range c.Waiting {
		if w.Until > now {
			out[id] = w
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Ahead counts the waiters of pool in force that come before run runID,
// whose provision began at since: 0 means it may take capacity now.
func (s *Capacity) Ahead(ctx context.Context, pool, runID string, since time.Time) (int, error) {
	var item capacityItem
	if _, err := s.getItem(ctx, CapacityKey(pool), &item); err != nil {
		return 0, err
	}
	me := Waiter{Since: since.UnixMilli()}
	n := 0
	for id, w := range item.inForce(s.now()) {
		if id != runID && before(w, id, me, runID) {
			n++
		}
	}
	return n, nil
}

// Queue puts run runID of repository repo (its provision began at since) in
// pool's queue until until, or keeps it there, and prunes the waiters no
// longer in force. When repo holds maxPlaces places already (0: no limit)
// it returns a *ConditionError with ClauseMaxQueued and changes nothing.
func (s *Capacity) Queue(ctx context.Context, pool, runID, repo string, since, until time.Time, maxPlaces int) error {
	return s.updateQueue(ctx, pool, func(w map[string]Waiter) error {
		if n := queuePlaces(w, repo, runID); maxPlaces > 0 && n >= maxPlaces {
			return &ConditionError{Key: CapacityKey(pool), Transition: "wait for capacity", Clause: ClauseMaxQueued,
				Detail: fmt.Sprintf("repository id %s holds %d places in pool %s's capacity queue, the pool's max_queued_per_repository (%d): this run does not wait behind them, so that other repositories' runs are not queued behind one repository's", repo, n, pool, maxPlaces)}
		}
		w[runID] = Waiter{Since: since.UnixMilli(), Until: until.Unix(), Repo: repo}
		return nil
	})
}

// Unqueue takes run runID out of pool's queue (it got its capacity, or
// stopped waiting).
func (s *Capacity) Unqueue(ctx context.Context, pool, runID string) error {
	return s.updateQueue(ctx, pool, func(w map[string]Waiter) error { delete(w, runID); return nil })
}

// updateQueue changes the queue with an optimistic write on the item's
// version, as Reserve does, keeping its reservations.
func (s *Capacity) updateQueue(ctx context.Context, pool string, change func(map[string]Waiter) error) error {
	return s.retryVersioned(ctx, "capacity queue of "+pool, func() (versioned, error) {
		var item capacityItem
		found, err := s.getItem(ctx, CapacityKey(pool), &item)
		if err != nil {
			return versioned{}, err
		}
		waiting := item.inForce(s.now())
		if waiting == nil {
			waiting = map[string]Waiter{}
		}
		if err := change(waiting); err != nil {
			return versioned{}, err
		}
		if len(waiting) == 0 {
			waiting = nil
		}
		if item.Reservations == nil {
			item.Reservations = map[string]Reservation{}
		}
		next := capacityItem{Key: CapacityKey(pool), Kind: kindCapacity, Version: item.Version + 1, Reservations: item.Reservations, Waiting: waiting}
		return versioned{next: next, found: found, version: item.Version}, nil
	})
}
