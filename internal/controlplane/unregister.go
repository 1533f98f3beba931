package controlplane

import (
	"context"
	"fmt"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
)

// Unregister deletes owner's runner of this name through GitHub's API, so
// that it takes no job from now on. It needs nothing from the instance or
// its record: it is how the control plane withdraws a runner whose agent it
// cannot reach (its record unreadable, its signals unseen). No such runner
// is no error; a runner that runs a job is not deleted, and the error says
// so (github.IsBusy).
func (d *Deps) Unregister(ctx context.Context, owner, name string) error {
	r, err := d.GitHub.RunnerNamed(ctx, owner, name)
	if github.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return d.GitHub.DeleteRunner(ctx, owner, r.ID)
}

// DeleteInstanceRunner deletes owner's runner runnerID only if GitHub names
// it as a runner of instanceID (every name the control plane mints or the
// agent registers ends with the instance id, state.RunnerName). The id
// comes from a record its instance can write (docs/security.md, T6): an
// instance that put another runner's id there must not get that runner
// deleted. A runner that is gone already is no error.
func (d *Deps) DeleteInstanceRunner(ctx context.Context, owner string, runnerID int64, instanceID string) error {
	r, err := d.GitHub.GetRunner(ctx, owner, runnerID)
	if github.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !github.NameMatchesInstance(r.Name, instanceID) {
		return fmt.Errorf("runner %d of %s is named %s, not a runner of instance %s: left alone (its record names it: written by the instance?)", runnerID, owner, r.Name, instanceID)
	}
	return d.GitHub.DeleteRunner(ctx, owner, runnerID)
}
