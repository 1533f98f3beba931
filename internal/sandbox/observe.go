package sandbox

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// history is what a chaos run records for the invariants that look back
// (5-7), guarded by chaos.mu.
type history struct {
	runs     map[string]*runUse       // by runId, once provision answered ready
	jobUses  []*jobUse                // every job waited for
	ssJobs   []*ssJob                 // every scale-set job waited for (chaosscaleset.go)
	spots    []*spotUse               // spot interruptions played (chaosspot.go)
	kills    map[string][]kill        // injected agent kills, by instance
	life     map[string]*life         // what the sampler saw of each instance
	downs    map[string][]time.Time   // when the sampler saw each instance stopping or stopped (chaosstopped.go)
	acts     map[string][]string      // what refresh and scale-down said they did, by instance
	clocks   map[string]time.Duration // instances whose agent's clock is off
	activity map[string]int
	peak     map[string]int // most live instances of each pool at once
	peakAt   map[string]time.Time
}

func newHistory() history {
	return history{runs: map[string]*runUse{}, kills: map[string][]kill{}, life: map[string]*life{}, downs: map[string][]time.Time{}, acts: map[string][]string{}, clocks: map[string]time.Duration{}, activity: map[string]int{},
		peak: map[string]int{}, peakAt: map[string]time.Time{}}
}

// runUse: a run uses its instances from provision's answer (from) until
// its release invoke starts (to).
type runUse struct {
	ids      []string
	from, to time.Time
	fault    string
	pool     string
}

type jobUse struct {
	run           string
	id            int64
	queued, ended time.Time
	wait          time.Duration
	job           fakegithub.Job
	timedOut      bool // no result within wait
}

type kill struct {
	at   time.Time
	kind string
}

// life is an instance as the sampler saw it: alive at last, gone from the
// first sample that lacked it (zero while alive).
type life struct {
	last, gone time.Time
}

func (c *chaos) killed(id, kind string) {
	c.mu.Lock()
	c.kills[id] = append(c.kills[id], kill{at: time.Now(), kind: kind})
	c.faults[kind]++
	c.mu.Unlock()
}

