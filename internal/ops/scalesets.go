package ops

import (
	"context"
	"fmt"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// ScaleSetReader is what ScaleSets reads of the state table (*state.Store).
type ScaleSetReader interface {
	ListPoolConfigs(ctx context.Context) ([]state.PoolConfig, error)
	GetScaleSetStatus(ctx context.Context, pool string) (*state.ScaleSetStatus, error)
}

// ScaleSetView is a pool's scale set as status shows it: the pool's
// configuration names it, its listener says what it saw.
type ScaleSetView struct {
	Pool     string `json:"pool"`
	ScaleSet string `json:"scaleSet"`
	// Listener is what the listener serving it last wrote (its session's
	// holder, last poll, GitHub's statistics, live runs, last error);
	// nil: no listener has served it.
	Listener *state.ScaleSetStatus `json:"listener"`
}

// ScaleSets reads the scale set of every pool that has one, and the
// status its listener wrote, by pool.
func ScaleSets(ctx context.Context, r ScaleSetReader) ([]ScaleSetView, error) {
	pools, err := r.ListPoolConfigs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", err)
	}
	out := []ScaleSetView{}
	for _, p := range pools {
		if p.ScaleSet == nil {
			continue
		}
		st, err := r.GetScaleSetStatus(ctx, p.Name)
		if err != nil {
			return nil, fmt.Errorf("pool %s, scale set status: %w", p.Name, err)
		}
		out = append(out, ScaleSetView{Pool: p.Name, ScaleSet: p.ScaleSet.Name, Listener: st})
	}
	return out, nil
}
