package controlplane

import (
	"context"
	"fmt"
	"sync"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// invocation holds what one invocation reads once and keeps: the pools'
// configurations, their instance roles, and the watcher that serves every
// signal wait. A function makes a Deps per invocation (lambdas/main.go),
// so there they never outlive it; the listener makes one per listening
// session of a pool (listener.Config.NewDeps), which they last.
type invocation struct {
	watchOnce sync.Once
	watch     *state.Watcher

	mu    sync.Mutex
	pools map[string]*state.PoolConfig
	roles map[string]string // pool name → instance role id (poolOfRole)
}

// Pool reads a pool's configuration once per invocation, with its timings
// completed from the defaults.
func (d *Deps) Pool(ctx context.Context, name string) (*state.PoolConfig, error) {
	d.inv.mu.Lock()
	defer d.inv.mu.Unlock()
	if p, ok := d.inv.pools[name]; ok {
		return p, nil
	}
	p, err := d.Store.GetPoolConfig(ctx, name)
	if err != nil {
		return nil, err
	}
	p.Timings = p.Timings.WithDefaults()
	if d.inv.pools == nil {
		d.inv.pools = map[string]*state.PoolConfig{}
	}
	d.inv.pools[name] = p
	return p, nil
}

// PoolOf is the pool a record belongs to by its key: the pool whose
// instance role id the key starts with. It sets the record's pool and
// owner from that pool, whatever the record said: an instance can write its
// own record, never its key (docs/security.md, T6).
func (d *Deps) PoolOf(ctx context.Context, inst *state.Instance) (*state.PoolConfig, error) {
	role := inst.Key.RoleID()
	name, err := d.poolOfRole(ctx, role)
	if err != nil {
		return nil, err
	}
	if role == "" || name == "" {
		return nil, fmt.Errorf("record %s: no pool has instance role %q: %w", inst.Key, role, state.ErrNotFound)
	}
	p, err := d.Pool(ctx, name)
	if err != nil {
		return nil, err
	}
	if inst.Pool != p.Name || inst.Owner != p.Owner {
		inst.Forged = append(inst.Forged, "pool="+inst.Pool, "owner="+inst.Owner)
		inst.Pool, inst.Owner = p.Name, p.Owner
	}
	return p, nil
}

// poolOfRole names the pool whose instance role has the id role, reading
// the pool configurations once per invocation ("" when none has).
func (d *Deps) poolOfRole(ctx context.Context, role string) (string, error) {
	d.inv.mu.Lock()
	defer d.inv.mu.Unlock()
	if d.inv.roles == nil {
		pools, err := d.Store.ListPoolConfigs(ctx)
		if err != nil {
			return "", err
		}
		d.inv.roles = state.RolesByPool(pools)
	}
	for name, id := range d.inv.roles {
		if id == role {
			return name, nil
		}
	}
	return "", nil
}

// Watcher serves every signal wait of these Deps with one batch read per
// WaitEvery for all the records waited on.
func (d *Deps) Watcher() *state.Watcher {
	d.inv.watchOnce.Do(func() { d.inv.watch = state.NewWatcher(d.Store, d.WaitEvery()) })
	return d.inv.watch
}
