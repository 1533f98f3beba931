package pool

import (
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

func TestACleanInstanceGoesBackIntoItsPoolUnlessEC2TakesItBackOrThePoolDrains(t *testing.T) {
	signals := func(names ...string) map[string]state.Signal {
		m := map[string]state.Signal{}
		for _, n := range names {
			m[n] = state.Signal{}
		}
		return m
	}
	cases := []struct {
		name       string
		signals    []string
		draining   bool
		want       Refusal
		wantReason string
	}{
		{"clean, pool open", nil, false, "", ""},
		{"spot interruption notice", []string{state.SignalInterrupted}, false, RefusedInterrupted, "spot interruption notice"},
		{"rebalance recommendation", []string{state.SignalRebalance}, false, RefusedRebalance, "EC2 recommended rebalancing the spot instance"},
		{"pool draining", nil, true, RefusedDraining, "pool draining"},
		{"interruption comes before rebalance", []string{state.SignalRebalance, state.SignalInterrupted}, false, RefusedInterrupted, "spot interruption notice"},
		{"rebalance comes before draining", []string{state.SignalRebalance}, true, RefusedRebalance, "EC2 recommended rebalancing the spot instance"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Admit(&state.Instance{Signals: signals(c.signals...)}, &state.PoolConfig{Draining: c.draining})
			if got != c.want {
				t.Fatalf("Admit = %q, want %q", got, c.want)
			}
			if got != "" && got.ExpireReason() != c.wantReason {
				t.Fatalf("ExpireReason = %q, want %q", got.ExpireReason(), c.wantReason)
			}
		})
	}
}
