package provision

import (
	"context"
	"sort"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// sourceStarted is the source of an instance started from the pool's
// stopped tier.
const sourceStarted = "started"

// startStopped takes up to n of the pool's stopped instances for the run,
// when no warm one was left (state/stopped.go): each with the conditional
// write to created for the run under a new assignment (another provision,
// or a scale-down terminating it past its keep time, wins the race and it
// is skipped), then EC2's start. From then on it is a launched instance to
// this provision: its agent boots again, does its first-start path for the
// new assignment and registers, and waitAll waits on it like any other.
//
// Only instances EC2 shows stopped are taken: scale-down writes the record
// before it calls StopInstances, so a record stopped over an instance
// still running is a stop in flight, which a start must not race. An
// instance EC2 will not start (InsufficientInstanceCapacity, or any other
// refusal) is terminated and its place goes to a launch; the run's output
// says so (StartsFailed). Pre-warming starts nothing: the tier exists to
// spare the cost of an instance nobody asked for.
func (p *provisioner) startStopped(ctx context.Context, n int, reg *state.Registration) int {
	if p.req.pool.Stopped == nil || p.req.RunID == "" || n <= 0 {
		return 0
	}
	index, err := storeOf(p.d).ByPoolState(ctx, p.req.Pool, state.Stopped, time.Time{})
	if err != nil || len(index) == 0 {
		if err != nil {
			p.log.Warn("stopped tier not read: launching instead", "err", err)
		}
		return 0
	}
	// The most recently stopped first: the warmest disk, the longest keep.
	sort.Slice(index, func(i, j int) bool { return index[i].StoppedAt > index[j].StoppedAt })
	ids := make([]string, len(index))
	for i, rec := range index {
		ids[i] = rec.ID
	}
	stopped, err := p.fleet.Stopped(ctx, ids)
	if err != nil {
		p.log.Warn("stopped tier not checked in EC2: launching instead", "err", err)
		return 0
	}
	t := p.req.pool.Timings
	req := state.ClaimRequest{RunID: p.req.RunID, Pool: p.req.Pool, Owner: p.req.Owner, LaunchTemplateVersion: p.req.pool.LaunchTemplateVersion,
		MaxUses: t.MaxUses, MaxAge: state.D(t.MaxAge), Registration: reg, RunnerTarget: p.req.pool.RunnerTarget()}
	var started []*state.Instance
	for _, rec := range index {
		if len(started) == n {
			break
		}
		if !stopped[rec.ID] {
			continue
		}
		r := req
		if reg != nil {
			copied := *reg
			r.Registration = &copied
		}
		inst, err := storeOf(p.d).Start(ctx, rec.Key, r, state.D(t.CreatedTTL))
		if err != nil {
			if state.ClauseOf(err) == "" {
				p.log.Warn("start from the stopped tier", "instanceId", rec.ID, "err", err)
			}
			continue // taken, past its keep time, or no longer reusable: scale-down ends it
		}
		if err := p.fleet.Start(ctx, inst.ID); err != nil {
			why := "EC2 did not start it: " + err.Error()
			if fleet.IsEC2CapacityShortage(err) {
				why = "EC2 had no capacity to start it: " + err.Error()
			}
			p.log.Warn("stopped instance not started: terminated, a launch takes its place", "instanceId", inst.ID, "err", err)
			p.terminate(context.WithoutCancel(ctx), inst, why)
			p.mu.Lock()
			p.startsFailed = append(p.startsFailed, inst.ID+": "+why)
			p.mu.Unlock()
			continue
		}
		started = append(started, inst)
	}
	p.adopt(ctx, started, sourceStarted)
	if len(started) > 0 {
		p.log.Info("started from the stopped tier", "started", len(started))
	}
	return len(started)
}
