package refresh

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// FleetEC2 is refresh's view of a deployment's fleet.
type FleetEC2 struct{ Fleet *fleet.Fleet }

// Live lists the deployment's instances EC2 has not terminated.
func (f FleetEC2) Live(ctx context.Context) ([]LiveInstance, error) {
	insts, err := f.Fleet.List(ctx, fleet.Filter{})
	if err != nil {
		return nil, err
	}
	out := make([]LiveInstance, len(insts))
	for i, in := range insts {
		out[i] = LiveInstance{ID: in.ID, Pool: in.Tags[fleet.TagPool], Assignment: in.Tags[fleet.TagAssignment], LaunchedAt: in.LaunchTime, State: in.State}
	}
	return out, nil
}

// Reclaimed reads the ended instances among ids and says which EC2 ended
// for their spot capacity.
func (f FleetEC2) Reclaimed(ctx context.Context, ids []string) (map[string]bool, error) {
	if len(ids) == 0 {
		return nil, nil // fleet.List would read every ended instance
	}
	insts, err := f.Fleet.List(ctx, fleet.Filter{IDs: ids, States: []string{"shutting-down", "terminated"}})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, in := range insts {
		if in.Reclaimed() {
			out[in.ID] = true
		}
	}
	return out, nil
}

// Terminate terminates instances; ones already gone are no error.
func (f FleetEC2) Terminate(ctx context.Context, ids []string) error {
	_, err := f.Fleet.Terminate(ctx, ids)
	return err
}

// Reasons of a record whose instance EC2 no longer has.
const (
	ReasonGone            = "instance gone from EC2"
	ReasonGoneInterrupted = "instance gone from EC2 after a spot interruption notice"
	ReasonGoneReclaimed   = "instance gone from EC2: EC2 took its spot capacity back (" + fleet.ReasonSpotTermination + ")"
)

// reconcile compares EC2 with the records. An instance the index did not
// show is terminated only once a consistent read finds its record absent or
// terminated and it is older than createdTTL (a provision may still be
// writing it); a pool whose records could not be read is skipped, and so
// are instances of unknown pools when any pool was skipped. Records whose
// instance is gone from EC2 are marked terminated, conditionally on the
// assignment read.
func (r *refresher) reconcile(ctx context.Context, pools []state.PoolConfig, known map[string]*state.Instance, unread map[string]bool) error {
	instances, err := r.ec2.Live(ctx)
	if err != nil {
		return err
	}
	grace := map[string]time.Duration{}
	maxGrace := time.Duration(0)
	for _, p := range pools {
		g := state.D(p.Timings.WithDefaults().CreatedTTL)
		grace[p.Name] = g
		maxGrace = max(maxGrace, g)
	}
	inEC2 := map[string]bool{}
	var candidates []LiveInstance
	for _, in := range instances {
		inEC2[in.ID] = true
		if rec, ok := known[in.ID]; ok {
			r.stoppedOutside(ctx, rec, in)
			continue
		}
		g, ok := grace[in.Pool]
		if !ok && len(unread) > 0 {
			continue // its pool may be one we could not read
		}
		if !ok {
			g = maxGrace
		}
		if unread[in.Pool] || r.now.Sub(in.LaunchedAt) < g {
			continue
		}
		candidates = append(candidates, in)
	}
	if err := r.terminateUnrecorded(ctx, pools, candidates); err != nil {
		return err
	}
	var missing []*state.Instance
	for id, inst := range known {
		if !inEC2[id] && r.now.Sub(time.Unix(inst.LaunchedAt, 0)) >= grace[inst.Pool] {
			missing = append(missing, inst)
		}
	}
	reclaimed := r.reclaimed(ctx, missing)
	var gone []*state.Instance
	for _, inst := range missing {
		reason, kind := ReasonGone, KindGone
		// The record (read whole by pool) says whether its agent heard a
		// spot interruption notice: EC2 took the instance back, which is
		// no repair but the price of spot. The notice counts under any
		// assignment: a release may have come between it and EC2 (the
		// runner's job failed, the run was released), and an instance
		// that had one is never pooled again (controplane.Repool).
		// Without the agent's word (killed, its notice never read, or
		// silenced by root on the instance), EC2's state reason still says
		// it (spot.go).
		if _, why, interrupted := interruption(inst, reclaimed); interrupted {
			reason, kind = why, KindInterrupted
		}
		if _, err := storeOf(r.d).Terminate(ctx, inst.Key, state.Termination{Assignment: inst.Assignment, Reason: reason}); err == nil {
			gone = append(gone, inst)
			r.out.Terminated = append(r.out.Terminated, Decision{inst.ID, inst.Pool, reason, kind})
		} else if state.ClauseOf(err) == "" {
			r.fail(err)
		}
	}
	for _, inst := range gone {
		r.deleteRunner(ctx, inst)
		if sig, _, interrupted := interruption(inst, reclaimed); interrupted {
			r.noteInterruption(ctx, inst)
			r.lostJob(ctx, inst, sig)
		}
	}
	return nil
}

