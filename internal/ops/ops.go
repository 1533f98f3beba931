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
	"slices"
	"time"

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
	ByPoolState(ctx context.Context, pool string, st state.State, before time.Time) ([]state.Instance, error)
	GetRun(ctx context.Context, runID string) (*state.Run, error)
	GetMany(ctx context.Context, keys []state.Key) (map[state.Key]*state.Instance, error)
	ByInstanceID(ctx context.Context, ids []string, roleIDs func(instanceID string) []string) (map[string]*state.Instance, error)
	GetLastRun(ctx context.Context, handler string) (*state.LastRun, error)
	GetSpotBreaker(ctx context.Context, pool string) (*state.SpotBreaker, error)
}

// LiveStates are the states an instance is listed by (a terminated
// record leaves the index).
var LiveStates = []state.State{state.Created, state.Claimed, state.Running, state.Idle, state.Stopped}

// live lists the records of pool in st: the index finds them, a
// consistent batch read gets all of each (the index projects only what
// the functions query by). A record that left st in between is skipped.
func live(ctx context.Context, r Reader, pool string, st state.State) ([]state.Instance, error) {
	found, err := r.ByPoolState(ctx, pool, st, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("pool %s, %s instances: %w", pool, st, err)
	}
	keys := make([]state.Key, len(found))
	for i, in := range found {
		keys[i] = in.Key
	}
	full, err := r.GetMany(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("pool %s, %s instances: %w", pool, st, err)
	}
	out := []state.Instance{}
	for _, key := range slices.Sorted(slices.Values(keys)) {
		if rec := full[key]; rec != nil && rec.State == st && rec.Pool == pool {
			out = append(out, *rec)
		}
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
