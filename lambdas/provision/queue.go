package provision

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Waiting for capacity (issue 32). A pool at its cap does not fail the
// workflows beyond it: each provision takes what the pool gives (idle
// instances, then launches within maxInstances) and, short, waits in the
// pool's queue (state/capacity_queue.go) for runs to release instances or
// refresh and scale-down to end them, in the order the provisions began.
// It stops waiting when a boot would no longer fit its deadline: with at
// least minInstanceCount runners the run goes on with them (its jobs queue
// on its label), else it fails with the capacity error as before.

// queuePoll is how often a waiting provision looks again.
const queuePoll = 2 * time.Second

// queueHold is how long a place in the capacity queue lasts unless its
// provision renews it (every queuePoll): a killed provision's place holds
// the provisions behind it this long at most.
const queueHold = 15 * time.Second

// acquire gives the run its instances: claimed from the pool, launched, or
// waited for in turn.
func (p *provisioner) acquire(ctx context.Context, reg *state.Registration) error {
	queued, since := false, time.Time{}
	defer func() {
		if queued {
			p.queued = time.Since(since)
			if err := storeOf(p.d).Unqueue(context.WithoutCancel(ctx), p.req.Pool, p.req.RunID); err != nil {
				p.log.Warn("leave the pool's capacity queue", "err", err)
			}
		}
	}()
	var short error
	for {
		need := p.req.count - len(p.members())
		if need <= 0 {
			return nil
		}
		ahead, err := storeOf(p.d).Ahead(ctx, p.req.Pool, p.req.RunID, p.start)
		if err != nil {
			return err
		}
		if ahead == 0 {
			need -= p.claim(ctx, need, reg)
			if need > 0 {
				need -= p.startStopped(ctx, need, reg)
			}
			if need > 0 {
				_, err := p.launch(ctx, need, reg)
				// Short of room for all: launch what fits now.
				var ce *state.CapacityError
				if errors.As(err, &ce) && ce.Max-ce.Live-ce.Reserved > 0 {
					_, err = p.launch(ctx, ce.Max-ce.Live-ce.Reserved, reg)
				}
				var lf *launchFailure
				if errors.As(err, &lf) {
					// EC2 stayed short until the deadline: with enough
					// runners the run goes on, as at the pool's cap.
					if have := len(p.members()); have >= p.req.min {
						p.log.Warn("going on with fewer runners than asked: EC2 stayed short of capacity", "have", have, "asked", p.req.count, "err", err)
						p.req.count = have
						return nil
					}
					return err
				}
				if err != nil && !state.IsPoolAtCap(err) {
					return err
				}
				short = err
			}
			if p.req.count-len(p.members()) <= 0 {
				return nil
			}
		}
		if short == nil {
			short = fmt.Errorf("pool %s: %d earlier provisions wait for its capacity", p.req.Pool, ahead)
		}
		dl, _ := ctx.Deadline()
		if time.Until(dl) < state.D(p.req.pool.Timings.BootTime)+queuePoll {
			if have := len(p.members()); have >= p.req.min {
				p.log.Info("going on with fewer runners than asked: the pool stayed at its cap", "have", have, "asked", p.req.count)
				p.req.count = have
				return nil
			}
			return short
		}
		// A place is held for queueHold and renewed at every look, so the
		// place of a provision that died (killed, timed out) lapses in
		// seconds instead of holding every provision behind it until its
		// deadline. Renewal keeps the place: the order is by when each
		// provision began.
		until := time.Now().Add(queueHold)
		if dl.Before(until) {
			until = dl
		}
		err = storeOf(p.d).Queue(ctx, p.req.Pool, p.req.RunID, p.repo, p.start, until, p.req.pool.MaxQueuedPerRepository)
		if queued && err != nil {
			// A throttled renewal costs at most the place, which the next
			// look takes back.
			p.log.Warn("renew the place in the pool's capacity queue", "err", err)
		}
		if !queued {
			if state.ClauseOf(err) == state.ClauseMaxQueued {
				// Its repository holds its places already: no waiting
				// behind itself; with enough runners it goes on, as at
				// the deadline.
				if have := len(p.members()); have >= p.req.min {
					p.log.Info("going on with fewer runners than asked: the repository holds its places in the capacity queue", "have", have, "asked", p.req.count)
					p.req.count = have
					return nil
				}
				return err
			}
			if err != nil {
				return err
			}
			queued, since = true, time.Now()
			p.log.Info("waiting for the pool's capacity", "ahead", ahead, "reason", short.Error())
		}
		select {
		case <-ctx.Done():
			return short
		case <-time.After(queuePoll):
		}
	}
}
