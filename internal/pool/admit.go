package pool

import "github.com/ghrunner/terraform-provider-ghrunner/internal/state"

// Refusal says why an idle instance, clean for its assignment, must not go
// back into its pool; "" means it may. The rule's home: the release path's
// pooling (controlplane.Repool) asks it before it sends a pool message.
type Refusal string

const (
	// RefusedInterrupted: EC2 is taking the spot instance back.
	RefusedInterrupted Refusal = "spot interruption notice"
	// RefusedRebalance: EC2 recommends rebalancing the spot instance, the
	// early sign of its interruption; it ran its job to the end, but takes
	// no next.
	RefusedRebalance Refusal = "rebalance recommendation"
	// RefusedDraining: an operator drains the pool; nothing goes back in.
	RefusedDraining Refusal = "pool draining"
)

// Admit returns why clean, read once its agent confirmed it clean, may not
// be pooled in p, the first of interruption, rebalance and draining, or ""
// when it may.
func Admit(clean *state.Instance, p *state.PoolConfig) Refusal {
	if _, interrupted := clean.Signals[state.SignalInterrupted]; interrupted {
		return RefusedInterrupted
	}
	if clean.HasRebalance() {
		return RefusedRebalance
	}
	if p.Draining {
		return RefusedDraining
	}
	return ""
}

// ExpireReason is the reason the instance's expiry records.
func (r Refusal) ExpireReason() string {
	if r == RefusedRebalance {
		return "EC2 recommended rebalancing the spot instance"
	}
	return string(r)
}
