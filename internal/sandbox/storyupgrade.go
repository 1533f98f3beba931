package sandbox

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
)

// A newer actions/runner release, taken while idle.
//
// GitHub sends an update message to a listener behind its latest release
// that did not configure --disableupdate (a just-in-time runner cannot),
// and the job then waits while the runner updates itself (Runner.cs,
// SelfUpdater.cs). The story publishes a release on the fake github.com
// while the pool idles, lets refresh learn it, and checks that the idle
// instances install it before a workflow claims them: the next workflow's
// jobs run on it and no runner is ever sent an update message.

// published is what the story remembers of the release it published.
type published struct {
	version   string
	published time.Time
	updates   int // update messages sent before it was published
}

// newRelease publishes a release newer than every pinned one and records
// how the pool's idle instances moved to it before their next claim.
func (st *Story) newRelease(ctx context.Context, pool string, idle []string) {
	start := time.Now()
	st.rel = published{version: NextRunnerRelease(), published: start, updates: len(st.sb.GitHub.UpdateMessages())}
	v := st.rel.version
	step := Step{Name: "a newer actions/runner release: the idle " + pool + " pool installs it before its next claim",
		Want: fmt.Sprintf("refresh points %s at v%s; its %d idle instances report it, none claimed meanwhile", pool, v, len(idle))}
	if err := st.sb.PublishRunnerRelease(v); err != nil {
		step.Got = "publish: " + err.Error()
		st.record(step)
		return
	}
	// Refresh, as its schedule would (its first firing is a minute after
	// deploy): it asks GitHub again once RunnerReleasesEvery has passed.
	learned, took, failure := time.Duration(0), 0.0, ""
	for deadline := start.Add(20 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(500 * time.Millisecond) {
		var out refresh.Output
		if err := st.invoke(ctx, bundle.HandlerRefresh, map[string]any{}, &out); err != nil {
			failure = err.Error()
			continue
		}
		if p, err := st.store.GetPoolConfig(ctx, pool); err == nil && p.LatestTarget != nil && p.LatestTarget.Version == v {
			learned, took = time.Since(start), out.ElapsedSeconds
			break
		}
	}
	if learned == 0 {
		step.Got, step.Took = fmt.Sprintf("refresh did not point %s at v%s within 20s %s", pool, v, failure), time.Since(start)
		st.record(step)
		return
	}
	// Each idle agent stages the target beside its install and swaps it
	// in on a pass with no runner configured, then reports what the
	// install says it is.
	var moved []string
	stillIdle := true
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(300 * time.Millisecond) {
		moved, stillIdle = st.reporting(ctx, pool, idle, v)
		if len(moved) == len(idle) || !stillIdle {
			break
		}
	}
	downloads := st.sb.GitHub.Count(fakegithub.CountReleaseDownload)
	step.Got = fmt.Sprintf("refresh pointed %s at v%s %.1fs after GitHub published it (that refresh took %.1fs); %d/%d idle instances report v%s %.1fs after that (%d release downloads in all so far)",
		pool, v, learned.Seconds(), took, len(moved), len(idle), v, (time.Since(start) - learned).Seconds(), downloads)
	if !stillIdle {
		step.Got += "; an instance left the pool meanwhile"
	}
	step.Took, step.OK = time.Since(start), len(moved) == len(idle) && len(idle) > 0 && stillIdle
	st.record(step)
}

// reporting lists the instances of ids whose record reports version, and
// says whether all of ids are still idle.
func (st *Story) reporting(ctx context.Context, pool string, ids []string, version string) (moved []string, idle bool) {
	recs, err := st.store.ByPoolState(ctx, pool, state.Idle, time.Time{})
	if err != nil {
		return nil, true
	}
	byID := map[string]bool{}
	for _, r := range recs {
		byID[r.ID] = true
		if rec, err := st.store.Get(ctx, r.Key); err == nil && rec.RunnerVersion == version && slices.Contains(ids, r.ID) {
			moved = append(moved, r.ID)
		}
	}
	idle = true
	for _, id := range ids {
		idle = idle && byID[id]
	}
	sort.Strings(moved)
	return moved, idle
}

// onRelease judges a workflow's jobs after the release: each ran on a
// listener that announced the release, and no runner was sent an update
// message while they waited.
func (st *Story) onRelease(done []fakegithub.Job, version string, updatesBefore int) (string, bool) {
	other := map[string]int{}
	for _, j := range done {
		if j.RunnerVersion != version {
			other[j.RunnerVersion]++
		}
	}
	updates := st.sb.GitHub.UpdateMessages()[updatesBefore:]
	got := fmt.Sprintf("; %d on runner v%s, %d update messages sent meanwhile", len(done)-sum(other), version, len(updates))
	for v, n := range other {
		got += fmt.Sprintf("; %d on v%q", n, v)
	}
	if len(updates) > 0 {
		got += fmt.Sprintf(" (first: %s v%s → v%s)", updates[0].Runner, updates[0].From, updates[0].To)
	}
	return got, len(other) == 0 && len(done) > 0 && len(updates) == 0
}

// checkRelease checks the pools since the release: every live instance
// runs it (idle ones moved, new ones booted on it) and no runner was sent
// an update message.
func (st *Story) checkRelease(ctx context.Context) {
	v := st.rel.version
	if v == "" {
		return
	}
	look := func() (string, bool) {
		// The index finds the live records; one batch read gets each
		// whole (the index does not project runnerVersion).
		var ids []string
		poolOf := map[string]string{}
		for _, p := range Pools {
			for _, s := range []state.State{state.Created, state.Claimed, state.Running, state.Idle} {
				recs, err := st.store.ByPoolState(ctx, p, s, time.Time{})
				if err != nil {
					return err.Error(), false
				}
				for _, r := range recs {
					ids, poolOf[r.ID] = append(ids, r.ID), p
				}
			}
		}
		pools, err := st.store.ListPoolConfigs(ctx)
		if err != nil {
			return err.Error(), false
		}
		role := state.RolesByPool(pools)
		full, err := st.store.ByInstanceID(ctx, ids, func(id string) []string { return []string{role[poolOf[id]]} })
		if err != nil {
			return err.Error(), false
		}
		versions, live := map[string]int{}, len(full)
		for _, rec := range full {
			versions[rec.RunnerVersion]++
		}
		var parts []string
		for ver, n := range versions {
			parts = append(parts, fmt.Sprintf("%d on %q", n, ver))
		}
		sort.Strings(parts)
		updates := len(st.sb.GitHub.UpdateMessages()) - st.rel.updates
		return fmt.Sprintf("%d live instances: %s; %d update messages since the release", live, strings.Join(parts, ", "), updates),
			live > 0 && versions[v] == live && updates == 0
	}
	// An instance that has just booted (the token pool's pre-warmed ones)
	// reports its runner's version a moment later: "" is not yet, any
	// other version is wrong at once. Looked at again for up to 30 s.
	st.check(fmt.Sprintf("since v%s: every instance runs it, none was sent an update", v),
		fmt.Sprintf("every live instance reports v%s; 0 update messages", v), func() (string, bool) {
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
				got, ok := look()
				if ok || time.Now().After(deadline) || ctx.Err() != nil || !strings.Contains(got, `on ""`) {
					return got, ok
				}
			}
		})
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
