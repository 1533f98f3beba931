package state

import (
	"context"
	"fmt"
	"strconv"
)

// Just-in-time registrations. In a pool with registration "jit" no GitHub
// token ever reaches the instance: the control plane asks GitHub for a
// single-job runner (generate-jitconfig) and writes its configuration into
// the record, bound to the assignment and numbered: the nth of the
// assignment (JITSeq). Provision writes the first once it has claimed or
// created the instance; after each job the runner exits and the agent asks
// for the next with UD_JIT_NEXT (detail: the number it wants), which the
// stream consumer answers with PutJIT. The number makes the answer
// idempotent: a configuration is written only as the successor of the last
// one, so a redelivered or repeated request never gets two.

// PurposeJIT marks a Registration that is a just-in-time configuration.
const PurposeJIT = "jit"

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

// PutJIT writes reg, the reg.Seq-th just-in-time configuration of
// assignment, while the instance is created, claimed or running for a run
// under that assignment with a live lease, and only as
// the successor of the last one written. A refused write (another run, a
// release, a number already written) returns a *ConditionError; the caller
// then deletes the runner it minted.
func (s *Store) PutJIT(ctx context.Context, key Key, assignment string, reg Registration) (*Instance, error) {
	if reg.Purpose != PurposeJIT || reg.JITConfig == "" || reg.Seq < 1 || reg.RunnerID == 0 || reg.RunnerName == "" {
		return nil, fmt.Errorf("put jit config of %s: a %q registration with its configuration, number (from 1), runner id and name is required", key, PurposeJIT)
	}
	if assignment == "" {
		return nil, fmt.Errorf("put jit config of %s: assignment is required", key)
	}
	reg.Assignment = assignment
	return s.apply(ctx, change{
		transition: "jit config " + strconv.Itoa(reg.Seq),
		key:        key,
		checks:     []check{exists(), stateIn(Created, Claimed, Running), hasRunID(), assignmentIs(assignment), leaseLive(s.now()), jitSeqIs(reg.Seq - 1)},
		set:        map[string]any{"registration": reg, "jitSeq": reg.Seq},
		// The request is answered: without it, the record's later writes
		// (heartbeats) no longer pass the consumer's stream filter.
		remove: []string{"signals." + SignalJITNext},
		applied: func(cur *Instance) bool {
			return cur.Assignment == assignment && cur.JITSeq == reg.Seq && cur.Registration != nil && cur.Registration.RunnerID == reg.RunnerID
		},
	})
}
