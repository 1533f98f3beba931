package state

import (
	"fmt"
	"strings"
	"time"
)

// AttrLeaseLimit is the control plane's own copy of the lease it gave
// (Instance.LeaseLimit).
const AttrLeaseLimit = "leaseLimit"

// An instance's role may write state, assignment, threshold, leaseAt and
// leaseCap of its own record: IAM cannot tell the attributes an agent's
// condition reads from those it writes (AgentAttributes). Root on an
// instance can therefore make its record claim a longer life — a lease far
// ahead, a cap never reached, a state whose lease nobody ends — and the
// account pays for the instance. Refresh does not take that claim: it
// judges the record against what the control plane itself wrote and keeps
// out of the instance's reach — the state in poolState, the lease in
// leaseLimit, the launch time EC2 gave (launchedAt) — and against its own
// clock, and retires an instance whose record claims more.

// PrewarmGrace lengthens a pre-warmed instance's created lease: it joins
// the pool only once a refresh sees its agent's UD_OK, so its lease must
// outlast its boot plus a refresh period or two. A created record without
// a run may hold a lease this much longer.
const PrewarmGrace = 5 * time.Minute

// clockGrace absorbs the difference between the clocks of two control-plane
// writers (a provision's and a refresh's Lambda hosts).
const clockGrace = 2 * time.Minute

// longestLease is the longest lease the control plane gives a record in
// state st, from the moment it writes it.
func longestLease(st State, prewarmed bool, t Timings) int64 {
	switch st {
	case Created:
		if prewarmed {
			return t.CreatedTTL + int64(PrewarmGrace/time.Second)
		}
		return t.CreatedTTL
	case Claimed:
		return t.ClaimTTL
	case Running:
		return max(t.MaxRuntime, t.RuntimeCap) // the agent extends up to the cap
	case Idle:
		return t.IdleTTL
	}
	return 0
}

// LongestLife is how long after its launch an instance can live on leases
// the control plane gives: claimed just before maxAge, running to the
// runtime cap, waiting for its release, then idle until its last idle lease
// ends (older instances are never claimed or renewed).
func LongestLife(t Timings) time.Duration {
	return D(t.MaxAge + t.ClaimTTL + max(t.MaxRuntime, t.RuntimeCap) + t.ReleaseWait + t.IdleTTL)
}

// LifeNotGiven says why the record of a live instance claims a life the
// control plane did not give it, judged at now on the control plane's
// clock with the pool's timings t; "" when it claims none. The rules, each
// from what only the control plane writes:
//   - its state is the one the control plane put it in (poolState);
//   - its lease (threshold) is within the one the control plane gave
//     (leaseLimit), and never further ahead of now than the longest lease
//     of its state;
//   - a running lease's cap is never further ahead than the runtime cap;
//   - it is not older than any instance can live on given leases (EC2's
//     launch time, recorded at launch).
func LifeNotGiven(i *Instance, t Timings, now time.Time) string {
	var why []string
	st := i.State
	if pool, given, ok := strings.Cut(i.PoolState, "#"); ok && pool == i.Pool && State(given) != i.State {
		why = append(why, fmt.Sprintf("its record says %s, the control plane made it %s", i.State, given))
		st = State(given)
	}
	grace := int64(clockGrace / time.Second)
	n := now.Unix()
	if i.LeaseLimit != 0 && i.Threshold > i.LeaseLimit {
		why = append(why, fmt.Sprintf("its lease ends %s, after the %s the control plane gave", unixString(i.Threshold), unixString(i.LeaseLimit)))
	}
	if longest := longestLease(st, i.RunID == "", t); longest > 0 && i.Threshold > n+longest+grace {
		why = append(why, fmt.Sprintf("its lease ends %s, more than the longest %s lease (%s) ahead", unixString(i.Threshold), st, D(longest)))
	}
	if st == Running && i.LeaseCap > n+max(t.MaxRuntime, t.RuntimeCap)+grace {
		why = append(why, fmt.Sprintf("its lease cap %s is beyond the runtime cap (%s) from now", unixString(i.LeaseCap), D(t.RuntimeCap)))
	}
	// A stopped record's lease is the tier's keep time, bounded by the
	// leaseLimit rule above; a start obeys maxAge (Start), so a stopped
	// instance is judged by its lease only.
	if life := int64(LongestLife(t) / time.Second); st != Stopped && i.LaunchedAt != 0 && t.MaxAge > 0 && n-i.LaunchedAt > life+grace {
		why = append(why, fmt.Sprintf("launched %s ago, longer than any instance lives on the pool's leases (%s)", now.Sub(time.Unix(i.LaunchedAt, 0)).Truncate(time.Minute), D(life)))
	}
	return strings.Join(why, "; ")
}

// givenAs holds while what the control plane gave the record (its
// poolState, leaseLimit and uses, none of them the instance role's to
// write) is what it was in read.
func givenAs(read *Instance) check {
	return check{ClauseChanged,
		func(b *builder) string {
			eq := func(attr string, v any, zero bool) string {
				if zero {
					return "attribute_not_exists(" + b.name(attr) + ")"
				}
				return b.name(attr) + " = " + b.value(v)
			}
			uses := b.name("uses") + " = " + b.value(read.Uses)
			if read.Uses == 0 {
				uses = "(attribute_not_exists(" + b.name("uses") + ") OR " + uses + ")"
			}
			return eq(AttrPoolState, read.PoolState, read.PoolState == "") + " AND " + eq(AttrLeaseLimit, read.LeaseLimit, read.LeaseLimit == 0) + " AND " + uses
		},
		func(i *Instance) (bool, string) {
			return i.PoolState == read.PoolState && i.LeaseLimit == read.LeaseLimit && i.Uses == read.Uses,
				fmt.Sprintf("the control plane gave it %s, lease limit %s, use %d since it was read (%s, %s, %d)",
					i.PoolState, unixString(i.LeaseLimit), i.Uses, read.PoolState, unixString(read.LeaseLimit), read.Uses)
		}}
}
