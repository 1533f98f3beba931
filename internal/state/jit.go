package state

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Just-in-time registrations. In a pool with registration "jit" no GitHub
// token ever reaches the instance: the control plane asks GitHub for a
// single-job runner (generate-jitconfig) and writes its configuration into
// the record, bound to the assignment and numbered: the nth of the
// assignment (JITSeq). Provision writes the first once it has claimed or
// created the instance; after each job the runner exits and the agent asks
// for the next with UD_JIT_NEXT (detail: the number it wants), which the
// stream consumer answers with PutJITServed. The number makes the answer
// idempotent: a configuration is written only as the successor of the last
// one, so a redelivered or repeated request never gets two.

// A Registration's purposes: the record's one vocabulary for them.
const (
	// PurposeRegister: a registration token for config.sh.
	PurposeRegister = "register"
	// PurposeRemove: a remove token for config.sh remove.
	PurposeRemove = "remove"
	// PurposeJIT: a just-in-time configuration.
	PurposeJIT = "jit"
)

// SignalJITNext is the agent asking for its assignment's next just-in-time
// configuration; Detail is the number it wants.
const SignalJITNext = "UD_JIT_NEXT"

// ClauseJIT: the assignment's last configuration is not the one before the
// one being written (already written, or a request from the past).
const ClauseJIT Clause = "jitSeq"

// JITRunnerName is the name of the nth just-in-time runner of an instance's
// use: ghr-<uses>-<n>-<instanceId>, ending with the instance id as every
// runner name of ours does.
func JITRunnerName(uses, n int, instanceID string) string {
	return "ghr-" + strconv.Itoa(uses) + "-" + strconv.Itoa(n) + "-" + instanceID
}

// JITWanted is the number of the configuration the agent asks for in the
// current assignment, 0 when it asks for none or it was written already.
func (i *Instance) JITWanted() int {
	sig, ok := i.SignalFor(SignalJITNext)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(sig.Detail)
	if err != nil || n != i.JITSeq+1 {
		return 0
	}
	return n
}

// The control plane bounds what a request costs (controlplane/jitcap.go):
// these clauses name why it refused one.
const (
	// ClauseJITRate: the control plane took another request of the
	// instance to GitHub too recently (jitAt, its own clock).
	ClauseJITRate Clause = "jitRate"
	// ClauseJITUnused: too many of the assignment's runners were not seen
	// to take a job (jitServed).
	ClauseJITUnused Clause = "jitUnused"
)

// JITRefusal is the last request the control plane refused, kept in the
// record for the operator (ghrunner instances) and for the next decision:
// a look at GitHub that found no runner of the assignment took a job is
// repeated only after a backoff, counted by Looks for the number Seq.
type JITRefusal struct {
	Assignment string `dynamodbav:"assignment" json:"assignment"`
	Seq        int    `dynamodbav:"seq" json:"seq"` // the number asked for
	At         int64  `dynamodbav:"at" json:"at"`   // the control plane's clock
	Clause     Clause `dynamodbav:"clause" json:"clause"`
	Why        string `dynamodbav:"why" json:"why"`
	// Count is how many requests of the assignment were refused.
	Count int `dynamodbav:"count" json:"count"`
	// Looks is how many looks in a row found that no runner of the
	// assignment since the last one seen took a job, the last at LookedAt.
	Looks    int   `dynamodbav:"looks,omitempty" json:"looks,omitempty"`
	LookedAt int64 `dynamodbav:"lookedAt,omitempty" json:"lookedAt,omitempty"`
}

// JITRefusedNow is the last refusal of the current assignment, the zero
// value when it had none.
func (i *Instance) JITRefusedNow() JITRefusal {
	if i.JITRefused == nil || i.Assignment == "" || i.JITRefused.Assignment != i.Assignment {
		return JITRefusal{}
	}
	return *i.JITRefused
}

