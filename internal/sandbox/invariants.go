package sandbox

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// The invariants of the state the chaos run leaves behind (1-4, 16, and
// 19 of the stopped tier, chaosstopped.go),
// checked until refresh has settled; observe.go checks those about the
// past (5-7); chaosscaleset.go those of the scale-set mode (13-17):
//
//	13. every job assigned to the scale set ran exactly once and succeeded
//	    (unless an injected kill of its own agent explains it), on a runner
//	    of the scale set whose name ends with an instance of the pool;
//	14. no instance ran two jobs at once (jobs' Started-Finished per instance);
//	15. every job boundary wiped: no job saw a file an earlier job left;
//	16. after settling, no standing run (ss<id>-…) holds an instance and no
//	    runner of the scale set is registered;
//	17. never two listener tasks at once (sb.ECSViolations empty), and the
//	    listener runs at the end.

// check returns the violations of invariants 1, 4 and 16, about the state
// left: refresh may still settle them.
func (c *chaos) check(ctx context.Context) []string {
	var v []string
	live, err := c.fleet.List(ctx, fleet.Filter{})
	if err != nil {
		return []string{"list instances: " + err.Error()}
	}
	alive := map[string]bool{}
	for _, in := range live {
		alive[in.ID] = true
	}
	// The index finds the live records; a consistent read gets all of each
	// (the index does not project every attribute).
	var ids []string
	poolOf := map[string]string{}
	for _, pool := range Pools {
		for _, st := range state.LiveStates {
			recs, err := c.store.ByPoolState(ctx, pool, st, time.Time{})
			if err != nil {
				return []string{"query records: " + err.Error()}
			}
			for _, r := range recs {
				ids = append(ids, r.ID)
				poolOf[r.ID] = r.Pool
			}
		}
	}
	for _, in := range live {
		ids = append(ids, in.ID) // an instance whose record says terminated
		poolOf[in.ID] = in.Tags[fleet.TagPool]
	}
	pools, err := c.store.ListPoolConfigs(ctx)
	if err != nil {
		return []string{"read pools: " + err.Error()}
	}
	role := state.RolesByPool(pools)
	full, err := c.store.ByInstanceID(ctx, ids, func(id string) []string { return []string{role[poolOf[id]]} })
	if err != nil {
		return []string{"read records: " + err.Error()}
	}
	records := map[string]state.Instance{}
	for id, r := range full {
		if r != nil && r.State != state.Terminated {
			records[id] = *r
		}
	}
	// 1. Every instance alive has a live record, and every live record an
	// instance: nothing lost, nothing leaked.
	for id := range alive {
		if _, ok := records[id]; !ok {
			v = append(v, fmt.Sprintf("[1] instance %s runs without a live record (leaked): %s", id, c.describeInstance(ctx, id, live)))
		}
	}
	for id, r := range records {
		if !alive[id] {
			v = append(v, fmt.Sprintf("[1] record %s (%s) has no running instance (lost)", id, r.State))
		}
	}
	// 4. No instance pooled that was not cleanly deregistered: an idle
	// record is clean and no runner of its instance is registered.
	registered := c.registeredRunners()
	for id, r := range records {
		if r.State != state.Idle {
			continue
		}
		if !r.Clean() {
			v = append(v, fmt.Sprintf("[4] idle instance %s is not marked clean: %s", id, describe(r)))
		}
		if name, ok := registered[id]; ok {
			v = append(v, fmt.Sprintf("[4] idle instance %s still has runner %s registered", id, name))
		}
	}
	// 19. Stopped records and stopped instances agree (chaosstopped.go).
	v = append(v, c.checkStopped(live, records, registered)...)
	// 16. After settling, no standing run of the scale set holds an
	// instance and no runner of it is registered (chaosscaleset.go).
	v = append(v, c.checkStanding(ctx)...)
	sort.Strings(v)
	return v
}

// checkOnce returns the violations of invariants 2 and 3, about what
// happened: settling cannot change them.
func (c *chaos) checkOnce() []string {
	var v []string
	// Every AWS request of a function or an agent was allowed by the
	// policies terraform deployed (iam.go): a fault never makes the product
	// ask for what its roles may not do.
	for _, d := range c.sb.Denials() {
		v = append(v, "IAM denied: "+d.String())
	}
	// 2. No instance held two runIds at once: its runner registrations for
	// different labels never overlap in time.
	byInstance := map[string][]fakegithub.Registration{}
	for _, reg := range c.sb.GitHub.History() {
		if inst, ok := github.InstanceOf(reg.Name); ok {
			byInstance[inst] = append(byInstance[inst], reg)
		}
	}
	for inst, regs := range byInstance {
		for i := range regs {
			for j := i + 1; j < len(regs); j++ {
				a, b := regs[i], regs[j]
				if !slices.Equal(a.Labels, b.Labels) && overlap(a, b) {
					v = append(v, fmt.Sprintf("[2] instance %s was registered for %v and %v at once", inst, a.Labels, b.Labels))
				}
			}
		}
	}
	// 3. No job ran on a runner of another run: the runner that took a job
	// sits on an instance provision gave that job's run.
	c.mu.Lock()
	for _, use := range c.jobUses {
		job := use.job
		if job.Runner == "" {
			continue
		}
		inst, _ := github.InstanceOf(job.Runner)
		if !slices.Contains(c.given[use.run], inst) {
			v = append(v, fmt.Sprintf("[3] job %d of %s (runs-on %s) ran on %s, not one of its runners %v", job.ID, use.run, job.Label, job.Runner, c.given[use.run]))
		}
	}
	c.mu.Unlock()
	sort.Strings(v)
	return v
}

func describe(r state.Instance) string {
	var sig []string
	for name, s := range r.Signals {
		sig = append(sig, fmt.Sprintf("%s@%s", name, s.Assignment))
	}
	sort.Strings(sig)
	return fmt.Sprintf("state %s run %q assignment %s signals %v runner %q registration %v uses %d", r.State, r.RunID, r.Assignment, sig, r.RunnerName, r.Registration != nil, r.Uses)
}

func (c *chaos) describeInstance(ctx context.Context, id string, live []fleet.Instance) string {
	rec, err := c.store.FindInstance(ctx, id)
	out := fmt.Sprintf("record %v", err)
	if rec != nil {
		out = "record " + describe(*rec) + " terminatedReason " + rec.TerminatedReason
	}
	for _, in := range live {
		if in.ID == id {
			out += fmt.Sprintf("; launched %s ago, tags %v", time.Since(in.LaunchTime).Round(time.Second), in.Tags)
		}
	}
	return out
}

func overlap(a, b fakegithub.Registration) bool {
	end := func(r fakegithub.Registration) time.Time {
		if r.To.IsZero() {
			return time.Now()
		}
		return r.To
	}
	return a.From.Before(end(b)) && b.From.Before(end(a))
}
