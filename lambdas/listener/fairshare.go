package listener

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/actions/scaleset"
	sslistener "github.com/actions/scaleset/listener"
)

// Fair share between repositories in a scale set. GitHub hands an
// assigned job to any idle runner of the scale set, in the order jobs
// came: a repository that queues a hundred jobs takes every runner up to
// max_runners, and another repository's one job waits behind them all.
// What the listener controls is which jobs it acquires: a job announced
// (JobAvailable) but not acquired stays queued at GitHub and is no
// runner's, and GitHub's count of assigned jobs (what the scale set is
// sized by) counts only acquired ones. So the listener acquires at most
// the pool's max_provisions_per_repository jobs of one repository at a
// time (as in the provision mode, where that bounds a repository's
// provisions in flight); the others wait here, oldest first, and are
// acquired as that repository's jobs end.
//
// Invariants:
//   - a repository never holds more than limit acquired jobs not yet
//     completed, whatever it queues;
//   - a job waiting here is acquired, or ends (cancelled), never dropped:
//     a listener that stops forgets the waiting list, and the next
//     session hears of every job still available;
//   - the repository is GitHub's (the message's owner and repository
//     names), never anything a job's payload or an instance says.

// fairShare is the session client the library's listener uses, with the
// acquisitions held to the share; limit 0 passes every one through.
type fairShare struct {
	sslistener.Client
	limit int
	log   *slog.Logger

	mu      sync.Mutex
	repoOf  map[int64]string          // announced job → its repository
	held    map[string]map[int64]bool // repository → its acquired jobs not completed
	waiting []int64                   // announced, held back by the share, oldest first
}

func newFairShare(c sslistener.Client, limit int, log *slog.Logger) sslistener.Client {
	if limit <= 0 {
		return c
	}
	return &fairShare{Client: c, limit: limit, log: log, repoOf: map[int64]string{}, held: map[string]map[int64]bool{}}
}

// GetMessage notes the repository of each job announced and the end of
// each job completed, then acquires the waiting jobs the ends made room
// for, before the library handles the message.
func (f *fairShare) GetMessage(ctx context.Context, lastMessageID, maxCapacity int) (*scaleset.RunnerScaleSetMessage, error) {
	msg, err := f.Client.GetMessage(ctx, lastMessageID, maxCapacity)
	if err != nil || msg == nil {
		return msg, err
	}
	f.mu.Lock()
	for _, j := range msg.JobAvailableMessages {
		f.repoOf[j.RunnerRequestID] = j.OwnerName + "/" + j.RepositoryName
	}
	ended := false
	for _, j := range msg.JobCompletedMessages {
		id := j.RunnerRequestID
		if repo, ok := f.repoOf[id]; ok && f.held[repo][id] {
			delete(f.held[repo], id)
			ended = true
		}
		f.waiting = slices.DeleteFunc(f.waiting, func(w int64) bool { return w == id })
		delete(f.repoOf, id)
	}
	var now []int64
	if ended {
		now, f.waiting = f.admit(f.waiting)
	}
	f.mu.Unlock()
	if len(now) > 0 {
		if _, err := f.acquire(ctx, now); err != nil {
			f.log.Warn("jobs held back for fair share not acquired; asked again when the next job ends", "err", err)
		}
	}
	return msg, nil
}

// AcquireJobs acquires, of ids, those whose repository has room; the
// others wait.
func (f *fairShare) AcquireJobs(ctx context.Context, ids []int64) ([]int64, error) {
	f.mu.Lock()
	now, later := f.admit(ids)
	for _, id := range later {
		if !slices.Contains(f.waiting, id) {
			f.waiting = append(f.waiting, id)
		}
	}
	f.mu.Unlock()
	if len(later) > 0 {
		f.log.Info("jobs held back: their repository holds its share of the scale set", "held", len(later), "limit", f.limit)
	}
	if len(now) == 0 {
		return nil, nil
	}
	return f.acquire(ctx, now)
}

// admit splits ids into those their repository's share has room for
// (counting each admitted) and the rest, in order; those admitted count
// as held until acquire says otherwise. f.mu is held.
func (f *fairShare) admit(ids []int64) (now, later []int64) {
	for _, id := range ids {
		repo := f.repoOf[id]
		if f.held[repo] == nil {
			f.held[repo] = map[int64]bool{}
		}
		if len(f.held[repo]) < f.limit {
			f.held[repo][id] = true
			now = append(now, id)
		} else {
			later = append(later, id)
		}
	}
	return now, later
}

// acquire asks GitHub for ids; those it did not give (taken by another
// session, or gone) hold no share. On an error none was acquired: they
// wait again, first.
func (f *fairShare) acquire(ctx context.Context, ids []int64) ([]int64, error) {
	got, err := f.Client.AcquireJobs(ctx, ids)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(got, id) {
			delete(f.held[f.repoOf[id]], id)
		}
	}
	if err != nil {
		f.waiting = append(slices.Clone(ids), f.waiting...)
	}
	return got, err
}