// stoppedOutside expires the record of an instance EC2 shows stopping or
// stopped although the control plane never stopped it (an operator, a
// script, an EC2 scheduled event): its agent is halted, so it serves no
// run and takes no claim, and it would sit stopped for as long as its
// lease said. A created record is left alone: a start (state.Start)
// writes it before it calls EC2, and the records are read before EC2 is
// listed. The expiry is conditional on the assignment read, so a stop by
// scale-down in between (a new assignment) is never undone.
func (r *refresher) stoppedOutside(ctx context.Context, rec *state.Instance, in LiveInstance) {
	if in.State != "stopping" && in.State != "stopped" {
		return
	}
	switch rec.State {
	case state.Idle, state.Claimed, state.Running:
	default:
		return
	}
	reason := "EC2 shows it " + in.State + " but the control plane never stopped it"
	if _, err := storeOf(r.d).Expire(ctx, rec.Ref(), reason); err == nil {
		r.out.Expired = append(r.out.Expired, Decision{rec.ID, rec.Pool, reason, KindStale})
	} else if state.ClauseOf(err) == "" {
		r.fail(err)
	}
}

// terminateUnrecorded reads the records of instances the index did not show
// and terminates those whose record is absent or terminated. A record in a
// live state means the index lagged or the record moved between the
// queries (a claim, idle → claimed): the instance is left alone.
// Each record is looked for under both keys it may have
// (state.Store.ByInstanceID).
func (r *refresher) terminateUnrecorded(ctx context.Context, pools []state.PoolConfig, candidates []LiveInstance) error {
	if len(candidates) == 0 {
		return nil
	}
	roles, poolOf := state.RolesByPool(pools), map[string]string{}
	ids := make([]string, len(candidates))
	for i, in := range candidates {
		ids[i], poolOf[in.ID] = in.ID, in.Pool
	}
	records, err := storeOf(r.d).ByInstanceID(ctx, ids, func(id string) []string { return []string{roles[poolOf[id]]} })
	if err != nil {
		return err
	}
	var orphans []string
	var decisions []Decision
	for _, in := range candidates {
		reason := "no record"
		if rec, ok := records[in.ID]; ok {
			if rec.State != state.Terminated {
				continue
			}
			reason = "its record says terminated"
		}
		orphans = append(orphans, in.ID)
		decisions = append(decisions, Decision{in.ID, in.Pool, reason, KindUnrecorded})
	}
	if len(orphans) == 0 {
		return nil
	}
	if err := r.ec2.Terminate(ctx, orphans); err != nil {
		return err
	}
	r.out.Terminated = append(r.out.Terminated, decisions...)
	// An instance without a record was launched by a provision that died
	// before writing it: the capacity it reserved is free now.
	for _, in := range candidates {
		if _, ok := records[in.ID]; !ok && in.Assignment != "" && in.Pool != "" {
			if err := storeOf(r.d).SettleReservation(ctx, in.Pool, in.Assignment, nil, 0); err != nil {
				r.fail(err)
			}
		}
	}
	return nil
}
