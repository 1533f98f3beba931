package ops

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Event is one change tail saw in a run or one of its instances.
type Event struct {
	At       time.Time `json:"at"`
	Instance string    `json:"instanceId,omitempty"`
	What     string    `json:"what"`
}

// runSnapshot is what tail compares between two reads.
type runSnapshot struct {
	status    state.RunStatus
	detail    string
	instances map[string]instanceSnapshot
}

type instanceSnapshot struct {
	state, runID, assignment string
	signals                  map[string]string // name → detail, of the current assignment
}

func snapshotOf(run *state.Run, recs map[string]*state.Instance) runSnapshot {
	s := runSnapshot{status: run.Status, detail: run.Detail, instances: map[string]instanceSnapshot{}}
	for id, rec := range recs {
		is := instanceSnapshot{state: string(rec.State), runID: rec.RunID, assignment: rec.Assignment, signals: map[string]string{}}
		for _, name := range state.Signals {
			if sig, ok := rec.SignalFor(name); ok {
				is.signals[name] = sig.Detail
			}
		}
		s.instances[id] = is
	}
	return s
}

// changes lists what differs from prev to next (prev nil: everything).
func changes(prev *runSnapshot, next runSnapshot, runID string, at time.Time) []Event {
	var out []Event
	if prev == nil || prev.status != next.status {
		what := "run " + string(next.status)
		if next.detail != "" && next.detail != string(next.status) {
			what += ": " + next.detail
		}
		out = append(out, Event{At: at, What: what})
	}
	for _, id := range slices.Sorted(maps.Keys(next.instances)) {
		n := next.instances[id]
		var p *instanceSnapshot
		if prev != nil {
			if old, ok := prev.instances[id]; ok {
				p = &old
			}
		}
		switch {
		case p == nil:
			out = append(out, Event{At: at, Instance: id, What: "instance " + describe(n, runID)})
		case p.state != n.state || p.runID != n.runID || p.assignment != n.assignment:
			out = append(out, Event{At: at, Instance: id, What: fmt.Sprintf("instance %s → %s", p.state, describe(n, runID))})
		}
		for _, name := range state.Signals {
			detail, ok := n.signals[name]
			if !ok {
				continue
			}
			if p != nil && p.assignment == n.assignment {
				if old, had := p.signals[name]; had && old == detail {
					continue
				}
			}
			what := "signal " + name
			if detail != "" {
				what += " (" + detail + ")"
			}
			out = append(out, Event{At: at, Instance: id, What: what})
		}
	}
	return out
}

func describe(s instanceSnapshot, runID string) string {
	switch {
	case s.runID == runID:
		return s.state
	case s.runID == "":
		return s.state + " (no longer the run's)"
	default:
		return s.state + " for run " + s.runID + " (no longer this run's)"
	}
}

// over says whether the run is done: released or failed, and none of its
// instances serves it any more.
func (s runSnapshot) over(runID string) bool {
	if s.status != state.RunReleased && s.status != state.RunFailed {
		return false
	}
	for _, in := range s.instances {
		if in.runID == runID && in.state != string(state.Terminated) {
			return false
		}
	}
	return true
}

// Tail follows a run: it reads the run and its instances' records every
// interval and emits what changed (the run's status, each instance's state
// and run, the signals of its current assignment), until the run is
// released or failed and none of its instances serves it, or ctx ends. A
// failed read is retried at the next interval; only a run that does not
// exist is an error.
func Tail(ctx context.Context, r Reader, runID string, every time.Duration, emit func(Event)) error {
	if runID == "" {
		return BadInput("run id", "must not be empty")
	}
	var prev *runSnapshot
	for {
		run, err := r.GetRun(ctx, runID)
		if state.IsNotFound(err) && prev == nil {
			return BadInput("run id", fmt.Sprintf("no run %q in this table", runID))
		}
		if err == nil {
			recs, rerr := runRecords(ctx, r, run)
			if rerr == nil {
				next := snapshotOf(run, recs)
				for _, e := range changes(prev, next, runID, time.Now()) {
					emit(e)
				}
				prev = &next
				if next.over(runID) {
					emit(Event{At: time.Now(), What: "run over: every instance is back in the pool or gone"})
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}
