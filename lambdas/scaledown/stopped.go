package scaledown

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The stopped tier (state/stopped.go) in scale-down. Invariants, besides
// the package's:
//   - only an idle instance scale-down would retire for the idle quota is
//     stopped, never one no claim could take (it is retired), never a
//     claimed or running one (state.Stop's condition), never a spot one
//     (EC2 cannot stop a one-time request's instance: both EC2's lifecycle
//     and the record must say on-demand), and never in a draining pool;
//   - a pool never holds more than its tier's max stopped: the room is
//     counted from the records, stopped ones past their keep time excluded
//     (they go this run);
//   - a record stopped whose instance EC2 shows running or pending is a
//     stop cut off between the record and EC2, finished here: a start
//     writes created before it calls EC2, and gather lists EC2 before it
//     reads the records, so a start is never mistaken for it; provision
//     starts only what EC2 shows stopped, so it never starts an instance
//     this stop is about to halt.

// tierRoom is how many more of the pool's instances may be stopped now.
func tierRoom(in Input, poolName string, pool state.PoolConfig) int {
	if pool.Stopped == nil || pool.Draining {
		return 0
	}
	held := 0
	for _, rec := range in.Records {
		if rec.Pool == poolName && rec.State == state.Stopped && !rec.Expired(in.Now) {
			held++
		}
	}
	return max(pool.Stopped.Max-held, 0)
}

// stoppedDecision judges an instance whose record says stopped. A pool
// that drains, or no longer has a tier, keeps nothing stopped.
func stoppedDecision(now time.Time, pool state.PoolConfig, inst fleet.Instance, rec *state.Instance, d Decision) Decision {
	d.Assignment, d.Owner = rec.Assignment, rec.Owner
	switch {
	case rec.Expired(now):
		d.Action, d.Reason, d.Kind = Terminate, "stopped past the tier's keep time", KindScaleDown
	case pool.Draining:
		d.Action, d.Reason, d.Kind = Terminate, "stopped, and the pool drains", KindScaleDown
	case pool.Stopped == nil:
		d.Action, d.Reason, d.Kind = Terminate, "stopped, and the pool has no stopped tier any more", KindScaleDown
	case inst.State == "running" || inst.State == "pending":
		d.Action, d.Reason = Stop, "its record is stopped but EC2 shows it "+inst.State+": finishing the stop"
	default:
		d.Action, d.Reason = Keep, "stopped until "+time.Unix(rec.Threshold, 0).UTC().Format(time.RFC3339)
	}
	return d
}

// stopInstead turns the retirement of a claimable idle instance beyond the
// quota into a stop while the tier has room.
func stopInstead(inst fleet.Instance, rec *state.Instance, d Decision, room int) (Decision, int) {
	if room <= 0 || inst.UsageClass != fleet.OnDemand || rec.UsageClass != state.UsageClassOnDemand {
		return d, room
	}
	d.Action, d.Reason, d.Kind = Stop, "idle beyond the idle quota: stopped for the stopped tier", ""
	return d, room - 1
}

// stopInstance carries out a Stop decision: for an idle record, the
// conditional write to stopped (a claim since wins and the instance is
// kept), then the runners of its earlier uses; then EC2's stop. An
// instance EC2 will not stop is retired instead (its record marked, then
// terminated), so a failed stop never leaves a record stopped over a
// running instance. It returns the decision as carried out: Stop, Keep or
// Terminate.
func (e *executor) stopInstance(ctx context.Context, dec Decision) Decision {
	rec := e.in.Records[dec.InstanceID]
	if rec.State == state.Idle {
		keep := state.D(e.in.Pools[dec.Pool].Stopped.KeepSeconds)
		stopped, err := storeOf(e.d).Stop(ctx, rec.Ref(), keep)
		if err != nil {
			dec.Action, dec.Reason = Keep, dec.Reason+"; kept: record not stopped: "+err.Error()
			return dec
		}
		dec.Assignment = stopped.Assignment
		dec.Reason += e.deregister(ctx, dec)
		dec.Deregister = nil
	}
	err := e.ec2.Stop(ctx, dec.InstanceID)
	if err == nil {
		return dec
	}
	dec.Reason += "; EC2 did not stop it (" + err.Error() + "): retired instead"
	dec.Kind = KindScaleDown
	retired, gone := e.retire(ctx, dec)
	retired.Action = Keep
	if gone {
		retired.Action = Terminate
	}
	return retired
}