// jitAtBefore holds when the control plane last took a request of the
// instance to GitHub at or before t, or never did.
func jitAtBefore(t int64) check {
	return check{ClauseJITRate,
		func(b *builder) string {
			return "(attribute_not_exists(" + b.name("jitAt") + ") OR " + b.name("jitAt") + " <= " + b.value(t) + ")"
		},
		func(i *Instance) (bool, string) {
			return i.JITAt <= t, fmt.Sprintf("a request of the instance was taken to GitHub at %s, after %s", unixString(i.JITAt), unixString(t))
		}}
}

// TakeJITRequest takes the request for configuration seq of assignment
// before GitHub is asked anything for it: it stamps jitAt with at, the
// control plane's clock, only when the last stamp is at least every older,
// so no two invocations (a redelivery, a parallel batch) both pass the
// instance's rate; and it removes the request, so that this write, like
// every later one until the agent asks again, passes no stream filter.
// Refused with ClauseJITRate when the rate does not allow it now, and with
// the clauses of PutJITServed when the request is no longer one to serve.
func (s *Instances) TakeJITRequest(ctx context.Context, key Key, assignment string, seq int, at int64, every time.Duration) (*Instance, error) {
	if assignment == "" || seq < 1 {
		return nil, fmt.Errorf("take jit request of %s: an assignment and a number (from 1) are required", key)
	}
	return s.apply(ctx, change{
		transition: "take jit request " + strconv.Itoa(seq),
		key:        key,
		checks:     []check{exists(), stateIn(Created, Claimed, Running), hasRunID(), assignmentIs(assignment), jitSeqIs(seq - 1), jitAtBefore(at - secs(every))},
		set:        map[string]any{"jitAt": at},
		remove:     []string{"signals." + SignalJITNext},
		// No applied: a take whose answer was lost and whose retry is
		// refused counts as refused. Recognising it by jitAt = at would
		// let a second invocation of the same second through.
	})
}

// RefuseJIT records that the request of assignment was refused (r), and
// what a look at GitHub found (served: the number of the assignment's last
// runner seen to take a job; 0 leaves it). The request is removed: it is
// answered, and a record that still held it would be delivered again with
// every write, this one included.
func (s *Instances) RefuseJIT(ctx context.Context, key Key, assignment string, r JITRefusal, served int) (*Instance, error) {
	if assignment == "" || r.Clause == "" {
		return nil, fmt.Errorf("refuse jit request of %s: an assignment and the clause refused are required", key)
	}
	r.Assignment = assignment
	c := change{
		transition: "refuse jit request " + strconv.Itoa(r.Seq),
		key:        key,
		checks:     []check{exists(), assignmentIs(assignment)},
		set:        map[string]any{"jitRefused": r},
		remove:     []string{"signals." + SignalJITNext},
	}
	if served > 0 {
		c.set["jitServed"] = served
	}
	return s.apply(ctx, c)
}

func jitSeqIs(n int) check {
	return check{ClauseJIT,
		func(b *builder) string {
			if n == 0 {
				return "attribute_not_exists(" + b.name("jitSeq") + ")"
			}
			return b.name("jitSeq") + " = " + b.value(n)
		},
		func(i *Instance) (bool, string) {
			return i.JITSeq == n, fmt.Sprintf("the assignment's last configuration is number %d, want %d", i.JITSeq, n)
		}}
}

func hasRunID() check {
	return check{ClauseRunID,
		func(b *builder) string { return "attribute_exists(" + b.name(AttrRunID) + ")" },
		func(i *Instance) (bool, string) { return i.RunID != "", "instance has no run" }}
}