// sampleFleet lists the pools' live instances every 200 ms: when each
// instance went or was stopped (invariant 6) and the most alive at once
// (invariant 7; a stopped instance counts against max_instances, as EC2
// still lists it).
func (c *chaos) sampleFleet(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		begin := time.Now()
		live, err := c.fleet.List(ctx, fleet.Filter{})
		end := time.Now()
		if err == nil {
			c.mu.Lock()
			present := map[string]bool{}
			perPool := map[string]int{}
			for _, in := range live {
				present[in.ID] = true
				perPool[in.Tags[fleet.TagPool]]++
				l := c.life[in.ID]
				if l == nil {
					l = &life{}
					c.life[in.ID] = l
				}
				l.last = begin
				if in.State == "stopping" || in.State == "stopped" {
					c.downs[in.ID] = append(c.downs[in.ID], begin)
				}
			}
			// The answer shows EC2 at some moment before it returned: an
			// instance missing from it was gone by then.
			for id, l := range c.life {
				if !present[id] && l.gone.IsZero() {
					l.gone = end
				}
			}
			for pool, n := range perPool {
				if n > c.peak[pool] {
					c.peak[pool], c.peakAt[pool] = n, begin
				}
			}
			c.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// checkHistory looks back on the run once it is over:
//
//	(5) no job failed, was cancelled or waited in vain for a runner because
//	    the control plane acted: only the workflow's own fault, its agent
//	    killed during the job (faultKillAgentInJob), on the job's instance
//	    (or, for a job never taken, one of its run's), explains a failure;
//	(6) no instance was terminated or stopped, and no runner of it deleted, while a
//	    run used it (from provision's answer until its release invoke
//	    started), unless that kill of its agent shortly before explains it.
//	    Background kills explain nothing: a restarted agent is the normal
//	    case the product must survive;
//	(7) no pool's live instances ever exceeded its max_instances.
//
// It returns the explained events and the violations.
func (c *chaos) checkHistory(ctx context.Context) (explained, v []string) {
	regs := c.sb.GitHub.History()
	c.mu.Lock()
	defer c.mu.Unlock()
	// A killed agent is back a second later: a kill explains what follows
	// it within the staleness limit and a margin, not more; to is when the
	// event happened, or (a job that never ended) when it was given up on.
	judge := func(event string, ids []string, from, to time.Time, happened bool, why func() string) {
		if happened {
			from = to.Add(-killExplains)
		}
		// The workflow's own fault explains it: its agent killed during
		// the job, or EC2 taking its spot instance back (chaosspot.go).
		for _, kind := range []string{faultKillAgentInJob, faultSpotInJob} {
			if k := c.killedIn(ids, from, to, kind); k != "" {
				explained = append(explained, event+" — explained: "+k+": "+why())
				return
			}
		}
		// A background kill excuses nothing (an agent is back a second
		// later, as systemd restarts it) but is worth knowing.
		if k := c.killedIn(ids, from, to, faultKillAgent); k != "" {
			event += " (after " + k + ")"
		}
		v = append(v, event+": "+why())
	}
	for _, j := range c.jobUses {
		if !j.timedOut && j.job.Result == "succeeded" {
			continue
		}
		run := c.runs[j.run]
		ids, on := run.ids, "no runner took it"
		if inst, ok := github.InstanceOf(j.job.Runner); ok {
			ids, on = []string{inst}, "on "+inst
		}
		what := fmt.Sprintf("%s (%s)", j.job.Result, lastLine(j.job.Output))
		if j.timedOut {
			what = fmt.Sprintf("still %s after %.0fs", j.job.State, j.wait.Seconds())
		}
		event := fmt.Sprintf("[5] job %d of %s [%s] %s, %s", j.id, j.run, run.fault, what, on)
		judge(event, ids, j.queued, j.ended, !j.timedOut, func() string { return c.whatHappened(ctx, ids, j.queued, j.ended, regs) })
	}
	for _, runID := range sortedKeysOf(c.runs) {
		run := c.runs[runID]
		window := fmt.Sprintf("provision answered %s, release invoked %s", c.at(run.from), c.at(run.to))
		for _, id := range run.ids {
			if l := c.life[id]; l != nil && !l.gone.IsZero() && !l.gone.After(run.to) {
				event := fmt.Sprintf("[6] instance %s of %s [%s] was terminated by %s while the run used it (%s)", id, runID, run.fault, c.at(l.gone), window)
				if l.gone.Before(run.from) {
					event = fmt.Sprintf("[6] instance %s of %s [%s] was already terminated (by %s) when provision answered %s", id, runID, run.fault, c.at(l.gone), c.at(run.from))
				}
				judge(event, []string{id}, run.from, l.gone, true, func() string { return c.whatHappened(ctx, []string{id}, run.from, run.to, regs) })
			}
			if at, ok := c.stoppedUnder(id, run.from, run.to); ok {
				event := fmt.Sprintf("[6] instance %s of %s [%s] was seen stopped at %s while the run used it (%s)", id, runID, run.fault, c.at(at), window)
				judge(event, []string{id}, run.from, at, true, func() string { return c.whatHappened(ctx, []string{id}, run.from, run.to, regs) })
			}
			for _, reg := range regs {
				// GitHub removes a just-in-time runner after its one job
				// (ephemeral), one no listener ever used, or one whose
				// listener took no job for minutes (jit-idle): the run goes
				// on with the next, which is not a deletion under it.
				if inst, _ := github.InstanceOf(reg.Name); inst != id || reg.EndedBy == "replaced" || reg.EndedBy == "ephemeral" || reg.EndedBy == "jit-unused" || reg.EndedBy == "jit-idle" ||
					reg.To.IsZero() || !reg.To.After(run.from) || !reg.To.Before(run.to) {
					continue
				}
				event := fmt.Sprintf("[6] runner %s %v of instance %s of %s [%s] was deleted (by the %s) at %s while the run used it (%s)",
					reg.Name, reg.Labels, id, runID, run.fault, map[string]string{"api": "REST API", "runner": "runner's config.sh remove"}[reg.EndedBy], c.at(reg.To), window)
				judge(event, []string{id}, run.from, reg.To, true, func() string { return c.whatHappened(ctx, []string{id}, run.from, run.to, regs) })
			}
		}
	}
	c.activity["max_instances"] = c.maxInstances
	for pool, peak := range c.peak {
		c.activity["peak live instances"] = max(c.activity["peak live instances"], peak)
		if peak > c.maxInstances {
			v = append(v, fmt.Sprintf("[7] %d instances of pool %s were live at once at %s, above its max_instances %d", peak, pool, c.at(c.peakAt[pool]), c.maxInstances))
		}
	}
	sort.Strings(explained)
	sort.Strings(v)
	return explained, v
}

// killExplains is how long after an injected agent kill a termination or
// runner deletion of its instance counts as explained by it: the
// heartbeat staleness of examples/sandbox (10 s) and a margin.
const killExplains = 20 * time.Second

// killedIn names an injected kill of one of ids' agents, of kind, between
// from and to; "" when none. Called with c.mu held.
func (c *chaos) killedIn(ids []string, from, to time.Time, kind string) string {
	for _, id := range ids {
		for _, k := range c.kills[id] {
			if k.kind == kind && !k.at.Before(from) && !k.at.After(to) {
				return fmt.Sprintf("%s: %s at %s", k.kind, id, c.at(k.at))
			}
		}
	}
	return ""
}

// whatHappened tells what befell instances around a window: when EC2 lost
// them, their runners' deletions, what refresh and scale-down said they did,
// and the reason their record gives. Called with c.mu held.
func (c *chaos) whatHappened(ctx context.Context, ids []string, from, to time.Time, regs []fakegithub.Registration) string {
	var out []string
	for _, id := range ids {
		var parts []string
		if l := c.life[id]; l != nil && !l.gone.IsZero() {
			parts = append(parts, "gone from EC2 by "+c.at(l.gone))
		}
		for _, reg := range regs {
			if inst, _ := github.InstanceOf(reg.Name); inst == id && reg.EndedBy != "" && reg.EndedBy != "replaced" &&
				reg.To.After(from.Add(-5*time.Second)) && reg.To.Before(to.Add(30*time.Second)) {
				parts = append(parts, fmt.Sprintf("runner %v deleted by %s at %s", reg.Labels, reg.EndedBy, c.at(reg.To)))
			}
		}
		parts = append(parts, c.acts[id]...)
		if rec, err := c.store.FindInstance(ctx, id); err == nil && rec.TerminatedReason != "" {
			parts = append(parts, "record: "+rec.TerminatedReason)
		}
		if off, ok := c.clocks[id]; ok {
			parts = append(parts, fmt.Sprintf("its agent's clock is off by %+.0fs", off.Seconds()))
		}
		if len(parts) == 0 {
			parts = append(parts, "nothing seen")
		}
		// One line per violation: errors quoted in reasons span lines.
		out = append(out, id+": "+strings.Join(strings.Fields(strings.Join(parts, "; ")), " "))
	}
	return strings.Join(out, " | ")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	last := lines[len(lines)-1]
	if len(last) > 80 {
		last = last[:80]
	}
	return last
}

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
