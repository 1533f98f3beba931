package sandbox

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
)

// keptIdle is how many idle instances the pool's window active now keeps.
func (st *Story) keptIdle(ctx context.Context, pool string) int {
	p, err := st.store.GetPoolConfig(ctx, pool)
	if err != nil {
		return 0
	}
	if w, ok := p.ActiveWindow(time.Now()); ok {
		return w.IdleCount
	}
	return 0
}

// prewarm invokes refresh, as its schedule would, until the pool holds the
// idle count of its active window in clean, pooled instances no provision
// launched, and records the step. It returns the instances refresh
// pre-warmed (none when no window of the pool is active).
func (st *Story) prewarm(ctx context.Context, pool string) []string {
	want := st.keptIdle(ctx, pool)
	if want == 0 {
		return nil
	}
	start := time.Now()
	launched := map[string]bool{}
	pooled := 0
	var failure error
	for deadline := start.Add(90 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(500 * time.Millisecond) {
		var out refresh.Output
		if err := st.invoke(ctx, bundle.HandlerRefresh, map[string]any{}, &out); err != nil {
			failure = err
			continue
		}
		for _, d := range out.Prewarmed {
			launched[d.InstanceID] = true
		}
		// The refresh schedule fires too, and may have pre-warmed first.
		for _, id := range st.unclaimedOf(ctx, pool) {
			launched[id] = true
		}
		if pooled = st.pooledOf(ctx, pool, launched); pooled >= want {
			break
		}
	}
	ids := make([]string, 0, len(launched))
	for id := range launched {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	registered := 0
	for _, r := range st.sb.GitHub.Runners() {
		if inst, ok := github.InstanceOf(r.Name); ok && launched[inst] {
			registered++
		}
	}
	got := fmt.Sprintf("%d launched with no run, %d pooled in %.1fs, %d runners registered for them", len(launched), pooled, time.Since(start).Seconds(), registered)
	if failure != nil && pooled < want {
		got += "; refresh: " + failure.Error()
	}
	st.record(Step{Name: fmt.Sprintf("refresh pre-warms %s before its first workflow (its idle window keeps %d)", pool, want),
		Want: fmt.Sprintf("%d pre-warmed instances idle and pooled, no runner registered", want), Got: got, Took: time.Since(start),
		OK: len(launched) == want && pooled == want && registered == 0})
	return ids
}

// pooledOf counts the instances of ids that are idle, clean and in the
// pool's queue.
func (st *Story) pooledOf(ctx context.Context, pool string, ids map[string]bool) int {
	idle, err := st.store.ByPoolState(ctx, pool, state.Idle, time.Time{})
	if err != nil {
		return 0
	}
	n := 0
	for _, in := range idle {
		if !ids[in.ID] {
			continue
		}
		if rec, err := st.store.Get(ctx, in.Key); err == nil && rec.Clean() && rec.PooledAt != 0 {
			n++
		}
	}
	return n
}

// unclaimedOf lists the pool's created and idle instances that no workflow
// of the story launched and no run holds: what refresh pre-warmed.
func (st *Story) unclaimedOf(ctx context.Context, pool string) []string {
	var ids []string
	for _, s := range []state.State{state.Created, state.Idle} {
		insts, err := st.store.ByPoolState(ctx, pool, s, time.Time{})
		if err != nil {
			continue
		}
		st.mu.Lock()
		for _, in := range insts {
			if !st.Launched[in.ID] && in.RunID == "" {
				ids = append(ids, in.ID)
			}
		}
		st.mu.Unlock()
	}
	return ids
}
