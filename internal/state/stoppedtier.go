package state

import "fmt"

// StoppedTier is a pool's stopped tier (stopped.go): at most Max of its
// instances stopped at once, each kept KeepSeconds before it is
// terminated. Nil (the default): scale-down terminates what it retires.
type StoppedTier struct {
	Max         int   `dynamodbav:"max" json:"max"`
	KeepSeconds int64 `dynamodbav:"keepSeconds" json:"keepSeconds"`
}

// StoppedTierNeedsOnDemand says why a spot pool without on-demand fallback
// cannot have a stopped tier: its spot instances come from instant
// CreateFleet requests, one-time requests, and EC2 stops only a spot
// instance of a persistent request: StopInstances answers
// UnsupportedOperation "You can only stop Spot Instances associated with
// persistent Spot Instance requests" (EC2's message, modelled by
// internal/sandbox/ec2states.go). Only on-demand instances are stopped.
const StoppedTierNeedsOnDemand = "a stopped tier holds on-demand instances only (EC2 cannot stop a spot instance of a one-time request, which is what the pool launches): set usageClass to on-demand or enable onDemandFallback"

// validate checks the tier of a pool launching usageClass, with or without
// on-demand fallback.
func (s StoppedTier) validate(usageClass string, onDemandFallback bool) error {
	switch {
	case s.Max < 1:
		return fmt.Errorf("stopped.max: must be at least 1, got %d", s.Max)
	case s.KeepSeconds < 60:
		return fmt.Errorf("stopped.keepSeconds: must be at least 60, got %d", s.KeepSeconds)
	case usageClass == UsageClassSpot && !onDemandFallback:
		return fmt.Errorf("stopped: %s", StoppedTierNeedsOnDemand)
	}
	return nil
}

// CanStop says whether an instance of usage class usageClass may enter
// the pool's stopped tier.
func (p *PoolConfig) CanStop(usageClass string) bool {
	return p.Stopped != nil && usageClass == UsageClassOnDemand
}
