// Package ops answers an operator's questions about a deployment from its
// state table: what each pool holds now, which instances are in which
// state, what a run was given. It only reads; what it shows is the table
// at the moment of the read (the index behind the per-state lists may lag
// a write by a moment, which is why the counts are a view, never a
// decision: the functions decide on consistent reads).
package ops

import (
	"context"
	"fmt"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// What every command shares: the table reads ops needs, the live states
// and how a pool's records in one are read, and the operator's bad input.
// Each command has its file (status.go, instances.go, runview.go, runs.go,
// tail.go, scalesets.go, drain.go, retire.go).

// Reader is what ops reads of the state table (*state.Store).
type Reader interface {
	ListPoolConfigs(ctx context.Context) ([]state.PoolConfig, error)
	InPoolState(ctx context.Context, pool string, st state.State) ([]state.Instance, error)
	GetRun(ctx context.Context, runID string) (*state.Run, error)
	ByInstanceID(ctx context.Context, ids []string, roleIDs func(instanceID string) []string) (map[string]*state.Instance, error)
	GetLastRun(ctx context.Context, handler string) (*state.LastRun, error)
	GetSpotBreaker(ctx context.Context, pool string) (*state.SpotBreaker, error)
}

// LiveStates are the states an instance is listed by: state.LiveStates,
// named here for the operator's --state flag.
var LiveStates = state.LiveStates

// live lists the records of pool in st (state.Instances.InPoolState),
// naming the pool and state when the table could not be read.
func live(ctx context.Context, r Reader, pool string, st state.State) ([]state.Instance, error) {
	out, err := r.InPoolState(ctx, pool, st)
	if err != nil {
		return nil, fmt.Errorf("pool %s, %s instances: %w", pool, st, err)
	}
	return out, nil
}

// BadInput is the operator's input refused: a *fielderr.Error of source
// fielderr.Operator, naming the input and the rule it broke.
func BadInput(field, rule string) error {
	return &fielderr.Error{Source: fielderr.Operator, Field: field, Rule: rule}
}

// IsBadInput says whether err is the operator's input, not the table.
func IsBadInput(err error) bool { return fielderr.Is(err, fielderr.Operator) }

// runRecords reads the records of a run's instances, by instance id. The
// run item names them by id; their keys carry the run's pool's instance
// role (state.Store.ByInstanceID).
func runRecords(ctx context.Context, r Reader, run *state.Run) (map[string]*state.Instance, error) {
	pools, err := r.ListPoolConfigs(ctx)
	if err != nil {
		return nil, err
	}
	role := state.RolesByPool(pools)[run.Pool]
	return r.ByInstanceID(ctx, run.InstanceIDs, func(string) []string { return []string{role} })
}
