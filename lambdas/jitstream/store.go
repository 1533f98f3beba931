package jitstream

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The state jitstream uses, declared next to its use, one interface per
// aggregate of the state table: jitstream compiles against these methods only.

// instanceStore is what jitstream reads and writes of the instance records (state.Instances).
type instanceStore interface {
	Get(ctx context.Context, key state.Key) (*state.Instance, error)
	RefuseJIT(ctx context.Context, key state.Key, assignment string, r state.JITRefusal, served int) (*state.Instance, error)
	TakeJITRequest(ctx context.Context, key state.Key, assignment string, seq int, at int64, every time.Duration) (*state.Instance, error)
}

// runStore is what jitstream reads and writes of the run items (state.Runs).
type runStore interface {
	GetRun(ctx context.Context, runID string) (*state.Run, error)
}

// stateStore is every aggregate jitstream uses.
type stateStore interface {
	instanceStore
	runStore
}

// storeOf narrows the control plane's store to jitstream's view.
func storeOf(d *controlplane.Deps) stateStore { return d.Store }
