package refresh

import (
	"context"
	"fmt"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Spot interruptions, beyond closing the record (reconcile.go): each one is
// noted in its pool's spot breaker (state.SpotBreaker), whose state every
// refresh reports for the pool's metric.

// BreakerView is a spot pool's breaker as refresh read it.
type BreakerView struct {
	Open bool `json:"open"`
	// OpenUntil is when launches may use spot again (unix seconds; 0
	// when closed).
	OpenUntil int64 `json:"openUntil,omitempty"`
	// Recent counts the interruptions within the breaker's window.
	Recent int `json:"recent"`
}

// noteInterruption notes in the pool's breaker that EC2 took back inst, a
// spot instance by the record's usage class (the control plane's word,
// never the instance's: its UD_INTERRUPTED only tells an interruption from
// a lost instance).
func (r *refresher) noteInterruption(ctx context.Context, inst *state.Instance) {
	if inst.UsageClass != state.UsageClassSpot {
		return
	}
	b, err := storeOf(r.d).NoteSpotInterruption(ctx, inst.Pool, inst.ID)
	if err != nil {
		r.fail(fmt.Errorf("spot breaker of pool %s: %w", inst.Pool, err))
		return
	}
	if b.Open(r.now) {
		r.d.Log.Warn("spot breaker open: the pool launches on-demand where it allows", "pool", inst.Pool, "until", b.OpenUntil, "interruptions", len(b.Recent(r.now)))
	}
}

// spotBreakers reads the breaker of every spot pool into the output.
func (r *refresher) spotBreakers(ctx context.Context, pools []state.PoolConfig) {
	for _, p := range pools {
		if p.UsageClass != state.UsageClassSpot {
			continue
		}
		b, err := storeOf(r.d).GetSpotBreaker(ctx, p.Name)
		if err != nil {
			r.fail(fmt.Errorf("spot breaker of pool %s: %w", p.Name, err))
			continue
		}
		v := BreakerView{Open: b.Open(r.now), Recent: len(b.Recent(r.now))}
		if v.Open {
			v.OpenUntil = b.OpenUntil
		}
		if r.out.SpotBreakers == nil {
			r.out.SpotBreakers = map[string]BreakerView{}
		}
		r.out.SpotBreakers[p.Name] = v
	}
}

// interruptedAmong counts, among the instances refresh just terminated for
// an expired lease, those whose agent had said a spot interruption notice:
// release ends such a lease at once (controlplane.Repool), so refresh may
// end the record before it finds the instance gone (reconcile.go). Their
// decisions become KindInterrupted.
func (r *refresher) interruptedAmong(ctx context.Context, decisions []Decision, known map[string]*state.Instance) {
	for i, d := range decisions {
		inst := known[d.InstanceID]
		if inst == nil {
			continue
		}
		if sig, interrupted := inst.Signals[state.SignalInterrupted]; interrupted {
			decisions[i].Kind = KindInterrupted
			r.noteInterruption(ctx, inst)
			r.lostJob(ctx, inst, sig)
		}
	}
}

// reclaimed asks EC2 which of the spot instances among missing it ended to
// take their capacity back. A record says it was interrupted when its agent
// wrote UD_INTERRUPTED on hearing the notice, but an agent may never say
// it (killed, asleep past the two minutes, or root on the instance
// silencing it): EC2's state reason is the control plane's own source, read
// only for records whose instance is gone. A failed read leaves the
// agent's word alone to decide, and fails the refresh.
func (r *refresher) reclaimed(ctx context.Context, missing []*state.Instance) map[string]bool {
	var ids []string
	for _, inst := range missing {
		if _, said := inst.Signals[state.SignalInterrupted]; !said && inst.UsageClass == state.UsageClassSpot {
			ids = append(ids, inst.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	out, err := r.ec2.Reclaimed(ctx, ids)
	if err != nil {
		r.fail(fmt.Errorf("state reasons of %d ended spot instances: %w", len(ids), err))
	}
	return out
}

// interruption says whether EC2 took inst back for its spot capacity, by
// its agent's notice or else by EC2's state reason (reclaimed), with the
// signal that names the assignment it came under (without the agent's
// word, the record's own) and the record's reason.
func interruption(inst *state.Instance, reclaimed map[string]bool) (state.Signal, string, bool) {
	if sig, said := inst.Signals[state.SignalInterrupted]; said {
		return sig, ReasonGoneInterrupted, true
	}
	if reclaimed[inst.ID] {
		return state.Signal{Assignment: inst.Assignment}, ReasonGoneReclaimed, true
	}
	return state.Signal{}, "", false
}
