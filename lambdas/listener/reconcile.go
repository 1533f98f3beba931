package listener

import (
	"context"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The records, not the messages, are what the listener trusts to find its
// runs: a listener killed after it acknowledged a JobCompleted, or between
// a claim and its answer, finds its runs again from the instances' records
// when it starts (adopt), and a runner that ended without a message seen
// (a job whose message was lost, a runner GitHub removed) is found by its
// agent asking for a next runner (reconcile).
//
// Unlike a workflow's run, whose jobs wait for provision's answer, a scale
// set's job may start the moment its runner is online: a claimed instance
// of a provision that died with its listener may be running a job. It is
// never expired while its runner may be registered: once its agent says
// the runner is online it is taken as running; only a claim whose lease
// passed with no runner online is given up.

// reconcileEvery is how often the live runs' records are read.
const reconcileEvery = 10 * time.Second

// adopt takes over the standing runs a previous listener of the scale set
// left, from the instances' records.
func (s *Scaler) adopt(ctx context.Context) error {
	for _, st := range []state.State{state.Running, state.Claimed, state.Created} {
		recs, err := storeOf(s.d.Deps).InPoolState(ctx, s.pool.Name, st)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if !strings.HasPrefix(rec.RunID, s.runPrefix()) {
				continue
			}
			s.mu.Lock()
			if s.live[rec.RunID] == nil {
				s.live[rec.RunID] = &standing{instanceID: rec.ID, ready: st == state.Running, adopted: st != state.Running}
			}
			s.mu.Unlock()
			s.log.Info("standing run adopted", "runId", rec.RunID, "instanceId", rec.ID, "state", string(st))
		}
	}
	if err := s.adoptReleases(ctx); err != nil {
		return err
	}
	s.reconcile(ctx)
	return nil
}

// adoptReleases finishes the releases a previous listener began and did
// not end: it moved the instance to idle and died before the pool message
// (its record idle, not pooled, its last run one of this scale set's).
// Refresh would pool it within a minute; meanwhile the runners GitHub
// wants would launch new instances beside it. Finished here, it comes back
// in seconds and counts as being released until then, as a release of
// this listener's own does.
func (s *Scaler) adoptReleases(ctx context.Context) error {
	recs, err := storeOf(s.d.Deps).InPoolState(ctx, s.pool.Name, state.Idle)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.PooledAt != 0 || !strings.HasPrefix(rec.LastRunID, s.runPrefix()) {
			continue
		}
		s.log.Info("release an earlier listener began: finishing it", "runId", rec.LastRunID, "instanceId", rec.ID)
		s.wg.Add(1)
		s.mu.Lock()
		s.releasing++
		s.mu.Unlock()
		go s.whileReleasing(func() {
			got := s.d.Deps.FinishRelease(s.bg, &rec, s.pool)
			s.log.Info("release an earlier listener began: finished", "runId", rec.LastRunID, "instanceId", rec.ID, "pooled", got == controlplane.Released)
		})
	}
	return nil
}

// every calls f every d until ctx ends: the reconcile pass and the
// status report.
func every(ctx context.Context, d time.Duration, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

// reconcile releases every live run whose runner ended (its agent asks for
// a next one, which a standing run never gets) or whose instance left it
// (retired, ended, or released by someone else), and finishes the claims
// an earlier listener left.
func (s *Scaler) reconcile(ctx context.Context) {
	s.mu.Lock()
	known := map[string]standing{}
	for id, st := range s.live {
		if st.ready || st.adopted {
			known[id] = *st
		}
	}
	s.mu.Unlock()
	for id, st := range known {
		rec, err := storeOf(s.d.Deps).Get(ctx, s.pool.RecordKey(st.instanceID))
		if err != nil && !state.IsNotFound(err) {
			s.log.Warn("record of a standing run not read", "runId", id, "err", err)
			continue
		}
		if err == nil && st.adopted && rec.RunID == id && (rec.State == state.Claimed || rec.State == state.Created) {
			s.finishClaim(ctx, id, rec)
			continue
		}
		var why string
		switch {
		case err != nil:
			why = "its record is gone"
		case rec.RunID != id || rec.State != state.Running:
			why = "its instance is " + string(rec.State) + " (run " + rec.RunID + ")"
		case rec.JITWanted() > 0:
			why = "its runner ended (the agent asks for another)"
		default:
			if st.adopted {
				s.mu.Lock()
				if cur := s.live[id]; cur != nil {
					cur.ready, cur.adopted, cur.readyAt = true, false, time.Now()
				}
				s.mu.Unlock()
			}
			continue
		}
		s.log.Info("standing run ended: releasing it", "runId", id, "why", why)
		s.release(id)
	}
	s.trim(ctx)
}

// finishClaim decides a claim an earlier listener's provision left: its
// runner online → running (it may be running a job); the claim's lease
// passed with no runner online → released (its instance expires); else it
// is looked at again.
func (s *Scaler) finishClaim(ctx context.Context, id string, rec *state.Instance) {
	t := s.pool.Timings
	if sig, ok := rec.SignalFor(state.SignalRegOK); ok && sig.Assignment == rec.Assignment {
		_, err := storeOf(s.d.Deps).MarkRunning(ctx, rec.Ref(), state.D(t.MaxRuntime), state.D(t.RuntimeCap))
		if state.ClauseOf(err) != "" {
			// Its claim's lease passed meanwhile: its runner is online all
			// the same, and may run a job.
			_, err = storeOf(s.d.Deps).Adopt(ctx, rec.Ref(), state.D(t.MaxRuntime), state.D(t.RuntimeCap))
		}
		if err != nil {
			s.log.Warn("claim left by an earlier listener not taken as running; looked at again", "runId", id, "err", err)
			return
		}
		s.mu.Lock()
		if cur := s.live[id]; cur != nil {
			cur.ready, cur.adopted, cur.readyAt = true, false, time.Now()
		}
		s.mu.Unlock()
		s.log.Info("claim left by an earlier listener: its runner is online, the run goes on", "runId", id, "instanceId", rec.ID)
		return
	}
	if rec.Threshold > time.Now().Unix() {
		return // its agent may still start the runner
	}
	s.log.Warn("claim left by an earlier listener never got its runner online: released", "runId", id, "instanceId", rec.ID)
	s.release(id)
}
