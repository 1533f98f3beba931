package cost

import (
	"context"
	"fmt"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Source is what the report reads of the state table (a *state.Store).
type Source interface {
	Usage(ctx context.Context, from, to time.Time) ([]state.Span, error)
	ListPoolConfigs(ctx context.Context) ([]state.PoolConfig, error)
	ByPoolState(ctx context.Context, pool string, st state.State, before time.Time) ([]state.Instance, error)
	GetMany(ctx context.Context, keys []state.Key) (map[state.Key]*state.Instance, error)
	GetRun(ctx context.Context, runID string) (*state.Run, error)
}

// Read builds the report of [from, to): the ledger's spans that ended in
// it and, when to is now, the open spans of the live records up to now.
func Read(ctx context.Context, src Source, prices PriceBook, from, to time.Time, by By, now time.Time) (*Report, error) {
	spans, err := src.Usage(ctx, from, to)
	if err != nil {
		return nil, err
	}
	pools, err := src.ListPoolConfigs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	volumes := map[string]state.RootVolume{}
	for _, p := range pools {
		if p.RootVolume != nil {
			volumes[p.Name] = *p.RootVolume
		}
	}
	if !to.Before(now) {
		open, err := openSpans(ctx, src, pools, now)
		if err != nil {
			return nil, err
		}
		spans = append(spans, open...)
	}
	runs := map[string]*RunInfo{}
	for _, sp := range spans {
		if sp.RunID == "" {
			continue
		}
		if _, seen := runs[sp.RunID]; seen {
			continue
		}
		run, err := src.GetRun(ctx, sp.RunID)
		if err != nil && !state.IsNotFound(err) {
			return nil, fmt.Errorf("read run %s: %w", sp.RunID, err)
		}
		runs[sp.RunID] = nil
		if run != nil {
			info := &RunInfo{Repository: run.Repository, CreatedAt: run.CreatedAt, ScaleSet: run.ScaleSet != ""}
			if info.Repository == "" && run.Job != nil {
				info.Repository = run.Job.Repository
			}
			info.JobQueue, info.JobQueueOK = run.Job.QueueSeconds()
			runs[sp.RunID] = info
		}
	}
	r := Build(ctx, spans, runs, volumes, prices, from, to, by)
	r.Limits = limits(spans, runs)
	return r, nil
}

// openSpans reads the live records of every pool (the index, then the
// records: the index does not hold stateAt) and their spans up to now.
func openSpans(ctx context.Context, src Source, pools []state.PoolConfig, now time.Time) ([]state.Span, error) {
	var keys []state.Key
	for _, p := range pools {
		for _, st := range state.LiveStates {
			insts, err := src.ByPoolState(ctx, p.Name, st, time.Time{})
			if err != nil {
				return nil, err
			}
			for _, in := range insts {
				keys = append(keys, in.Key)
			}
		}
	}
	recs, err := src.GetMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	var out []state.Span
	for _, rec := range recs {
		if sp, ok := rec.OpenSpan(now.Unix()); ok {
			out = append(out, sp)
		}
	}
	return out, nil
}

// limits says what the figures leave out, for this window.
func limits(spans []state.Span, runs map[string]*RunInfo) []string {
	gone := 0
	for _, info := range runs {
		if info == nil {
			gone++
		}
	}
	var out []string
	if gone > 0 {
		out = append(out, fmt.Sprintf("%d runs' items are gone (kept 7 days): their repository and queue time are unknown", gone))
	}
	return out
}
