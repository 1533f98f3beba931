package controlplane

import (
	"context"
	"errors"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Terminator ends instances in EC2; ones already gone are no error.
type Terminator interface {
	Terminate(ctx context.Context, ids []string) error
}

// Retire ends instances whose lease is over (or that must go for reason),
// in the one order that never ends a job: each record is first marked
// terminated, conditionally on what the control plane gave it when it was
// read — poolState, leaseLimit, uses (state.Termination.Given) — and, with
// ifExpired, on its lease still being over, so an instance renewed,
// extended, released or claimed meanwhile is left alone; only the
// instances whose records were marked are then terminated in EC2, and
// their GitHub runners deleted. If EC2 fails after the records were
// marked, refresh's reconciliation terminates the instances on its next
// run. Not on the assignment read: the instance role may write it (the
// agent's conditions name it), and root on the instance would rewrite it
// between every read and write and live on, forged (state.LifeNotGiven)
// or past its lease. The records must be read whole, not from an index.
//
// It returns the instances it ended and everything that went wrong (a
// marked record whose runner could not be deleted is still ended).
func (d *Deps) Retire(ctx context.Context, ec2 Terminator, insts []*state.Instance, reason string, ifExpired bool) ([]*state.Instance, error) {
	var errs []error
	var marked []*state.Instance
	for _, inst := range insts {
		t := state.Termination{Given: inst, IfExpired: ifExpired, Reason: reason}
		if inst.TerminatedReason != "" {
			t.Reason = inst.TerminatedReason
		}
		if _, err := d.Store.Terminate(ctx, inst.Key, t); err != nil {
			if state.ClauseOf(err) == "" {
				errs = append(errs, err)
			}
			continue
		}
		marked = append(marked, inst)
	}
	if len(marked) == 0 {
		return nil, errors.Join(errs...)
	}
	ids := make([]string, len(marked))
	for i, inst := range marked {
		ids[i] = inst.ID
	}
	if err := ec2.Terminate(ctx, ids); err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	for _, inst := range marked {
		// Every runner the record names, the just-in-time ones minted
		// for its last assignment too: a release that could not delete
		// them expired the instance.
		if err := d.DeleteInstanceRunners(ctx, inst); err != nil {
			errs = append(errs, err)
		}
	}
	return marked, errors.Join(errs...)
}
