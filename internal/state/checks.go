package state

import (
	"fmt"
	"strings"
)

// check is one clause of a condition, written twice: as a DynamoDB condition
// and as a Go predicate over the old record, so that a refused write can say
// which clause failed.
type check struct {
	clause Clause
	expr   func(b *builder) string
	holds  func(i *Instance) (bool, string)
}

func exists() check {
	return check{ClauseExists,
		func(b *builder) string { return "attribute_exists(" + b.name(AttrPK) + ")" },
		func(i *Instance) (bool, string) { return true, "" }}
}

func stateIn(states ...State) check {
	return check{ClauseState,
		func(b *builder) string {
			ph := make([]string, len(states))
			for n, s := range states {
				ph[n] = b.value(string(s))
			}
			return b.name("state") + " IN (" + strings.Join(ph, ", ") + ")"
		},
		func(i *Instance) (bool, string) {
			for _, s := range states {
				if i.State == s {
					return true, ""
				}
			}
			return false, fmt.Sprintf("state is %s, want %s", i.State, joinStates(states))
		}}
}

func notTerminated() check {
	return check{ClauseState,
		func(b *builder) string { return b.name("state") + " <> " + b.value(string(Terminated)) },
		func(i *Instance) (bool, string) {
			return i.State != Terminated, "instance is terminated"
		}}
}

func assignmentIs(a string) check {
	return check{ClauseAssignment,
		func(b *builder) string { return b.name("assignment") + " = " + b.value(a) },
		func(i *Instance) (bool, string) {
			return i.Assignment == a, fmt.Sprintf("assignment is %s, want %s", i.Assignment, a)
		}}
}

func runIDIs(r string) check {
	return check{ClauseRunID,
		func(b *builder) string { return b.name(AttrRunID) + " = " + b.value(r) },
		func(i *Instance) (bool, string) {
			return i.RunID == r, fmt.Sprintf("runId is %q, want %q", i.RunID, r)
		}}
}

func noRunID() check {
	return check{ClauseRunID,
		func(b *builder) string { return "attribute_not_exists(" + b.name(AttrRunID) + ")" },
		func(i *Instance) (bool, string) {
			return i.RunID == "", fmt.Sprintf("instance is assigned to run %q", i.RunID)
		}}
}

func leaseLive(now int64) check {
	return check{ClauseLease,
		func(b *builder) string { return b.name(AttrThreshold) + " > " + b.value(now) },
		func(i *Instance) (bool, string) {
			return i.Threshold > now, fmt.Sprintf("lease expired at %s", unixString(i.Threshold))
		}}
}

func leaseExpired(now int64) check {
	return check{ClauseLease,
		func(b *builder) string {
			return "(attribute_not_exists(" + b.name(AttrThreshold) + ") OR " + b.name(AttrThreshold) + " <= " + b.value(now) + ")"
		},
		func(i *Instance) (bool, string) {
			return i.Threshold <= now, fmt.Sprintf("lease holds until %s", unixString(i.Threshold))
		}}
}

// signalBound requires the named signal to answer assignment a, or the record's
// current assignment when a is empty.
func signalBound(name, a string) check {
	return check{ClauseSignal,
		func(b *builder) string {
			path := b.name("signals." + name + ".assignment")
			if a == "" {
				return path + " = " + b.name("assignment")
			}
			return path + " = " + b.value(a)
		},
		func(i *Instance) (bool, string) {
			want := a
			if want == "" {
				want = i.Assignment
			}
			s, ok := i.Signals[name]
			return ok && s.Assignment == want, fmt.Sprintf("no %s for assignment %s", name, want)
		}}
}

func signalPresent(name string) check {
	return check{ClauseSignal,
		func(b *builder) string { return "attribute_exists(" + b.name("signals."+name) + ")" },
		func(i *Instance) (bool, string) {
			_, ok := i.Signals[name]
			return ok, "no " + name + " signal"
		}}
}

func attrIs(clause Clause, attr, want string) check {
	return check{clause,
		func(b *builder) string { return b.name(attr) + " = " + b.value(want) },
		func(i *Instance) (bool, string) {
			got := map[string]string{"owner": i.Owner, "pool": i.Pool, "launchTemplateVersion": i.LaunchTemplateVersion}[attr]
			return got == want, fmt.Sprintf("%s is %q, want %q", attr, got, want)
		}}
}

func usesBelow(max int) check {
	return check{ClauseUses,
		func(b *builder) string { return b.name("uses") + " < " + b.value(max) },
		func(i *Instance) (bool, string) {
			return i.Uses < max, fmt.Sprintf("used %d times, limit %d", i.Uses, max)
		}}
}

// noRebalance refuses an instance whose agent said EC2 recommends
// rebalancing it (SignalRebalance, any assignment).
func noRebalance() check {
	return check{ClauseRebalance,
		func(b *builder) string { return "attribute_not_exists(" + b.name("signals."+SignalRebalance) + ")" },
		func(i *Instance) (bool, string) {
			return !i.HasRebalance(), "EC2 recommended rebalancing the instance"
		}}
}

func launchedAfter(t int64) check {
	return check{ClauseAge,
		func(b *builder) string { return b.name("launchedAt") + " > " + b.value(t) },
		func(i *Instance) (bool, string) {
			return i.LaunchedAt > t, fmt.Sprintf("launched at %s, too old", unixString(i.LaunchedAt))
		}}
}

func thresholdIs(t int64) check {
	return check{ClauseLease,
		func(b *builder) string { return b.name(AttrThreshold) + " = " + b.value(t) },
		func(i *Instance) (bool, string) {
			return i.Threshold == t, fmt.Sprintf("lease is %s, read as %s", unixString(i.Threshold), unixString(t))
		}}
}

// notExpiredByControlPlane holds unless Expire moved the lease before the
// moment it was set (Expire sets threshold = leaseAt - 1).
func notExpiredByControlPlane() check {
	return check{ClauseLease,
		func(b *builder) string { return b.name(AttrThreshold) + " > " + b.name("leaseAt") },
		func(i *Instance) (bool, string) {
			return i.Threshold > i.LeaseAt, "the control plane expired the lease"
		}}
}

func capAtLeast(t int64) check {
	return check{ClauseLease,
		func(b *builder) string { return b.name("leaseCap") + " >= " + b.value(t) },
		func(i *Instance) (bool, string) {
			return i.LeaseCap >= t, fmt.Sprintf("the runtime cap %s comes first", unixString(i.LeaseCap))
		}}
}

func beatsAre(n int64) check {
	return check{ClauseChanged,
		func(b *builder) string {
			if n == 0 {
				return "attribute_not_exists(" + b.name("heartbeats") + ")"
			}
			return b.name("heartbeats") + " = " + b.value(n)
		},
		func(i *Instance) (bool, string) {
			return i.Heartbeats == n, fmt.Sprintf("heartbeats are %d, read as %d", i.Heartbeats, n)
		}}
}
