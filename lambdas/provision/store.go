package provision

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The state provision uses, declared next to its use, one interface per
// aggregate of the state table: provision compiles against these methods only.

// instanceStore is what provision reads and writes of the instance records (state.Instances).
type instanceStore interface {
	Adopt(ctx context.Context, r state.Ref, maxRuntime, runtimeCap time.Duration) (*state.Instance, error)
	ByPoolState(ctx context.Context, pool string, st state.State, before time.Time) ([]state.Instance, error)
	Create(ctx context.Context, n state.NewInstance) (*state.Instance, error)
	Get(ctx context.Context, key state.Key) (*state.Instance, error)
	GetMany(ctx context.Context, keys []state.Key) (map[state.Key]*state.Instance, error)
	LiveIDs(ctx context.Context, pool string) (map[string]string, error)
	MarkRunning(ctx context.Context, r state.Ref, maxRuntime, runtimeCap time.Duration) (*state.Instance, error)
	Terminate(ctx context.Context, key state.Key, t state.Termination) (*state.Instance, error)
	Unclaim(ctx context.Context, r state.Ref, idleTTL time.Duration, removal *state.Registration) (*state.Instance, error)
	Start(ctx context.Context, key state.Key, req state.ClaimRequest, ttl time.Duration) (*state.Instance, error)
}

// runStore is what provision reads and writes of the run items (state.Runs).
type runStore interface {
	AddRunInstances(ctx context.Context, runID string, ids ...string) (*state.Run, error)
	GetRun(ctx context.Context, runID string) (*state.Run, error)
	GiveUpRunInstance(ctx context.Context, runID, id string) error
	SetRunStatus(ctx context.Context, runID string, to state.RunStatus, detail string, from ...state.RunStatus) (*state.Run, error)
	StartRun(ctx context.Context, r state.Run) (run *state.Run, created bool, err error)
}

// poolStore is what provision reads and writes of the pool configurations (state.Pools).
type poolStore interface {
	ListPoolConfigs(ctx context.Context) ([]state.PoolConfig, error)
}

// capacityStore is what provision reads and writes of the pools' capacity and fair-share items (state.Capacity).
type capacityStore interface {
	Ahead(ctx context.Context, pool, runID string, since time.Time) (int, error)
	Queue(ctx context.Context, pool, runID, repo string, since, until time.Time, maxPlaces int) error
	Reserve(ctx context.Context, pool, id string, n, max int, hold time.Duration, count func(context.Context) (map[string]string, error)) error
	ReturnProvisionLease(ctx context.Context, pool, repoID, id string) error
	SettleReservation(ctx context.Context, pool, id string, launched []string, hold time.Duration) error
	TakeProvisionLease(ctx context.Context, pool, repoID, repo, id string, until time.Time, max int) error
	Unqueue(ctx context.Context, pool, runID string) error
}

// spotBreakerStore is what provision reads and writes of the pools' spot breakers (state.SpotBreakers).
type spotBreakerStore interface {
	GetSpotBreaker(ctx context.Context, pool string) (*state.SpotBreaker, error)
}

// stateStore is every aggregate provision uses.
type stateStore interface {
	instanceStore
	runStore
	poolStore
	capacityStore
	spotBreakerStore
}

// storeOf narrows the control plane's store to provision's view.
func storeOf(d *controlplane.Deps) stateStore { return d.Store }
