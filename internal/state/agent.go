package state

import (
	"context"
	"fmt"
	"time"
)

// Writes made by the agent on its own record. Each is conditioned on the
// record existing and not being terminated, so an agent never creates or
// resurrects a record; signals and runner details are also bound to the
// assignment the agent acts for, so a late write from an earlier assignment
// is refused instead of satisfying a new wait.

// AgentAttributes are the top-level attributes an agent's write may name, in
// what it sets or removes and in its condition: the instance role's policy
// allows an UpdateItem of the instance's own record only within them
// (dynamodb:Attributes, provider/policy.go). Everything else of the record
// (runId, pool, owner, instanceId, uses, jitSeq, poolState, ...) is the
// control plane's. Some listed attributes are named only by conditions
// (state, assignment, leaseAt, leaseCap): IAM cannot tell a read from a
// write, so an instance can forge those on its own record, and the control
// plane never takes identity from them (docs/security.md, T6).
var AgentAttributes = []string{
	AttrPK, "version", "state", "assignment", AttrThreshold, "leaseAt", "leaseCap",
	"heartbeatAt", "heartbeats", "signals", "githubRunnerId", "runnerName", "registration",
	"runnerVersion",
}

// agentBound is the condition of every agent write.
func agentBound(assignment string) []check {
	checks := []check{exists(), notTerminated()}
	if assignment != "" {
		checks = append(checks, assignmentIs(assignment))
	}
	return checks
}

// Heartbeat records that the agent is alive: it counts one more beat (what
// the control plane judges, on its own clock) and notes the agent's time
// (shown to operators only: an agent's clock may be off by minutes).
func (s *Instances) Heartbeat(ctx context.Context, key Key) error {
	_, err := s.apply(ctx, change{
		transition: "heartbeat",
		key:        key,
		checks:     agentBound(""),
		set:        map[string]any{"heartbeatAt": s.now()},
		increment:  []string{"heartbeats"},
	})
	return err
}

// ExtendLease moves the running lease of assignment from seen (the
// threshold the agent read) to next, at most to the record's leaseCap. The
// agent computes next from its monotonic clock (how long it has held the
// lease), never from its wall clock. It is refused when the lease changed
// meanwhile (one extension per value read), when the control plane
// expired it (threshold no longer after leaseAt) or when next passes the cap.
func (s *Instances) ExtendLease(ctx context.Context, key Key, assignment string, seen, next int64) (*Instance, error) {
	if next <= seen {
		return nil, fmt.Errorf("extend lease of %s: the new threshold %d must be after %d", key, next, seen)
	}
	return s.apply(ctx, change{
		transition: "extend lease",
		key:        key,
		checks:     append(agentBound(assignment), stateIn(Running), thresholdIs(seen), notExpiredByControlPlane(), capAtLeast(next)),
		set:        map[string]any{AttrThreshold: next},
	})
}

// NoteBeat records, with the control plane's clock, that it saw the heartbeat
// counter at beats: when a later read finds the same count more than the
// stale limit after BeatSeenAt, the agent is silent (Instance.Silent).
func (s *Instances) NoteBeat(ctx context.Context, r Ref, beats int64) (*Instance, error) {
	return s.apply(ctx, change{
		transition: "note heartbeat",
		key:        r.Key,
		checks:     append(bound(r), notTerminated(), beatsAre(beats)),
		set:        map[string]any{"beatSeen": beats, "beatSeenAt": s.now()},
	})
}

// PutSignal writes one signal slot for the given assignment. Each name has its
// own slot, so a late retry of one signal never overwrites another.
func (s *Instances) PutSignal(ctx context.Context, key Key, assignment, name, detail string) error {
	if !knownSignal(name) {
		return fmt.Errorf("signal %q: unknown; use one of %v", name, Signals)
	}
	if assignment == "" {
		return fmt.Errorf("signal %s: assignment is required", name)
	}
	_, err := s.apply(ctx, change{
		transition: "signal " + name,
		key:        key,
		checks:     agentBound(assignment),
		set:        map[string]any{"signals." + name: Signal{Assignment: assignment, At: s.now(), Detail: detail}},
		applied: func(cur *Instance) bool {
			sig, ok := cur.Signals[name]
			return ok && cur.State != Terminated && cur.Assignment == assignment && sig.Assignment == assignment && sig.Detail == detail
		},
	})
	return err
}

// SetRunner records the GitHub runner the agent registered for assignment and
// drops the registration material, which is single-purpose. A zero runnerID
// clears the runner after deregistration and drops the remove material it
// used: no GitHub token stays in an idle record.
func (s *Instances) SetRunner(ctx context.Context, key Key, assignment string, runnerID int64, runnerName string) error {
	c := change{transition: "runner", key: key, checks: agentBound(assignment), set: map[string]any{}}
	if runnerID == 0 {
		c.remove = []string{"githubRunnerId", "runnerName", "registration"}
	} else {
		c.set["githubRunnerId"] = runnerID
		c.set["runnerName"] = runnerName
		c.remove = []string{"registration"}
	}
	_, err := s.apply(ctx, c)
	return err
}

// SetRunnerAndSignal is SetRunner and PutSignal of name in one write: an
// agent that started a just-in-time runner records it (dropping its used
// configuration) and answers the assignment at once, so the control
// plane's wait sees the answer without a second write on its path. A
// retry of a write whose answer was lost finds it applied.
func (s *Instances) SetRunnerAndSignal(ctx context.Context, key Key, assignment string, runnerID int64, runnerName, name, detail string) error {
	if !knownSignal(name) {
		return fmt.Errorf("signal %q: unknown; use one of %v", name, Signals)
	}
	if assignment == "" || runnerID == 0 {
		return fmt.Errorf("runner and signal %s: assignment and runner id are required", name)
	}
	_, err := s.apply(ctx, change{
		transition: "runner and signal " + name,
		key:        key,
		checks:     agentBound(assignment),
		set: map[string]any{"githubRunnerId": runnerID, "runnerName": runnerName,
			"signals." + name: Signal{Assignment: assignment, At: s.now(), Detail: detail}},
		remove: []string{"registration"},
		applied: func(cur *Instance) bool {
			sig, ok := cur.Signals[name]
			return ok && cur.State != Terminated && cur.Assignment == assignment && sig.Assignment == assignment && sig.Detail == detail &&
				cur.GithubRunnerID == runnerID
		},
	})
	return err
}

func knownSignal(name string) bool {
	for _, s := range Signals {
		if s == name {
			return true
		}
	}
	return false
}

// SignalFailedError is returned by WaitSignal when the agent answered the
// awaited assignment with a FAILED signal.
type SignalFailedError struct {
	InstanceID string
	Signal     string
	Detail     string
}

func (e *SignalFailedError) Error() string {
	return fmt.Sprintf("instance %s signalled %s: %s", e.InstanceID, e.Signal, e.Detail)
}

// WaitSignal is a Watcher's WaitSignal for one wait, reading the record
// every interval (1 s if 0).
func (s *Instances) WaitSignal(ctx context.Context, key Key, assignment, ok, failed string, every time.Duration) (*Instance, error) {
	return NewWatcher(s, every).WaitSignal(ctx, key, assignment, ok, failed)
}
