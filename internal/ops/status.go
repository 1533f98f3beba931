package ops

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// ghrunner status: each pool's configuration and live instances, its spot
// breaker, and the last run of each scheduled function.

// StatusView is ghrunner status: the pools, and what the scheduled
// functions did last.
type StatusView struct {
	Pools []PoolStatus `json:"pools"`
	// Scheduled are the last runs of refresh and scale-down (absent:
	// not run yet).
	Scheduled []state.LastRun `json:"scheduled"`
	// ScaleSets are the pools' scale sets and what their listener saw
	// (scalesets.go).
	ScaleSets []ScaleSetView `json:"scaleSets"`
}

// Scheduled reads the last run of each scheduled function.
func Scheduled(ctx context.Context, r Reader, handlers ...string) ([]state.LastRun, error) {
	out := []state.LastRun{}
	for _, h := range handlers {
		last, err := r.GetLastRun(ctx, h)
		if err != nil {
			return nil, fmt.Errorf("last run of %s: %w", h, err)
		}
		if last != nil {
			out = append(out, *last)
		}
	}
	return out, nil
}

// PoolStatus is one pool now.
type PoolStatus struct {
	Pool         string              `json:"pool"`
	Owner        string              `json:"owner"`
	Registration string              `json:"registration"`
	MaxInstances int                 `json:"maxInstances"`
	Counts       map[state.State]int `json:"counts"`
	// IdleWindow is the window active now (the idle count scale-down
	// keeps), nil when none is: then it keeps no idle instance.
	IdleWindow *state.IdleWindow `json:"idleWindow"`
	// OldestIdleSeconds is how long the longest-pooled idle instance has
	// waited (0: none idle).
	OldestIdleSeconds int64    `json:"oldestIdleSeconds"`
	RunsInFlight      []string `json:"runsInFlight"`
	// Draining is an operator's drain (ghrunner drain).
	Draining bool `json:"draining"`
	// RunnerSpec is the pool's runner_version ("latest" or x.y.z; "" for
	// a pool written before pools had one), RunnerTarget what its
	// instances are to run now ("" none yet), RunnerVersions its live
	// instances by the version their agents report ("unknown": none yet).
	RunnerSpec     string         `json:"runnerSpec,omitempty"`
	RunnerTarget   string         `json:"runnerTarget,omitempty"`
	RunnerVersions map[string]int `json:"runnerVersions"`
	// JITRefused counts, by live instance, the just-in-time requests of
	// its current assignment the control plane refused by what they
	// would cost (absent: none).
	JITRefused map[string]int `json:"jitRefused,omitempty"`
	// SpotBreaker is a spot pool's breaker now (absent: an on-demand pool).
	SpotBreaker *SpotBreakerStatus `json:"spotBreaker,omitempty"`
}

// SpotBreakerStatus is a spot pool's breaker (state.SpotBreaker) now.
type SpotBreakerStatus struct {
	Open bool `json:"open"`
	// OpenUntil is when its launches may use spot again (0: closed).
	OpenUntil int64 `json:"openUntil,omitempty"`
	// Interruptions counts those within the breaker's window.
	Interruptions int `json:"interruptions"`
	// OnDemand says whether an open breaker launches on-demand: only
	// where the pool allows it (on_demand_fallback).
	OnDemand bool `json:"onDemand"`
}

// spotBreaker reads a spot pool's breaker (nil for an on-demand pool).
func spotBreaker(ctx context.Context, r Reader, p state.PoolConfig, now time.Time) (*SpotBreakerStatus, error) {
	if p.UsageClass != state.UsageClassSpot {
		return nil, nil
	}
	b, err := r.GetSpotBreaker(ctx, p.Name)
	if err != nil {
		return nil, fmt.Errorf("pool %s, spot breaker: %w", p.Name, err)
	}
	out := &SpotBreakerStatus{Open: b.Open(now), Interruptions: len(b.Recent(now))}
	if out.Open {
		out.OpenUntil = b.OpenUntil
		_, out.OnDemand = state.LaunchClass(state.UsageClassSpot, &p, b, now)
	}
	return out, nil
}

// Status reads every pool's configuration and live instances.
func Status(ctx context.Context, r Reader, now time.Time) ([]PoolStatus, error) {
	pools, err := r.ListPoolConfigs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	out := make([]PoolStatus, 0, len(pools))
	for _, p := range pools {
		ps := PoolStatus{Pool: p.Name, Owner: p.Owner, Registration: p.Registration, MaxInstances: p.MaxInstances,
			Counts: map[state.State]int{}, RunsInFlight: []string{}, Draining: p.Draining,
			RunnerSpec: p.Runner.Version, RunnerVersions: map[string]int{}}
		if t := p.RunnerTarget(); t != nil {
			ps.RunnerTarget = t.Version
		}
		if ps.Registration == "" {
			ps.Registration = state.RegistrationToken
		}
		if w, ok := p.ActiveWindow(now); ok {
			ps.IdleWindow = &w
		}
		if ps.SpotBreaker, err = spotBreaker(ctx, r, p, now); err != nil {
			return nil, err
		}
		runs := map[string]bool{}
		for _, st := range LiveStates {
			insts, err := live(ctx, r, p.Name, st)
			if err != nil {
				return nil, err
			}
			ps.Counts[st] = len(insts)
			for _, in := range insts {
				if in.RunID != "" {
					runs[in.RunID] = true
				}
				ps.RunnerVersions[cmp.Or(in.RunnerVersion, "unknown")]++
				if r := in.JITRefusedNow(); r.Count > 0 {
					if ps.JITRefused == nil {
						ps.JITRefused = map[string]int{}
					}
					ps.JITRefused[in.ID] = r.Count
				}
				if st == state.Idle && in.PooledAt > 0 {
					ps.OldestIdleSeconds = max(ps.OldestIdleSeconds, now.Unix()-in.PooledAt)
				}
			}
		}
		for id := range runs {
			ps.RunsInFlight = append(ps.RunsInFlight, id)
		}
		sort.Strings(ps.RunsInFlight)
		out = append(out, ps)
	}
	return out, nil
}
