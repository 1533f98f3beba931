package provision

import (
	"context"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// launchClass is the usage class of this provision's next launch: the one
// asked, or on-demand while the pool's spot breaker is open and the pool
// allows on-demand (state.LaunchClass). Each launch reads the breaker
// afresh, so a retry after the breaker opened launches on-demand too. A
// breaker that cannot be read changes nothing: it saves interruptions, it
// is no reason to fail a run.
func (p *provisioner) launchClass(ctx context.Context) string {
	asked := p.req.UsageClass
	if asked != state.UsageClassSpot || !p.req.pool.OnDemandFallback {
		return asked // no read where the breaker could change nothing
	}
	b, err := storeOf(p.d).GetSpotBreaker(ctx, p.req.Pool)
	if err != nil {
		p.log.Warn("spot breaker not read: launching as asked", "err", err)
		return asked
	}
	class, byBreaker := state.LaunchClass(asked, p.req.pool, b, p.d.Now())
	if byBreaker {
		p.log.Info("spot breaker open: launching on-demand", "until", b.OpenUntil, "interruptions", len(b.Recent(p.d.Now())))
		p.mu.Lock()
		p.byBreaker = true
		p.mu.Unlock()
	}
	return class
}