// MaxJITRunners bounds JITRunners: the record keeps the ids of the
// assignment's last MaxJITRunners configurations (at 8 bytes an id or
// less, under 1 KB of the item's 400 KB). One is written per
// configuration, and the control plane's cap (controlplane/jitcap.go,
// docs/security.md C20) lets through at most JITLimits.Unused+1 (3) in a
// row while none of them is seen to take a job (busy, or gone); past
// that, one more per runner seen so. So the list is long only in an
// assignment of many jobs, whose runners GitHub removes itself after each
// job. A runner whose id was dropped is over MaxJITRunners configurations
// old: an honest agent asked for its successors only once its listener
// ended (root keeping it online with its credentials is compromise of the
// instance already, T2), so it takes no job, and GitHub removes it within
// a day; release deletes only the ids kept and the ones the record names.
const MaxJITRunners = 100

// PutJITServed writes reg, the reg.Seq-th just-in-time configuration of
// assignment, while the instance is created, claimed or running for a run
// under that assignment with a live lease, and only as the successor of
// the last one written. A refused write (another run, a release, a number
// already written) returns a *ConditionError; the caller then deletes the
// runner it minted. It also records served, the number of the
// assignment's last runner the control plane saw take a job (0: leaves
// what the record holds), given minted, the record's JITRunners as read
// with jitSeq reg.Seq-1 under assignment. reg.RunnerID joins them (the
// oldest dropped past MaxJITRunners). Only this write sets jitRunners,
// with jitSeq, and only a claim (a new assignment) or the pooling after a
// release (every runner deleted) removes it, so under the jitSeq and
// assignment conditions the record holds minted still; its length is
// checked as well, and a write on a list that moved is refused
// (ClauseJIT).
func (s *Instances) PutJITServed(ctx context.Context, key Key, assignment string, reg Registration, served int, minted []int64) (*Instance, error) {
	if reg.Purpose != PurposeJIT || reg.JITConfig == "" || reg.Seq < 1 || reg.RunnerID == 0 || reg.RunnerName == "" {
		return nil, fmt.Errorf("put jit config of %s: a %q registration with its configuration, number (from 1), runner id and name is required", key, PurposeJIT)
	}
	if assignment == "" {
		return nil, fmt.Errorf("put jit config of %s: assignment is required", key)
	}
	reg.Assignment = assignment
	runners := withMinted(minted, reg.RunnerID)
	// jitMintedAt: how long after it GitHub shows the runner gone tells
	// whether it may have been removed idle (controlplane/jitcap.go).
	set := map[string]any{"registration": reg, "jitSeq": reg.Seq, "jitMintedAt": s.now(), "jitRunners": runners}
	if served > 0 {
		set["jitServed"] = served
	}
	return s.apply(ctx, change{
		transition: "jit config " + strconv.Itoa(reg.Seq),
		key:        key,
		checks:     []check{exists(), stateIn(Created, Claimed, Running), hasRunID(), assignmentIs(assignment), leaseLive(s.now()), jitSeqIs(reg.Seq - 1), jitRunnersAre(len(minted))},
		set:        set,
		// The request is answered: without it, the record's later writes
		// (heartbeats) no longer pass the consumer's stream filter.
		remove: []string{"signals." + SignalJITNext},
		applied: func(cur *Instance) bool {
			return cur.Assignment == assignment && cur.JITSeq == reg.Seq && cur.Registration != nil && cur.Registration.RunnerID == reg.RunnerID
		},
	})
}

// withMinted is minted with id added, the oldest dropped past
// MaxJITRunners.
func withMinted(minted []int64, id int64) []int64 {
	runners := append(slices.Clip(minted), id)
	return runners[max(0, len(runners)-MaxJITRunners):]
}

// jitRunnersAre holds when the record lists n runners minted.
func jitRunnersAre(n int) check {
	return check{ClauseJIT,
		func(b *builder) string {
			if n == 0 {
				return "attribute_not_exists(" + b.name("jitRunners") + ")"
			}
			return "size(" + b.name("jitRunners") + ") = " + b.value(n)
		},
		func(i *Instance) (bool, string) {
			return len(i.JITRunners) == n, fmt.Sprintf("the record lists %d runners minted, read as %d", len(i.JITRunners), n)
		}}
}
