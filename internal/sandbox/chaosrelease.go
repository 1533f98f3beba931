package sandbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// A runner release published mid-run, and invariant 11.
//
// GitHub sends an update message to a listener behind its latest release
// that did not configure --disableupdate, as every just-in-time runner is
// (Runner.cs, SelfUpdater.cs); the job then waits while the runner updates
// itself. Between GitHub publishing a release and refresh learning it
// (GHRUNNER_RUNNER_RELEASES_EVERY) ghrunner cannot know, and a runner
// listening in that gap is sent one: that gap is the product's documented
// limit, not what this checks. So the run publishes once the just-in-time
// workflows under way have had their jobs taken, and holds new workflows
// back until refresh pointed the pool at the release (a second or two in
// the sandbox); everything else goes on meanwhile (assignments ending,
// instances released and pooled, refresh, scale-down, every background
// fault). From then on the product alone decides which install a runner
// starts from.

// releaseGate holds workflows back while a release goes out, and counts
// the just-in-time workflows whose jobs are not all taken yet.
type releaseGate struct {
	mu        sync.Mutex
	cond      *sync.Cond
	closed    bool
	untaken   int       // just-in-time workflows with a job not taken yet
	version   string    // the release published ("" none yet)
	published time.Time // when GitHub published it
	learned   time.Time // when refresh had pointed the pool at it
}

func (g *releaseGate) init() { g.cond = sync.NewCond(&g.mu) }

// enter waits while the gate is closed, then counts a just-in-time
// workflow in; the returned func counts it out (once).
func (g *releaseGate) enter(jit bool) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.closed {
		g.cond.Wait()
	}
	if !jit {
		return func() {}
	}
	g.untaken++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.untaken--
			g.cond.Broadcast()
			g.mu.Unlock()
		})
	}
}

// publishRelease closes the gate, waits for the just-in-time jobs under way
// to be taken, publishes a release, refreshes until the pool points at it
// and opens the gate again.
func (c *chaos) publishRelease(ctx context.Context) {
	g := &c.gate
	g.mu.Lock()
	g.closed = true
	deadline := time.Now().Add(90 * time.Second)
	stop := context.AfterFunc(ctx, func() { g.mu.Lock(); g.cond.Broadcast(); g.mu.Unlock() })
	timer := time.AfterFunc(time.Until(deadline), func() { g.mu.Lock(); g.cond.Broadcast(); g.mu.Unlock() })
	for g.untaken > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		g.cond.Wait()
	}
	stop()
	timer.Stop()
	g.version, g.published = NextRunnerRelease(), time.Now()
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.closed = false
		g.cond.Broadcast()
		g.mu.Unlock()
	}()
	if err := c.sb.PublishRunnerRelease(g.version); err != nil {
		c.mu.Lock()
		c.activity["release publication failed"]++
		c.mu.Unlock()
		return
	}
	c.count(faultRelease)
	fmt.Fprintf(c.out, "  GitHub published actions/runner v%s at %s; new workflows wait for refresh ...\n", g.version, c.at(g.published))
	// Refresh runs under the same faults as everything else (GitHub's
	// rate limits and errors, DynamoDB's throttling, Lambda's 429s): two
	// minutes leaves it several tries even on a loaded machine.
	for until := time.Now().Add(120 * time.Second); time.Now().Before(until) && ctx.Err() == nil; time.Sleep(500 * time.Millisecond) {
		var out struct{}
		c.invoke(ctx, "refresh", map[string]any{}, &out) // faults may fail it: the pool item says
		if p, err := c.store.GetPoolConfig(ctx, PoolJIT); err == nil && p.LatestTarget != nil && p.LatestTarget.Version == g.version {
			g.mu.Lock()
			g.learned = time.Now()
			g.mu.Unlock()
			fmt.Fprintf(c.out, "  refresh pointed %s at v%s at %s\n", PoolJIT, g.version, c.at(g.learned))
			return
		}
	}
}

// faultRelease counts the release published mid-run.
const faultRelease = "actions/runner release published mid-run"

// checkUpdates is invariant 11: no job waited on an update. An update
// message to a runner while a job of its run was queued and not yet
// taken is a violation, for runs claimed once the pool pointed at the
// release; one to a runner with no job waiting (a
// just-in-time listener started after its run's jobs, until release)
// delays nothing and is counted only. Every job ran on a listener that
// announced the release once the pool pointed at it, unless its run began
// before. Called after the run.
func (c *chaos) checkUpdates() []string {
	msgs := c.sb.GitHub.UpdateMessages()
	c.mu.Lock()
	defer c.mu.Unlock()
	g := &c.gate
	g.mu.Lock()
	version, learned := g.version, g.learned
	g.mu.Unlock()
	var v []string
	if version != "" && learned.IsZero() {
		v = append(v, fmt.Sprintf("[11] refresh never pointed %s at v%s, published at %s", PoolJIT, version, c.at(c.gate.published)))
	}
	for _, m := range msgs {
		inst, _ := github.InstanceOf(m.Runner)
		waited := 0
		for _, j := range c.jobUses {
			run := c.runs[j.run]
			if run == nil || !slices.Contains(run.ids, inst) || j.queued.After(m.At) {
				continue
			}
			if learned.IsZero() || run.from.Before(learned) {
				// A run under way when GitHub published, whose jobs were
				// not taken by the gate's deadline (a killed agent): the
				// gap before refresh learns is the documented limit.
				c.activity["update messages to runs from before the pool knew"]++
				continue
			}
			if started := j.job.Started; j.timedOut || started.IsZero() || started.After(m.At) {
				waited++
				v = append(v, fmt.Sprintf("[11] job %d of %s waited on an update: runner %s was sent one from v%s to v%s at %s", j.id, j.run, m.Runner, m.From, m.To, c.at(m.At)))
			}
		}
		if waited == 0 {
			c.activity["update messages with no job waiting"]++
		}
	}
	if version == "" || learned.IsZero() {
		return v // no release, or none learned: no run was claimed after it
	}
	on := 0
	for _, j := range c.jobUses {
		run := c.runs[j.run]
		if run == nil || run.from.Before(learned) || j.job.State != fakegithub.JobCompleted || j.job.Label == "" || !isJITRun(c, j.run) {
			continue
		}
		if j.job.RunnerVersion != version {
			v = append(v, fmt.Sprintf("[11] job %d of %s ran on runner v%s, claimed at %s after %s pointed at v%s (%s)", j.id, j.run, j.job.RunnerVersion, c.at(run.from), PoolJIT, version, c.at(learned)))
			continue
		}
		on++
	}
	c.activity["jobs on the new release"] = on
	c.activity["release published at s"] = int(c.gate.published.Sub(c.start).Seconds())
	if !learned.IsZero() {
		c.activity["release learned at s"] = int(learned.Sub(c.start).Seconds())
	}
	return v
}

// isJITRun says whether a run of the chaos run was on the just-in-time
// pool. Called with c.mu held.
func isJITRun(c *chaos, runID string) bool {
	return c.runs[runID] != nil && c.runs[runID].pool == PoolJIT
}
