package state

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
)

// The transitions of an instance's record through its life in the pool:
// to running, to idle, claimed, joined, renewed and pooled, each a
// conditional write checked against the caller's Ref. The record's creation
// is in transitions_create.go, its end (expire, terminate) in
// transitions_end.go. The helpers every write shares close the file.

// Ref names the record a caller acts on and what it believes of it: the pool
// (to derive poolState) and the assignment every transition is bound to.
type Ref struct {
	Key        Key
	ID         string
	Pool       string
	Assignment string
	// JITSeq is the number of the last just-in-time configuration the
	// reader saw. Release requires it unchanged: the releaser deletes the
	// runners the record names, so it must have seen the last one.
	JITSeq int
}

// Ref returns the reference to this record as it is now.
func (i *Instance) Ref() Ref {
	return Ref{Key: i.Key, ID: i.ID, Pool: i.Pool, Assignment: i.Assignment, JITSeq: i.JITSeq}
}

// bound is the part of every condition that pins the record a caller read.
func bound(r Ref) []check {
	return []check{exists(), attrIs(ClausePool, "pool", r.Pool), assignmentIs(r.Assignment)}
}

// MarkRunning moves a created or claimed instance to running once the agent
// signalled UD_REG_OK for the same assignment; the lease becomes maxRuntime,
// which the agent extends while its runner is alive, up to runtimeCap from
// now (leaseCap).
func (s *Instances) MarkRunning(ctx context.Context, r Ref, maxRuntime, runtimeCap time.Duration) (*Instance, error) {
	now := s.now()
	return s.toRunning(ctx, "→running", r, maxRuntime, runtimeCap, leaseLive(now), signalBound(SignalRegOK, r.Assignment))
}

// Adopt moves a created or claimed instance to running for its assignment
// without its UD_REG_OK and whatever its lease says: GitHub shows its runner
// running a job of the run (the agent's note was never seen), so the
// instance works for the run already and ending it would kill that job.
func (s *Instances) Adopt(ctx context.Context, r Ref, maxRuntime, runtimeCap time.Duration) (*Instance, error) {
	return s.toRunning(ctx, "→running (adopted)", r, maxRuntime, runtimeCap)
}

func (s *Instances) toRunning(ctx context.Context, name string, r Ref, maxRuntime, runtimeCap time.Duration, checks ...check) (*Instance, error) {
	now := s.now()
	threshold := now + secs(maxRuntime)
	set := withState(nil, r.Pool, Running, now, threshold)
	set["leaseCap"] = max(threshold, now+secs(runtimeCap))
	set[AttrLeaseLimit] = set["leaseCap"] // the agent extends up to the cap
	set["leaseStep"] = secs(maxRuntime)
	return s.apply(ctx, change{
		transition: name,
		key:        r.Key,
		checks:     append(append(bound(r), stateIn(Created, Claimed)), checks...),
		set:        set,
		applied:    func(cur *Instance) bool { return cur.State == Running && cur.Assignment == r.Assignment },
	})
}

// Release moves a running instance of runID to idle under a new assignment and
// hands the agent its remove material; the lease becomes idleTTL. The agent
// then deregisters and signals UD_REMOVE_REG_OK for the new assignment.
func (s *Instances) Release(ctx context.Context, r Ref, runID string, idleTTL time.Duration, removal *Registration) (*Instance, error) {
	now := s.now()
	return s.toIdle(ctx, "running→idle", r, runID, append(bound(r), stateIn(Running), runIDIs(runID), leaseLive(now), jitSeqIs(r.JITSeq)), idleTTL, removal)
}

// Unclaim moves a claimed instance whose registration failed or timed out back
// to idle under a new assignment; like Release it is pooled again only after
// the agent confirms it is clean.
func (s *Instances) Unclaim(ctx context.Context, r Ref, idleTTL time.Duration, removal *Registration) (*Instance, error) {
	now := s.now()
	return s.toIdle(ctx, "claimed→idle", r, "", append(bound(r), stateIn(Claimed), leaseLive(now)), idleTTL, removal)
}

// toIdle gives the instance back to the pool; runID, when known, stays as
// its lastRunId.
func (s *Instances) toIdle(ctx context.Context, name string, r Ref, runID string, checks []check, idleTTL time.Duration, removal *Registration) (*Instance, error) {
	next := NewAssignment()
	set := map[string]any{"assignment": next}
	if runID != "" {
		set["lastRunId"] = runID
	}
	c := change{
		transition: name,
		key:        r.Key,
		checks:     checks,
		set:        withState(set, r.Pool, Idle, s.now(), s.now()+secs(idleTTL)),
		// jitRunners stays: release deletes them after this write, and a
		// retirement after a failed delete deletes them again.
		remove:  []string{AttrRunID, "pooledAt", "jitSeq", "jitServed", "jitMintedAt"},
		applied: func(cur *Instance) bool { return cur.Assignment == next },
	}
	if removal != nil {
		material := *removal
		material.Assignment = next
		c.set["registration"] = material
	} else {
		c.remove = append(c.remove, "registration")
	}
	return s.apply(ctx, c)
}

