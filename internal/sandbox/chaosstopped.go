package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The stopped tier under chaos (issue 41). ChaosDeploy gives the linux
// pool a stopped tier (ChaosStoppedTier): its idle window keeps two idle,
// so the scale-down the suite runs every few seconds stops the idle
// instances beyond them while the tier has room, and a workflow that
// finds no warm instance starts a stopped one before it launches. The
// fault group "stops" adds EC2 refusing a start for want of capacity
// (InsufficientInstanceCapacity, as for a stopped instance whose type has
// none left in its zone: the provision terminates it and launches
// instead). The invariants learn the state:
//
//	 1. a stopped instance is alive with a live record: neither lost nor
//	    leaked (check reads the stopped records too);
//	 6. an instance a run uses is never stopped under it (the sampler
//	    notes when it saw each instance stopping or stopped);
//	19. after settling, a record stopped has its instance stopped in EC2
//	    (or stopping), an instance EC2 shows stopped has a record stopped,
//	    and no runner of a stopped instance is registered;
//	15/5. a started instance runs its job clean: every chaos job's
//	    prologue fails the job on another run's leftovers (hostile.go),
//	    and a job failed for the control plane is a violation (5).

// ChaosStoppedTier is the linux pool's stopped tier in ChaosDeploy: two
// stopped at most, kept 60 s (the least the provider takes), so that
// stopped instances are both started and terminated past their keep time
// in a run of a few minutes.
var ChaosStoppedTier = StoppedTier{Max: 2, KeepSeconds: 60}

const faultStartRefused = "EC2 refuses a start of a stopped instance (InsufficientInstanceCapacity)"

// startRefusalEvery: one StartInstances in that many is refused.
const startRefusalEvery = 3

// startRefused is Faults.StartRefused: one start in startRefusalEvery,
// drawn from the run's seed.
func (c *chaos) startRefused(ids []string) bool {
	if c.intn(startRefusalEvery) != 0 {
		return false
	}
	c.count(faultStartRefused)
	c.mu.Lock()
	now := time.Now()
	for _, id := range ids {
		c.acts[id] = append(c.acts[id], "EC2 refused its start at "+c.at(now))
	}
	c.mu.Unlock()
	return true
}

// noteStarts counts what a provision did with the stopped tier.
func (c *chaos) noteStarts(started int, refused []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.activity["instances started from the stopped tier"] += started
	c.activity["starts EC2 refused (a launch instead)"] += len(refused)
}

// checkStopped returns the violations of invariant 19 among the live
// records and EC2's instances.
func (c *chaos) checkStopped(live []fleet.Instance, records map[string]state.Instance, registered map[string]string) []string {
	var v []string
	ec2 := map[string]string{}
	for _, in := range live {
		ec2[in.ID] = in.State
	}
	for id, r := range records {
		if r.State != state.Stopped {
			continue
		}
		if st := ec2[id]; st != "" && st != "stopped" && st != "stopping" {
			v = append(v, fmt.Sprintf("[19] record %s is stopped but EC2 shows it %s", id, st))
		}
		if name, ok := registered[id]; ok {
			v = append(v, fmt.Sprintf("[19] stopped instance %s still has runner %s registered", id, name))
		}
	}
	for id, st := range ec2 {
		if r, ok := records[id]; ok && (st == "stopped" || st == "stopping") && r.State != state.Stopped {
			v = append(v, fmt.Sprintf("[19] EC2 shows %s %s but its record is %s: %s", id, st, r.State, describe(r)))
		}
	}
	return v
}

// stoppedUnder returns, for invariant 6, the moments the sampler saw one
// of a run's instances stopping or stopped while the run used it (between
// from and to). Called with c.mu held.
func (c *chaos) stoppedUnder(id string, from, to time.Time) (time.Time, bool) {
	for _, at := range c.downs[id] {
		if at.After(from) && at.Before(to) {
			return at, true
		}
	}
	return time.Time{}, false
}

// registeredRunners maps each instance to a runner of it GitHub lists.
func (c *chaos) registeredRunners() map[string]string {
	registered := map[string]string{}
	for _, rn := range c.sb.GitHub.Runners() {
		if inst, ok := github.InstanceOf(rn.Name); ok {
			registered[inst] = rn.Name
		}
	}
	return registered
}

// requireStoppedTier fails a run whose linux pool has no stopped tier while
// the group "stops" plays: it would test nothing of it.
func (c *chaos) requireStoppedTier(ctx context.Context) error {
	p, err := c.store.GetPoolConfig(ctx, PoolJIT)
	if err != nil || p == nil || p.Stopped == nil {
		return fmt.Errorf("fault group stops: pool %s has no stopped tier (deploy with ChaosDeploy), or leave the group out: %v", PoolJIT, err)
	}
	return nil
}
