package provision

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// takeLease applies fair share: one repository may hold only so many of
// the function's executions (state/fairshare.go). The lease is taken
// before anything slow, by the repository of the verified token, and
// refused at once. A call for a run that exists already takes none: it
// joins that run (join.go), and a caller whose connection to the first
// call was lost asks again while the first call still holds its lease
// (with max_provisions_per_repository 1 it would be refused). done, when
// not nil, gives the lease back.
func takeLease(ctx context.Context, d *controlplane.Deps, req *request, caller idtoken.Identity, start time.Time) (done func(), err error) {
	limit := req.pool.MaxProvisionsPerRepository
	if limit <= 0 {
		return nil, nil
	}
	if _, err := storeOf(d).GetRun(ctx, req.RunID); err == nil {
		return nil, nil // a join; Owns refuses another's run later
	} else if !state.IsNotFound(err) {
		return nil, err
	}
	lease := state.NewAssignment()
	until, ok := ctx.Deadline()
	if !ok {
		until = start.Add(req.timeout + rollbackReserve)
	}
	if err := storeOf(d).TakeProvisionLease(ctx, req.Pool, caller.RepositoryID, caller.Repository, lease, until, limit); err != nil {
		return nil, err
	}
	return func() {
		if err := storeOf(d).ReturnProvisionLease(context.WithoutCancel(ctx), req.Pool, caller.RepositoryID, lease); err != nil {
			d.Log.Warn("give back the provision lease; it ends at the invocation's deadline", "err", err)
		}
	}, nil
}
