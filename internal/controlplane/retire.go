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
// terminated, conditionally on the assignment it had when it was read (and,
// with ifExpired, on its lease still being over), so an instance renewed,
// extended or claimed meanwhile is left alone; only the instances whose
// records were marked are then terminated in EC2, and their GitHub runners
// deleted. If EC2 fails after the records were marked, refresh's
// reconciliation terminates the instances on its next run.
//
// It returns the instances it ended and everything that went wrong (a
// marked record whose runner could not be deleted is still ended).
func (d *Deps) Retire(ctx context.Context, ec2 Terminator, insts []*state.Instance, reason string, ifExpired bool) ([]*state.Instance, error) {
	return d.retire(ctx, ec2, insts, reason, func(inst *state.Instance) state.Termination {
		return state.Termination{Assignment: inst.Assignment, IfExpired: ifExpired}
	})
}

// RetireForged ends instances whose records were judged forged
// (state.LifeNotGiven) as Retire does, but conditionally on what the
// control plane gave each record as read (state.Termination.Given), not on
// its assignment: the instance may write that, and root on it would
// otherwise rewrite it between refresh's read and its write, every time,
// and live on. A claim, a release or a lease the control plane gave since
// the read still leaves the instance alone.
func (d *Deps) RetireForged(ctx context.Context, ec2 Terminator, insts []*state.Instance, reason string) ([]*state.Instance, error) {
	return d.retire(ctx, ec2, insts, reason, func(inst *state.Instance) state.Termination {
		return state.Termination{Given: inst}
	})
}

func (d *Deps) retire(ctx context.Context, ec2 Terminator, insts []*state.Instance, reason string, on func(*state.Instance) state.Termination) ([]*state.Instance, error) {
	var errs []error
	var marked []*state.Instance
	for _, inst := range insts {
		t := on(inst)
		t.Reason = reason
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
		if inst.GithubRunnerID == 0 {
			continue
		}
		if err := d.DeleteInstanceRunner(ctx, inst.Owner, inst.GithubRunnerID, inst.ID); err != nil {
			errs = append(errs, err)
		}
	}
	return marked, errors.Join(errs...)
}
