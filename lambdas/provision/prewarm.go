package provision

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/pool"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// PrewarmGrace lengthens a pre-warmed instance's created lease
// (state.PrewarmGrace, where refresh's judgement of a record's life reads it too).
const PrewarmGrace = state.PrewarmGrace

// Prewarm launches n instances of pool p that belong to no run, through the
// path a provision's creation takes (the reservation against the pool's
// cap, one fleet request, records written at once, an instance whose record
// could not be written terminated). They boot and run the pre-runner
// script; no runner is registered for them. Refresh moves each to idle
// when its agent says UD_OK (created → idle), and a provision then claims
// it like any pooled instance. It returns the instances recorded.
func Prewarm(ctx context.Context, deps Deps, p *state.PoolConfig, n int) ([]string, error) {
	matcher, err := pool.NewMatcher(p.UsageClass, nil)
	if err != nil {
		return nil, err
	}
	pv := &provisioner{
		d: deps.Deps, fleet: deps.EC2, start: time.Now(), cleanup: context.WithoutCancel(ctx),
		req: &request{Input: Input{Pool: p.Name, Owner: p.Owner, UsageClass: p.UsageClass}, pool: p, count: n,
			types: matcher.Allowed(p.InstanceTypes), matcher: matcher},
		log:  deps.Log.With("pool", p.Name, "prewarm", n),
		mine: map[string]*member{},
	}
	members, err := pv.create(ctx, n, nil)
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.inst.ID
	}
	return ids, err
}
