package pool

import (
	"context"
	"errors"
	"sync"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Claims is the one write a Claimer makes (state.Instances' Claim).
type Claims interface {
	Claim(ctx context.Context, key state.Key, req state.ClaimRequest) (*state.Instance, error)
}

// Claimer claims the instances of pool messages with the state store's
// conditional write and keeps what it got.
type Claimer struct {
	Store   Claims
	Request state.ClaimRequest
	// RoleID is the pool's instance role id: messages name instances, and
	// their records are keyed by role and instance (state.InstanceKey).
	RoleID string

	mu sync.Mutex
	// Instances are the records this claimer won, as written.
	Instances []*state.Instance
	// Retire are idle instances that can no longer be reused (old launch
	// template, too many uses, too old, EC2 recommends rebalancing): their message is dropped and the
	// caller should expire them rather than leave them idle.
	Retire []*state.Instance
}

// Claim is a ClaimFunc. How a refused claim is read:
//   - another owner: the message is put back for a request of that owner;
//   - not reusable any more (template, uses, age, rebalance): stale, and
//     listed in Retire;
//   - gone, taken, expired, not clean for its current assignment, or another
//     pool: stale, because the message is from an earlier pooling of the
//     instance; its current pooling, if any, sent a message of its own.
func (c *Claimer) Claim(ctx context.Context, m Message) (Outcome, error) {
	req := c.Request
	if req.Registration != nil {
		copied := *req.Registration
		req.Registration = &copied
	}
	inst, err := c.Store.Claim(ctx, state.InstanceKey(c.RoleID, m.InstanceID), req)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.Instances = append(c.Instances, inst)
		return Claimed, nil
	}
	var current *state.Instance
	if ce := (*state.ConditionError)(nil); errors.As(err, &ce) {
		current = ce.Current
	}
	switch state.ClauseOf(err) {
	case "":
		return PutBack, err
	case state.ClauseOwner:
		return PutBack, nil
	case state.ClauseTemplate, state.ClauseUses, state.ClauseAge, state.ClauseRebalance:
		if current != nil {
			c.Retire = append(c.Retire, current)
		}
		return Stale, nil
	default:
		return Stale, nil
	}
}
