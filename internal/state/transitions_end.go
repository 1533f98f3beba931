package state

import (
	"context"
	"fmt"
	"time"
)

// The record's end: Expire puts an assignment's lease into the past so
// refresh retires the instance, and Terminate marks the record terminated.

// Expire sets the lease of the given assignment into the past, so refresh (and
// the agent itself) terminates the instance.
func (s *Instances) Expire(ctx context.Context, r Ref, reason string) (*Instance, error) {
	now := s.now()
	return s.apply(ctx, change{
		transition: "expire",
		key:        r.Key,
		checks:     append(bound(r), notTerminated()),
		set:        withLease(map[string]any{"terminatedReason": reason}, now, now-1),
	})
}

// Termination says when a record may be marked terminated.
type Termination struct {
	// Assignment, when set, must still be the record's assignment.
	Assignment string
	// Given, when set, is the record as read: what the control plane gave
	// it (poolState, leaseLimit, uses) must still be there, whatever its
	// instance wrote since. For a record judged forged, instead of
	// Assignment: the instance role may write assignment (the agent's
	// conditions name it), so root on the instance could rewrite it after
	// every read and refuse every conditional termination; what only the
	// control plane writes changes only with a claim, a release or a lease
	// the control plane gives, which must not be ended by an old verdict.
	Given *Instance
	// IfExpired requires the lease to have passed.
	IfExpired bool
	Reason    string
	// KeepFor is how long the terminated record stays before TTL removes it (default 7 days).
	KeepFor time.Duration
}

// Terminate marks a record terminated: runId, poolState, threshold and
// registration are removed and expiresAt starts the record's TTL. Call it
// after (or right before) EC2 TerminateInstances.
func (s *Instances) Terminate(ctx context.Context, key Key, t Termination) (*Instance, error) {
	if t.Assignment == "" && !t.IfExpired && t.Given == nil {
		return nil, fmt.Errorf("terminate %s: give the expected assignment, the record as given or require an expired lease", key)
	}
	now := s.now()
	checks := []check{exists(), notTerminated()}
	if t.Assignment != "" {
		checks = append(checks, assignmentIs(t.Assignment))
	}
	if t.Given != nil {
		checks = append(checks, givenAs(t.Given))
	}
	if t.IfExpired {
		checks = append(checks, leaseExpired(now))
	}
	keep := t.KeepFor
	if keep <= 0 {
		keep = terminatedRecordsKeepFor
	}
	set := map[string]any{"state": string(Terminated), AttrExpiresAt: now + secs(keep)}
	if t.Reason != "" { // else keep the reason Expire gave
		set["terminatedReason"] = t.Reason
	}
	return s.apply(ctx, change{
		transition: "→terminated",
		key:        key,
		checks:     checks,
		set:        set,
		remove:     []string{AttrRunID, AttrPoolState, AttrThreshold, "leaseAt", "leaseCap", "leaseStep", AttrLeaseLimit, "registration"},
	})
}
