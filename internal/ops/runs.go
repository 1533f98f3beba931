package ops

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// RunSummary is one run in flight: a run that holds instances now.
type RunSummary struct {
	ID        string              `json:"runId"`
	Pool      string              `json:"pool"`
	Status    state.RunStatus     `json:"status"`
	Label     string              `json:"label,omitempty"`
	CreatedAt int64               `json:"createdAt"`
	Instances map[state.State]int `json:"instances"`
}

// Runs lists the runs in flight: those whose instances are created,
// claimed or running now (the by-pool-state index finds them; a run with
// no instance left is not in flight). Sorted by when they began.
func Runs(ctx context.Context, r Reader) ([]RunSummary, error) {
	pools, err := r.ListPoolConfigs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	byRun := map[string]*RunSummary{}
	for _, p := range pools {
		held, err := inFlight(ctx, r, p.Name)
		if err != nil {
			return nil, err
		}
		for id, counts := range held {
			byRun[id] = &RunSummary{ID: id, Pool: p.Name, Instances: counts}
		}
	}
	out := make([]RunSummary, 0, len(byRun))
	for id, s := range byRun {
		run, err := r.GetRun(ctx, id)
		if err != nil && !state.IsNotFound(err) {
			return nil, fmt.Errorf("run %s: %w", id, err)
		}
		if run != nil {
			s.Status, s.Label, s.CreatedAt = run.Status, run.Label, run.CreatedAt
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b RunSummary) int {
		return cmp.Or(cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// inFlight counts, per run, the pool's instances that serve it (created,
// claimed or running for it); an instance warming with no run is none's.
func inFlight(ctx context.Context, r Reader, pool string) (map[string]map[state.State]int, error) {
	runs := map[string]map[state.State]int{}
	for _, st := range []state.State{state.Created, state.Claimed, state.Running} {
		insts, err := live(ctx, r, pool, st)
		if err != nil {
			return nil, err
		}
		for _, in := range insts {
			if in.RunID == "" {
				continue
			}
			if runs[in.RunID] == nil {
				runs[in.RunID] = map[state.State]int{}
			}
			runs[in.RunID][st]++
		}
	}
	return runs, nil
}
