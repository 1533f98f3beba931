package main

import (
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// A spot pool that allows on-demand launches on-demand while its spot
// breaker is open, and says so; a pool that does not keeps launching spot.
func TestAnOpenSpotBreakerMakesASpotPoolLaunchOnDemandWhereThePoolAllowsIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		fallback bool
		want     string
	}{
		{"the pool allows on-demand", true, state.UsageClassOnDemand},
		{"the pool is spot only", false, state.UsageClassSpot},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := deploy(t, func(p *state.PoolConfig) { p.UsageClass, p.OnDemandFallback = state.UsageClassSpot, c.fallback })
			var before provisionOut
			d.call("provision", map[string]any{"runId": "before", "pool": "linux"}, &before)
			if got := before.Instances[0].UsageClass; got != state.UsageClassSpot || before.SpotBreaker {
				t.Fatalf("with the breaker closed: launched %s (breaker %v), want spot", got, before.SpotBreaker)
			}
			for _, id := range []string{"i-taken-1", "i-taken-2"} {
				if _, err := d.store.NoteSpotInterruption(ctx, "linux", id); err != nil {
					t.Fatal(err)
				}
			}
			var out provisionOut
			d.call("provision", map[string]any{"runId": "after", "pool": "linux"}, &out)
			if got := out.Instances[0].UsageClass; out.Status != "ready" || got != c.want || out.SpotBreaker != (c.want == state.UsageClassOnDemand) || out.UsageClass != state.UsageClassSpot {
				t.Fatalf("with the breaker open: %+v, want launched %s", out, c.want)
			}
		})
	}
}
