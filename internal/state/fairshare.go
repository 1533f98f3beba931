package state

import (
	"context"
	"fmt"
	"time"
)

// Fair share between repositories. Every repository allowed to invoke
// provision shares the account's Lambda concurrency (or the provision
// function's reserved concurrency) and each pool's capacity queue. A
// provision waits inside the function — in the capacity queue, for
// registrations — so a repository that starts many runs could hold every
// execution slot and every place at the head of the queue, and the other
// repositories' workflows would get 429s and wait behind it. A pool may
// therefore bound, per repository (by the repository_id of the invoking
// job's verified OIDC token, never a payload field):
//
//   - provisions in flight: each provision takes a lease in the
//     repository's share item (pk share#<pool>#<repository id>) before any
//     slow work and gives it back when it returns; a lease lasts at most
//     until the invocation's deadline, so a killed invocation's lease ends
//     by itself;
//   - places in the capacity queue: a waiter carries its repository, and a
//     provision whose repository already holds the pool's limit of places
//     fails at once instead of joining (capacity_queue.go).
//
// Both are refused with a *ConditionError naming the limit's clause.

const kindShare = "share"

// Clauses of the fair-share refusals: the pool settings that refused.
const (
	ClauseMaxProvisions Clause = "maxProvisionsPerRepository"
	ClauseMaxQueued     Clause = "maxQueuedPerRepository"
)

// ShareKey is the partition key of repository repoID's share item of pool.
func ShareKey(pool, repoID string) string { return "share#" + pool + "#" + repoID }

type shareItem struct {
	Key     string `dynamodbav:"pk"`
	Kind    string `dynamodbav:"kind"`
	Version int64  `dynamodbav:"version"`
	// Leases are the provisions in flight: lease id → until (unix seconds).
	Leases map[string]int64 `dynamodbav:"leases"`
}

// admitProvision decides whether lease id may be taken among leases at
// now, with at most max in force (0: no limit). It returns the leases in
// force with id's (until) added, or ok false and how many are in force. A
// lease id already held is renewed, never refused: the same invocation
// asking again must not lock itself out.
func admitProvision(leases map[string]int64, now int64, id string, until int64, max int) (kept map[string]int64, inForce int, ok bool) {
	kept = map[string]int64{}
	for k, u := range leases {
		if u > now && k != id {
			kept[k] = u
		}
	}
	if max > 0 && len(kept) >= max {
		return nil, len(kept), false
	}
	kept[id] = until
	return kept, len(kept), true
}

// TakeProvisionLease takes lease id in repository repoID's share of pool
// until until, unless max (0: no limit) leases of the repository are in
// force already: then it returns a *ConditionError with
// ClauseMaxProvisions. repo is the repository's name, for the message.
func (s *Capacity) TakeProvisionLease(ctx context.Context, pool, repoID, repo, id string, until time.Time, max int) error {
	key := ShareKey(pool, repoID)
	return s.updateShare(ctx, key, func(leases map[string]int64) (map[string]int64, error) {
		kept, n, ok := admitProvision(leases, s.now(), id, until.Unix(), max)
		if !ok {
			return nil, &ConditionError{Key: key, Transition: "start provision", Clause: ClauseMaxProvisions,
				Detail: fmt.Sprintf("repository %s has %d provisions of pool %s in flight, the pool's max_provisions_per_repository (%d): this one is refused so that other repositories keep their share of the provision function; retry when one of yours ends", repo, n, pool, max)}
		}
		return kept, nil
	})
}

// ReturnProvisionLease gives lease id of repository repoID's share of pool
// back (its provision returned).
func (s *Capacity) ReturnProvisionLease(ctx context.Context, pool, repoID, id string) error {
	return s.updateShare(ctx, ShareKey(pool, repoID), func(leases map[string]int64) (map[string]int64, error) {
		kept := map[string]int64{}
		for k, u := range leases {
			if u > s.now() && k != id {
				kept[k] = u
			}
		}
		return kept, nil
	})
}

// updateShare changes a share item with an optimistic write on its
// version, as Reserve does with the capacity item: two provisions of a
// repository can never both take the last lease.
func (s *Capacity) updateShare(ctx context.Context, key string, change func(map[string]int64) (map[string]int64, error)) error {
	return s.retryVersioned(ctx, key, func() (versioned, error) {
		var item shareItem
		found, err := s.getItem(ctx, key, &item)
		if err != nil {
			return versioned{}, err
		}
		leases, err := change(item.Leases)
		if err != nil {
			return versioned{}, err
		}
		next := shareItem{Key: key, Kind: kindShare, Version: item.Version + 1, Leases: leases}
		return versioned{next: next, found: found, version: item.Version}, nil
	})
}

// queuePlaces counts the waiters in waiting (in force) of repository repo,
// other than run runID.
func queuePlaces(waiting map[string]Waiter, repo, runID string) int {
	n := 0
	for id, w := range waiting {
		if id != runID && w.Repo == repo {
			n++
		}
	}
	return n
}

// MaxSharePerRepository bounds both per-repository limits: Lambda's
// concurrency quota is a few thousand at most.
const MaxSharePerRepository = 10000

// validateShare checks the fair-share limits: a waiting provision is in
// flight too, so a repository can never hold more queue places than
// provisions in flight.
func (p PoolConfig) validateShare() error {
	switch m, q := p.MaxProvisionsPerRepository, p.MaxQueuedPerRepository; {
	case m < 0 || m > MaxSharePerRepository:
		return fmt.Errorf("maxProvisionsPerRepository: must be 0 (no limit) to %d, got %d", MaxSharePerRepository, m)
	case q < 0 || q > MaxSharePerRepository:
		return fmt.Errorf("maxQueuedPerRepository: must be 0 (no limit) to %d, got %d", MaxSharePerRepository, q)
	case m > 0 && q > m:
		return fmt.Errorf("maxQueuedPerRepository: %d is more than maxProvisionsPerRepository (%d); a waiting provision is in flight, so at most that many can wait", q, m)
	}
	return nil
}

// ProvisionLeases counts the provision leases in force in repository
// repoID's share of pool: what the chaos run's flood watches (it reads,
// never writes).
func (s *Capacity) ProvisionLeases(ctx context.Context, pool, repoID string) (int, error) {
	var item shareItem
	if _, err := s.getItem(ctx, ShareKey(pool, repoID), &item); err != nil {
		return 0, err
	}
	n := 0
	for _, until := range item.Leases {
		if until > s.now() {
			n++
		}
	}
	return n, nil
}

// QueuePlaces counts the places in force repository repoID holds in pool's
// capacity queue.
func (s *Capacity) QueuePlaces(ctx context.Context, pool, repoID string) (int, error) {
	var item capacityItem
	if _, err := s.getItem(ctx, CapacityKey(pool), &item); err != nil {
		return 0, err
	}
	return queuePlaces(item.inForce(s.now()), repoID, ""), nil
}
