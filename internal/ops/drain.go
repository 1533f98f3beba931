package ops

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Drainer is what Drain needs of the state table (*state.Store).
type Drainer interface {
	Reader
	Writer
	SetDraining(ctx context.Context, pool string, on bool) error
}

// DrainView is what a drain did.
type DrainView struct {
	Pool     string `json:"pool"`
	Draining bool   `json:"draining"`
	// Retired are the idle instances whose lease the drain ended (refresh
	// terminates them).
	Retired []string `json:"retired"`
	// AlreadyRetired are idle instances retired before this drain (by
	// retire, or an earlier drain), whose lease had ended: the drain
	// leaves their record alone, refresh terminates them.
	AlreadyRetired []string `json:"alreadyRetired,omitempty"`
	// Left are idle instances the drain found but did not retire, with
	// why (a provision claimed one meanwhile: its run keeps it).
	Left map[string]string `json:"left,omitempty"`
	// RunsInFlight finish on their instances; a release retires those
	// instances instead of pooling them.
	RunsInFlight []string `json:"runsInFlight"`
}

// Drain turns a pool's drain on (or, with on false, off). While it drains
// the pool takes no new run (provision refuses it, naming the drain), pools
// nothing (release and refresh retire a clean instance instead), keeps
// nothing idle (scale-down) and pre-warms nothing; the runs it serves
// finish. Turning it on also retires the pool's idle instances now, each
// write bound to the assignment it read: a provision that claimed one
// first keeps it, and the drain says so.
func Drain(ctx context.Context, d Drainer, pool string, on bool) (*DrainView, error) {
	if pool == "" {
		return nil, BadInput("pool", "must not be empty")
	}
	if err := d.SetDraining(ctx, pool, on); state.IsNotFound(err) {
		names := []string{}
		if pools, lerr := d.ListPoolConfigs(ctx); lerr == nil {
			for _, p := range pools {
				names = append(names, p.Name)
			}
		}
		return nil, BadInput("pool", fmt.Sprintf("no pool %q in this table (pools: %s); nothing changed", pool, strings.Join(names, ", ")))
	} else if err != nil {
		return nil, err
	}
	v := &DrainView{Pool: pool, Draining: on, Retired: []string{}, RunsInFlight: []string{}}
	runs, err := inFlight(ctx, d, pool)
	if err != nil {
		return nil, err
	}
	v.RunsInFlight = slices.Sorted(maps.Keys(runs))
	if !on {
		return v, nil
	}
	idle, err := live(ctx, d, pool, state.Idle)
	if err != nil {
		return nil, err
	}
	for _, in := range idle {
		if in.TerminatedReason != "" {
			v.AlreadyRetired = append(v.AlreadyRetired, in.ID)
			continue
		}
		_, err := d.Expire(ctx, in.Ref(), "retired: pool draining")
		switch c := state.ClauseOf(err); {
		case err == nil:
			v.Retired = append(v.Retired, in.ID)
		case c != "":
			if v.Left == nil {
				v.Left = map[string]string{}
			}
			v.Left[in.ID] = fmt.Sprintf("changed since it was read (%s): claimed by a run, which keeps it", c)
		default:
			return v, fmt.Errorf("retire %s: %w (the pool is draining; run drain again to retire the rest)", in.ID, err)
		}
	}
	sort.Strings(v.Retired)
	sort.Strings(v.AlreadyRetired)
	return v, nil
}
