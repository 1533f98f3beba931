package listener

import (
	"context"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The records, not the messages, are what the listener trusts to find its
// runs: a listener killed after it acknowledged a JobCompleted, or between
// a claim and its answer, finds its runs again from the instances' records
// when it starts (adopt), and a runner that ended without a message seen
// (a job whose message was lost, a runner GitHub removed) is found by its
// agent asking for a next runner (reconcile).

// reconcileEvery is how often the live runs' records are read.
const reconcileEvery = 10 * time.Second

// adopt takes over the standing runs a previous listener of the scale set
// left: a run whose instance runs its runner is live again; one still
// being claimed or launched lost its provision with that listener and is
// released (its instance expired: refresh ends it).
func (s *Scaler) adopt(ctx context.Context) error {
	for _, st := range []state.State{state.Running, state.Claimed, state.Created} {
		recs, err := s.d.Store.ByPoolState(ctx, s.pool.Name, st, time.Time{})
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if !strings.HasPrefix(rec.RunID, s.runPrefix()) {
				continue
			}
			if st != state.Running {
				s.log.Warn("standing run left half-provisioned by an earlier listener: released", "runId", rec.RunID, "instanceId", rec.ID)
				s.release(rec.RunID)
				continue
			}
			s.mu.Lock()
			s.live[rec.RunID] = &standing{instanceID: rec.ID, ready: true}
			s.mu.Unlock()
			s.log.Info("standing run adopted", "runId", rec.RunID, "instanceId", rec.ID)
		}
	}
	return nil
}

// reconcileLoop reads the live runs' records every reconcileEvery until
// ctx ends.
func (s *Scaler) reconcileLoop(ctx context.Context) {
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.reconcile(ctx)
		}
	}
}

// reconcile releases every live run whose runner ended (its agent asks for
// a next one, which a standing run never gets) or whose instance left it
// (retired, ended, or released by someone else).
func (s *Scaler) reconcile(ctx context.Context) {
	s.mu.Lock()
	ready := map[string]string{}
	for id, st := range s.live {
		if st.ready {
			ready[id] = st.instanceID
		}
	}
	s.mu.Unlock()
	for id, inst := range ready {
		rec, err := s.d.Store.Get(ctx, s.pool.RecordKey(inst))
		var why string
		switch {
		case state.IsNotFound(err):
			why = "its record is gone"
		case err != nil:
			s.log.Warn("record of a standing run not read", "runId", id, "err", err)
			continue
		case rec.RunID != id || rec.State != state.Running:
			why = "its instance is " + string(rec.State) + " (run " + rec.RunID + ")"
		case rec.JITWanted() > 0:
			why = "its runner ended (the agent asks for another)"
		default:
			continue
		}
		s.mu.Lock()
		delete(s.live, id)
		s.mu.Unlock()
		s.log.Info("standing run ended: releasing it", "runId", id, "why", why)
		s.release(id)
	}
}
