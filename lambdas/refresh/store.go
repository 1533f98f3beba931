package refresh

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The state refresh uses, declared next to its use, one interface per
// aggregate of the state table: refresh compiles against these methods only.

// instanceStore is what refresh reads and writes of the instance records (state.Instances).
type instanceStore interface {
	Adopt(ctx context.Context, r state.Ref, maxRuntime, runtimeCap time.Duration) (*state.Instance, error)
	ByInstanceID(ctx context.Context, ids []string, roleIDs func(instanceID string) []string) (map[string]*state.Instance, error)
	ByPoolState(ctx context.Context, pool string, st state.State, before time.Time) ([]state.Instance, error)
	Expire(ctx context.Context, r state.Ref, reason string) (*state.Instance, error)
	GetMany(ctx context.Context, keys []state.Key) (map[state.Key]*state.Instance, error)
	JoinPool(ctx context.Context, r state.Ref, idleTTL time.Duration) (*state.Instance, error)
	MarkPooled(ctx context.Context, r state.Ref) (*state.Instance, error)
	NoteBeat(ctx context.Context, r state.Ref, beats int64) (*state.Instance, error)
	SetRunnerTarget(ctx context.Context, key state.Key, pool string, t runnerrelease.Target) (*state.Instance, error)
	Terminate(ctx context.Context, key state.Key, t state.Termination) (*state.Instance, error)
}

// runStore is what refresh reads and writes of the run items (state.Runs).
type runStore interface {
	GetRun(ctx context.Context, runID string) (*state.Run, error)
	NoteRunInterrupted(ctx context.Context, runID, instanceID, rerun string) (*state.Run, error)
}

// rerunStore is what refresh reads and writes of the reruns (state.Reruns).
type rerunStore interface {
	DropPendingRerun(ctx context.Context, r state.Rerun) error
	MoveRerun(ctx context.Context, r state.Rerun, from, to, detail string, tried bool) (*state.Rerun, error)
	PendingReruns(ctx context.Context, pool string) ([]state.Rerun, error)
	RequestRerun(ctx context.Context, r state.Rerun) (created bool, err error)
}

// poolStore is what refresh reads and writes of the pool configurations (state.Pools).
type poolStore interface {
	ListPoolConfigs(ctx context.Context) ([]state.PoolConfig, error)
	SetLatestTarget(ctx context.Context, pool string, t runnerrelease.Target) error
}

// capacityStore is what refresh reads and writes of the pools' capacity and fair-share items (state.Capacity).
type capacityStore interface {
	SettleReservation(ctx context.Context, pool, id string, launched []string, hold time.Duration) error
}

// runnerReleaseStore is what refresh reads and writes of the cached runner releases (state.RunnerReleases).
type runnerReleaseStore interface {
	GetReleases(ctx context.Context) (*state.Releases, error)
	PutReleases(ctx context.Context, r state.Releases) error
}

// spotBreakerStore is what refresh reads and writes of the pools' spot breakers (state.SpotBreakers).
type spotBreakerStore interface {
	GetSpotBreaker(ctx context.Context, pool string) (*state.SpotBreaker, error)
	NoteSpotInterruption(ctx context.Context, pool, id string) (*state.SpotBreaker, error)
}

// stateStore is every aggregate refresh uses.
type stateStore interface {
	instanceStore
	runStore
	rerunStore
	poolStore
	capacityStore
	runnerReleaseStore
	spotBreakerStore
}

// storeOf narrows the control plane's store to refresh's view.
func storeOf(d *controlplane.Deps) stateStore { return d.Store }
