package refresh

import (
	"context"
	"fmt"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Runner versions that keep up, off the job's clock.
//
// Refresh learns actions/runner's latest release (at most every
// ReleasesEvery), resolves each pool's target, points every live record of
// the pool at it (the agent of an idle instance brings its install there
// between assignments; a new instance installs it at boot) and retires an
// idle instance whose agent reports a version GitHub stops serving within
// retireMargin, unless that version is the pool's target (a replacement
// would install the same). The pool's versions and the time left before
// the first of them is refused go out as metrics (RunnerVersionSecondsLeft
// raises the monitoring's alarm).

// DefaultReleasesEvery is how often refresh asks GitHub for the latest
// release.
const DefaultReleasesEvery = time.Hour

// retireMargin: an idle instance is retired this long before GitHub would
// refuse its version, so no claim lands on it at the edge.
const retireMargin = time.Hour

// keepReleases bounds the releases item.
const keepReleases = 20

// learnReleases returns the releases the control plane knows, asking GitHub
// when the item is older than every. A failed lookup fails the refresh
// when a pool follows "latest" (it cannot move), and is logged otherwise.
func (r *refresher) learnReleases(ctx context.Context, pools []state.PoolConfig, every time.Duration) []runnerrelease.Release {
	if len(pools) == 0 {
		return nil
	}
	cached, err := storeOf(r.d).GetReleases(ctx)
	if err != nil {
		r.fail(fmt.Errorf("read the runner releases: %w", err))
		return nil
	}
	if !cached.Stale(r.now, every) {
		return cached.Releases
	}
	follows := false
	for _, p := range pools {
		follows = follows || p.Runner.Version == runnerrelease.Latest
	}
	next := state.Releases{Releases: cached.Releases, FetchedAt: r.now.Unix()}
	tag, published, body, err := r.d.GitHub.LatestRunnerRelease(ctx, pools[0].Owner)
	var rel runnerrelease.Release
	if err == nil {
		rel, err = runnerrelease.FromRelease(tag, published, body)
	}
	if err != nil {
		next.Error = err.Error()
		if follows {
			r.fail(fmt.Errorf("learn the latest actions/runner release: %w", err))
		} else {
			r.d.Log.Warn("learn the latest actions/runner release", "err", err)
		}
	} else {
		next.Releases = runnerrelease.Merge(cached.Releases, rel, keepReleases)
	}
	if err := storeOf(r.d).PutReleases(ctx, next); err != nil {
		r.fail(err)
	}
	return next.Releases
}

// moveTarget points a pool that follows "latest" at the newest release
// it may run. It is done before, and apart from, the pool's records: a
// new instance installs the pool's target at boot, so the move must not
// wait for a refresh that can read every record (a throttled read of
// them leaves the pool's instances alone, not its target).
func (r *refresher) moveTarget(ctx context.Context, p *state.PoolConfig) {
	if p.Runner.Version != runnerrelease.Latest || p.Runner.Arch == "" {
		return
	}
	// Downloaded from where the releases were learned: github.com, or
	// what stands in for it.
	repo := r.d.GitHub.RunnerURL("actions/runner")
	t, ok, err := runnerrelease.Resolve(runnerrelease.Latest, "", "", p.Runner.Arch, r.releases, repo)
	if err != nil {
		r.fail(fmt.Errorf("pool %s: %w", p.Name, err))
		return
	}
	if !ok || p.LatestTarget != nil && *p.LatestTarget == t {
		return
	}
	if err := storeOf(r.d).SetLatestTarget(ctx, p.Name, t); err != nil {
		r.fail(err)
		return
	}
	p.LatestTarget = &t
	r.d.Log.Info("pool moves to a new runner release", "pool", p.Name, "version", t.Version)
}

// versions handles one pool's runner versions over its live records, the
// pool's target moved first (moveTarget).
func (r *refresher) versions(ctx context.Context, p *state.PoolConfig, live []*state.Instance) {
	target := p.RunnerTarget()
	counts := map[string]int{}
	left, leftKnown := time.Duration(0), false
	note := func(v string) {
		if at, ok := runnerrelease.RefusedAt(v, r.releases); ok && (!leftKnown || at.Sub(r.now) < left) {
			left, leftKnown = at.Sub(r.now), true
		}
	}
	if target != nil {
		note(target.Version)
	}
	for _, inst := range live {
		v := inst.RunnerVersion
		if v == "" {
			v = "unknown"
		}
		counts[v]++
		note(inst.RunnerVersion)
		if target != nil && (inst.RunnerTarget == nil || *inst.RunnerTarget != *target) {
			if _, err := storeOf(r.d).SetRunnerTarget(ctx, inst.Key, p.Name, *target); err != nil && state.ClauseOf(err) == "" {
				r.fail(err)
			}
		}
		if inst.State != state.Idle || target != nil && inst.RunnerVersion == target.Version {
			continue
		}
		if at, ok := runnerrelease.RefusedAt(inst.RunnerVersion, r.releases); ok && at.Before(r.now.Add(retireMargin)) {
			r.expire(ctx, p, inst, KindRetired, fmt.Sprintf("its runner %s is no longer served by GitHub from %s", inst.RunnerVersion, at.UTC().Format(time.RFC3339)))
		}
	}
	if r.out.RunnerVersions == nil {
		r.out.RunnerVersions = map[string]PoolVersions{}
	}
	pv := PoolVersions{Instances: counts}
	if target != nil {
		pv.Target = target.Version
	}
	if leftKnown {
		s := int64(left / time.Second)
		pv.SecondsLeft = &s
	}
	r.out.RunnerVersions[p.Name] = pv
}

// PoolVersions is a pool's runner versions as refresh saw them.
type PoolVersions struct {
	// Target is the release the pool's instances are to run ("" none).
	Target string `json:"target,omitempty"`
	// Instances counts the live records by the version their agent
	// reports ("unknown": not reported yet).
	Instances map[string]int `json:"instances"`
	// SecondsLeft is how long until GitHub refuses the oldest of the
	// pool's versions (its target's included), from the releases known;
	// negative: refused already; absent: no deadline known.
	SecondsLeft *int64 `json:"secondsLeft,omitempty"`
}
