// Package statetest builds state tables and records in a known state for the
// tests of other packages.
package statetest

import (
	"context"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// NewStore creates a fresh state table in moto (with the options given, if
// any) and returns a store on it.
func NewStore(t testing.TB, env *awstest.Moto, opts ...state.TableOptions) *state.Store {
	t.Helper()
	db := env.Config(t).DynamoDB()
	name := awstest.Name(t, "state")
	var o state.TableOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if err := state.CreateTable(context.Background(), db, name, o); err != nil {
		t.Fatal(err)
	}
	return state.New(db, name)
}

// Spec describes the instance a helper creates.
type Spec struct {
	ID, Pool, Owner, InstanceType, UsageClass string
	// RoleID is the pool's instance role id (the record's key is
	// <RoleID>:<ID>); required, as Store.Create requires it.
	RoleID string
}

// Pooled walks a new record through created, running and release to a clean
// idle instance, as the agent and the control plane would.
func Pooled(t testing.TB, s *state.Store, sp Spec) *state.Instance {
	t.Helper()
	ctx := context.Background()
	inst, err := s.Create(ctx, state.NewInstance{ID: sp.ID, RoleID: sp.RoleID, Pool: sp.Pool, Owner: sp.Owner, RunID: "seed-" + sp.ID,
		Assignment: state.NewAssignment(), InstanceType: sp.InstanceType, UsageClass: sp.UsageClass, TTL: 10 * time.Minute})
	check(t, err)
	check(t, s.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalRegOK, ""))
	inst, err = s.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	check(t, err)
	inst, err = s.Release(ctx, inst.Ref(), inst.RunID, 15*time.Minute, nil)
	check(t, err)
	check(t, s.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalRemoveRegOK, ""))
	inst, err = s.MarkPooled(ctx, inst.Ref())
	check(t, err)
	return inst
}

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
