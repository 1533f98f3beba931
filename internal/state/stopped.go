package state

import (
	"context"
	"fmt"
	"time"
)

// The stopped tier (issue 41): an idle instance scale-down would retire
// is stopped instead, its EBS volume kept, while its pool's tier has room
// (PoolConfig.Stopped); a claim that finds no warm instance starts one.
//
// Invariants:
//   - only a clean, unclaimed idle instance is stopped (Stop's
//     condition), never a claimed or running one;
//   - a stopped record's lease is the tier's keep time: past it refresh
//     and scale-down terminate the instance like any other expired lease;
//   - a start is a launch from the control plane's view: the record
//     becomes created for the run under a new assignment, and the agent,
//     booting again, takes the launch path (UD_OK, registration);
//   - a start obeys the same reuse rules as a claim (launch template,
//     uses, age, rebalance), so the tier never lengthens an instance's
//     life past what the pool allows.

// Stopped is the state of an instance stopped in EC2 and kept for reuse.
const Stopped State = "stopped"

// Stop moves a clean idle instance, bound to no run, to stopped under a new
// assignment (so nothing of its idle assignment counts any more) with a
// lease of keep: past it the instance is terminated. The caller stops the
// instance in EC2 after this write.
func (s *Instances) Stop(ctx context.Context, r Ref, keep time.Duration) (*Instance, error) {
	if keep <= 0 {
		return nil, fmt.Errorf("stop %s: a positive keep time is required", r.Key)
	}
	now := s.now()
	next := NewAssignment()
	return s.apply(ctx, change{
		transition: "idle→stopped",
		key:        r.Key,
		checks:     append(bound(r), stateIn(Idle), noRunID(), leaseLive(now), signalBound(SignalRemoveRegOK, "")),
		set:        withState(map[string]any{"assignment": next, "stoppedAt": now}, r.Pool, Stopped, now, now+secs(keep)),
		remove:     []string{"pooledAt", "registration", "jitSeq", "jitServed", "jitMintedAt"},
		applied:    func(cur *Instance) bool { return cur.State == Stopped && cur.Assignment == next },
	})
}

// Start moves a stopped instance whose keep time has not passed to created
// for req.RunID under a new assignment, as a launch would record it (lease
// createdTTL, given as req.ClaimTTL's sibling ttl), with the same reuse
// rules as Claim. The caller starts the instance in EC2 after this write;
// startedAt tells liveness to judge the new boot, not the first launch.
func (s *Instances) Start(ctx context.Context, key Key, req ClaimRequest, ttl time.Duration) (*Instance, error) {
	if req.RunID == "" || req.Pool == "" || ttl <= 0 {
		return nil, fmt.Errorf("start %s: runId, pool and a positive created TTL are required", key)
	}
	now := s.now()
	checks := []check{exists(), attrIs(ClausePool, "pool", req.Pool), stateIn(Stopped), noRunID(), leaseLive(now),
		attrIs(ClauseOwner, "owner", req.Owner), noRebalance()}
	if req.LaunchTemplateVersion != "" {
		checks = append(checks, attrIs(ClauseTemplate, "launchTemplateVersion", req.LaunchTemplateVersion))
	}
	if req.MaxUses > 0 {
		checks = append(checks, usesBelow(req.MaxUses))
	}
	if req.MaxAge > 0 {
		checks = append(checks, launchedAfter(now-secs(req.MaxAge)))
	}
	next := NewAssignment()
	c := change{
		transition: "stopped→created",
		key:        key,
		checks:     checks,
		set:        withState(map[string]any{"assignment": next, AttrRunID: req.RunID, "startedAt": now}, req.Pool, Created, now, now+secs(ttl)),
		increment:  []string{"uses"},
		// The agent of the earlier boot is gone: its heartbeat counter
		// starts again, and liveness judges the new boot from startedAt.
		remove:  []string{"stoppedAt", "heartbeats", "beatSeen", "beatSeenAt", "jitRunners"},
		applied: func(cur *Instance) bool { return cur.Assignment == next },
	}
	c.forAssignment(req, next)
	return s.apply(ctx, c)
}
