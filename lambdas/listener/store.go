package listener

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The state listener uses, declared next to its use, one interface per
// aggregate of the state table: listener compiles against these methods only.

// instanceStore is what listener reads and writes of the instance records (state.Instances).
type instanceStore interface {
	Adopt(ctx context.Context, r state.Ref, maxRuntime, runtimeCap time.Duration) (*state.Instance, error)
	InPoolState(ctx context.Context, pool string, st state.State) ([]state.Instance, error)
	Get(ctx context.Context, key state.Key) (*state.Instance, error)
	MarkRunning(ctx context.Context, r state.Ref, maxRuntime, runtimeCap time.Duration) (*state.Instance, error)
}

// runStore is what listener reads and writes of the run items (state.Runs).
type runStore interface {
	SetRunJob(ctx context.Context, runID string, job state.RunJob) error
}

// stateStore is every aggregate listener uses.
type stateStore interface {
	instanceStore
	runStore
}

// storeOf narrows the control plane's store to listener's view.
func storeOf(d *controlplane.Deps) stateStore { return d.Store }
