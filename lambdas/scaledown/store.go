package scaledown

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The state scaledown uses, declared next to its use, one interface per
// aggregate of the state table: scaledown compiles against these methods only.

// instanceStore is what scaledown reads and writes of the instance records (state.Instances).
type instanceStore interface {
	ByInstanceID(ctx context.Context, ids []string, roleIDs func(instanceID string) []string) (map[string]*state.Instance, error)
	Renew(ctx context.Context, r state.Ref, idleTTL time.Duration) (*state.Instance, error)
	Terminate(ctx context.Context, key state.Key, t state.Termination) (*state.Instance, error)
	Stop(ctx context.Context, r state.Ref, keep time.Duration) (*state.Instance, error)
}

// poolStore is what scaledown reads and writes of the pool configurations (state.Pools).
type poolStore interface {
	ListPoolConfigs(ctx context.Context) ([]state.PoolConfig, error)
}

// stateStore is every aggregate scaledown uses.
type stateStore interface {
	instanceStore
	poolStore
}

// storeOf narrows the control plane's store to scaledown's view.
func storeOf(d *controlplane.Deps) stateStore { return d.Store }
