package listener

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Giving back runners the scale set no longer needs. GitHub's count of
// assigned jobs falls without a job ending on one of ours when a job is
// cancelled before a runner took it, or a run is cancelled while its jobs
// wait: the standing run started for it then holds a warm instance, with
// a runner waiting, for nobody. Left alone it would stay claimed for as
// long as its lease is renewed, out of the pool's reach (no other
// workflow, no scale-down).
//
// Never a job killed: a surplus run is released only after GitHub deleted
// its runner, and GitHub refuses to delete a runner that runs a job (422,
// github.IsBusy); such a run is marked started and kept. A job GitHub was
// about to hand that runner goes to another idle runner of the scale set,
// or the count rises again and a run starts for it (from the warm pool:
// a fraction of a second in the sandbox).

// trimAfter is how long a ready runner waits with no job before it may be
// given back as surplus: long enough for GitHub to hand an assigned job to
// a runner that just came online (seconds), short enough that a cancelled
// job's instance is back in the pool within a reconcile pass or two.
const trimAfter = 15 * time.Second

// toTrim picks the standing runs to give back: as many as the live runs
// (less those being given back already) exceed the runners GitHub's count
// wants, among those ready for trimAfter whose runner started no job;
// those that waited longest first.
func toTrim(assigned, maxRunners int, runs map[string]standing, now time.Time) []string {
	surplus := len(runs) - min(assigned, maxRunners)
	var idle []string
	for id, st := range runs {
		switch {
		case st.trimming:
			surplus--
		case st.ready && !st.adopted && !st.started && !st.readyAt.IsZero() && now.Sub(st.readyAt) >= trimAfter:
			idle = append(idle, id)
		}
	}
	if surplus <= 0 {
		return nil
	}
	slices.SortFunc(idle, func(a, b string) int {
		if c := runs[a].readyAt.Compare(runs[b].readyAt); c != 0 {
			return c
		}
		if a < b {
			return -1
		}
		return 1
	})
	return idle[:min(surplus, len(idle))]
}

// errMovedOn: the run's instance record is no longer the run's running
// instance; its runners are not the run's to delete.
var errMovedOn = errors.New("its instance moved on from the run")

// trim gives back the surplus runs toTrim picks.
func (s *Scaler) trim(ctx context.Context) {
	s.mu.Lock()
	runs := make(map[string]standing, len(s.live))
	for id, st := range s.live {
		runs[id] = *st
	}
	ids := toTrim(s.assigned, s.max, runs, time.Now())
	for _, id := range ids {
		s.live[id].trimming = true
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.trimOne(ctx, id, runs[id].instanceID)
	}
}

// trimOne deletes the runner of surplus run id, then releases the run; a
// busy runner keeps its run.
func (s *Scaler) trimOne(ctx context.Context, id, instanceID string) {
	err := s.deleteRunners(ctx, id, instanceID)
	s.mu.Lock()
	st := s.live[id]
	if st == nil {
		s.mu.Unlock()
		return // released meanwhile (its job ended, its instance left)
	}
	st.trimming = false
	if github.IsBusy(err) {
		st.started = true
	}
	s.mu.Unlock()
	switch {
	case github.IsBusy(err):
		s.log.Info("surplus runner runs a job: kept", "runId", id)
	case err != nil:
		s.log.Warn("surplus runner not deleted; asked again next pass", "runId", id, "err", err)
	default:
		s.log.Info("surplus runner deleted: releasing its run", "runId", id, "instanceId", instanceID)
		s.release(id)
	}
}

// deleteRunners deletes every runner the record of run id's instance
// names (controlplane.RunnerIDs); a record that moved on to another run
// is left alone (reconcile releases the run).
func (s *Scaler) deleteRunners(ctx context.Context, id, instanceID string) error {
	rec, err := storeOf(s.d.Deps).Get(ctx, s.pool.RecordKey(instanceID))
	if err != nil {
		return err
	}
	if rec.RunID != id || rec.State != state.Running {
		return errMovedOn
	}
	return s.d.DeleteInstanceRunners(ctx, rec)
}
