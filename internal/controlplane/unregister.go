package controlplane

import (
	"context"

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
