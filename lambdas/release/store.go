package release

import (
	"context"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The state release uses, declared next to its use, one interface per
// aggregate of the state table: release compiles against these methods only.

// instanceStore is what release reads and writes of the instance records (state.Instances).
type instanceStore interface {
	ByRun(ctx context.Context, runID string) ([]state.Instance, error)
}

// runStore is what release reads and writes of the run items (state.Runs).
type runStore interface {
	GetRun(ctx context.Context, runID string) (*state.Run, error)
	SetRunStatus(ctx context.Context, runID string, to state.RunStatus, detail string, from ...state.RunStatus) (*state.Run, error)
}

// stateStore is every aggregate release uses.
type stateStore interface {
	instanceStore
	runStore
}

// storeOf narrows the control plane's store to release's view.
func storeOf(d *controlplane.Deps) stateStore { return d.Store }
