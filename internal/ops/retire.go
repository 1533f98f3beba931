package ops

import (
	"context"
	"fmt"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// ghrunner retire: ending one idle instance's time in its pool.

// Writer is what Retire needs of the state table (*state.Store).
type Writer interface {
	FindInstance(ctx context.Context, instanceID string) (*state.Instance, error)
	Expire(ctx context.Context, r state.Ref, reason string) (*state.Instance, error)
}

// Retire ends an idle instance's time in the pool: its lease is expired
// (no claim takes it from then on) and refresh terminates it. It refuses
// an instance that serves a run (release the run instead), and the write
// is bound to the assignment it read: a provision that claims the
// instance meanwhile wins, and Retire changes nothing.
func Retire(ctx context.Context, w Writer, instanceID, reason string) (*InstanceView, error) {
	if instanceID == "" {
		return nil, BadInput("instance id", "must not be empty")
	}
	if strings.TrimSpace(reason) == "" {
		reason = "operator"
	}
	rec, err := w.FindInstance(ctx, instanceID)
	if state.IsNotFound(err) {
		return nil, BadInput("instance id", fmt.Sprintf("no record of %s in this table", instanceID))
	}
	if err != nil {
		return nil, err
	}
	if rec.State != state.Idle {
		what := string(rec.State)
		if rec.RunID != "" {
			what += " for run " + rec.RunID
		}
		return nil, BadInput("instance id", fmt.Sprintf("%s is %s: retire takes idle instances only (release its run, or wait for refresh); nothing changed", instanceID, what))
	}
	done, err := w.Expire(ctx, rec.Ref(), "retired: "+reason)
	if c := state.ClauseOf(err); c != "" {
		return nil, BadInput("instance id", fmt.Sprintf("%s changed while retiring it (%s: %v); nothing changed, look again", instanceID, c, err))
	}
	if err != nil {
		return nil, err
	}
	v := View(*done)
	return &v, nil
}