// ClaimRequest is what a provision asks of an idle instance.
type ClaimRequest struct {
	RunID                 string
	Pool                  string
	Owner                 string
	LaunchTemplateVersion string // empty: any version
	MaxUses               int    // 0: no limit
	MaxAge                time.Duration
	ClaimTTL              time.Duration
	Registration          *Registration
	// RunnerTarget is the pool's runner target now, written with the
	// claim (nil: the record's is kept): refresh writes a live record's
	// target after the pool's and may fail to, and a claimed instance's
	// agent starts its runner from the record's (agent/lifecycle/upgrade.go).
	RunnerTarget *runnerrelease.Target
}

// Claim moves a clean, unexpired idle instance of the same pool and owner,
// whose agent never said EC2 recommends rebalancing it, to
// claimed for req.RunID under a new assignment. A duplicate or stale pool
// message can never claim twice: only one conditional write wins.
func (s *Instances) Claim(ctx context.Context, key Key, req ClaimRequest) (*Instance, error) {
	if req.RunID == "" || req.Pool == "" || req.ClaimTTL <= 0 {
		return nil, fmt.Errorf("claim %s: runId, pool and a positive claim TTL are required", key)
	}
	now := s.now()
	checks := []check{exists(), attrIs(ClausePool, "pool", req.Pool), stateIn(Idle), noRunID(), leaseLive(now),
		signalBound(SignalRemoveRegOK, ""), attrIs(ClauseOwner, "owner", req.Owner), noRebalance()}
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
		transition: "idle→claimed",
		key:        key,
		checks:     checks,
		set:        withState(map[string]any{"assignment": next, AttrRunID: req.RunID}, req.Pool, Claimed, now, now+secs(req.ClaimTTL)),
		increment:  []string{"uses"},
		// A new assignment mints its runners anew: the last one's were
		// deleted at its release (or by refresh before it was pooled).
		remove:  []string{"pooledAt", "jitSeq", "jitServed", "jitMintedAt", "jitRunners"},
		applied: func(cur *Instance) bool { return cur.Assignment == next },
	}
	c.forAssignment(req, next)
	return s.apply(ctx, c)
}

// JoinPool moves a pre-warmed instance (created without a run) to idle once its
// pre-runner script succeeded; it keeps its assignment.
func (s *Instances) JoinPool(ctx context.Context, r Ref, idleTTL time.Duration) (*Instance, error) {
	now := s.now()
	return s.apply(ctx, change{
		transition: "created→idle",
		key:        r.Key,
		checks:     append(bound(r), stateIn(Created), noRunID(), leaseLive(now), signalPresent(SignalOK)),
		set:        withState(nil, r.Pool, Idle, now, now+secs(idleTTL)),
	})
}

// Renew extends the idle lease of an instance that scale-down keeps.
func (s *Instances) Renew(ctx context.Context, r Ref, idleTTL time.Duration) (*Instance, error) {
	now := s.now()
	return s.apply(ctx, change{
		transition: "idle→idle",
		key:        r.Key,
		checks:     append(bound(r), stateIn(Idle), noRunID(), leaseLive(now)),
		set:        withLease(map[string]any{}, now, now+secs(idleTTL)),
	})
}

// MarkPooled records that the pool message for this idle assignment was sent.
func (s *Instances) MarkPooled(ctx context.Context, r Ref) (*Instance, error) {
	return s.apply(ctx, change{
		transition: "pooled",
		key:        r.Key,
		checks:     append(bound(r), stateIn(Idle)),
		set:        map[string]any{"pooledAt": s.now()},
		// Pooled once its runners were deleted (release's
		// deleteJITRunners, refresh's sweep of runners named after it;
		// a provision that gives a claimed instance back withdraws only
		// its first runner, by name): the list is done with, and a claim
		// would start it anew anyway.
		remove: []string{"jitRunners"},
	})
}

// withState adds state, poolState and the lease (threshold, and leaseAt =
// now) to set, creating it if nil.
func withState(set map[string]any, pool string, st State, now, threshold int64) map[string]any {
	if set == nil {
		set = map[string]any{}
	}
	set["state"] = string(st)
	set[AttrPoolState] = PoolState(pool, st)
	return withLease(set, now, threshold)
}

// withLease sets threshold and leaseAt: the agent measures a lease by its
// length (threshold - leaseAt) on its monotonic clock, never by comparing
// its wall clock with threshold.
func withLease(set map[string]any, now, threshold int64) map[string]any {
	set[AttrThreshold] = threshold
	set[AttrLeaseLimit] = threshold
	set["leaseAt"] = now
	return set
}

func secs(d time.Duration) int64 { return int64(d / time.Second) }

func unixString(t int64) string {
	if t == 0 {
		return "never"
	}
	return time.Unix(t, 0).UTC().Format(time.RFC3339)
}

func joinStates(states []State) string {
	s := make([]string, len(states))
	for i, st := range states {
		s[i] = string(st)
	}
	return strings.Join(s, " or ")
}

// forAssignment gives a claim's or a start's write what the new
// assignment next brings: the registration material bound to it (or none
// left of the last one) and the runner release to install.
func (c *change) forAssignment(req ClaimRequest, next string) {
	if req.Registration != nil {
		material := *req.Registration
		material.Assignment = next
		c.set["registration"] = material
	} else {
		c.remove = append(c.remove, "registration")
	}
	if req.RunnerTarget != nil {
		c.set["runnerTarget"] = *req.RunnerTarget
	}
}
