package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// Spot interruptions mid-job (fault group "spot"). ChaosDeploy gives the
// sandbox a spot pool (PoolSpot); every spotEvery-th workflow, placed
// rather than drawn so that -off spot keeps the plan, runs one long job
// on it, and while the job runs EC2 takes the instance back as it does a
// spot instance:
//
//   - the instance's metadata service publishes the interruption notice
//     (spot/instance-action, "terminate" two minutes ahead: EC2 User
//     Guide, "Spot Instance interruption notices");
//   - the instance is terminated once its agent said it heard the notice
//     (UD_INTERRUPTED on its record), or after spotNoticeWindow: the two
//     minutes are compressed, the order kept. EC2 then describes it with
//     the state reason Server.SpotInstanceTermination (ec2reclaim.go),
//     which refresh reads for an instance whose agent never said it;
//   - GitHub fails the job whose runner went away (fakegithub.LoseJob:
//     how soon it does is not documented).
//
// Invariant 18 then asks: the job failed; the agent said the notice
// before EC2 took the instance; its record is closed (not leaked, not
// pooled) and keeps the notice; the pool's spot breaker counted it, which
// refresh does for a record it ends as interrupted. Invariants 5 and 6
// take the interruption as the explanation of the job's failure and the
// instance's end, as an injected kill of its agent.

// PoolSpot is ChaosDeploy's spot pool.
const PoolSpot = "linux-spot"

const faultSpotInJob = "spot instance interrupted during a job (notice, then terminated through EC2)"

// spotEvery places the spot workflows: workflows 7, 32 and 57 of make
// chaos's 60; the third finds the pool's spot breaker open (two
// interruptions) and runs on-demand, uninterrupted.
const (
	spotEvery = 25
	spotAt    = 7
)

// spotNoticeWindow bounds the wait for the agent to hear the notice (it
// reads the metadata service every 5 s) before EC2 takes the instance.
const spotNoticeWindow = 15 * time.Second

// spotUse is one interruption the run played.
type spotUse struct {
	run, instance string
	job           int64
	heard         bool // the agent wrote UD_INTERRUPTED before the termination
}

// interruptSpot plays EC2 taking back instance id of run runID while job
// jobID runs on it. It returns once the instance is terminated.
func (c *chaos) interruptSpot(ctx context.Context, runID, id string, jobID int64) {
	a := c.sb.Agent(id)
	if a == nil {
		fmt.Fprintf(c.out, "  %s: no agent on %s to hear a spot notice\n", runID, id)
		return
	}
	a.IMDS.InterruptSpot("terminate", time.Now().Add(2*time.Minute))
	c.killed(id, faultSpotInJob)
	use := &spotUse{run: runID, instance: id, job: jobID}
	key := c.keyOf(ctx, id)
	for deadline := time.Now().Add(spotNoticeWindow); time.Now().Before(deadline) && ctx.Err() == nil && key != nil; time.Sleep(250 * time.Millisecond) {
		if rec, err := c.store.Get(ctx, *key); err == nil {
			if _, ok := rec.Signals[state.SignalInterrupted]; ok {
				use.heard = true
				break
			}
		}
	}
	if err := c.sb.ReclaimSpot(ctx, id); err != nil {
		fmt.Fprintf(c.out, "  %s: terminating spot instance %s: %v\n", runID, id, err)
	}
	c.mu.Lock()
	// The termination explains what follows it too (the job's failure,
	// refresh deleting the runner), not counted as a second fault.
	c.kills[id] = append(c.kills[id], kill{at: time.Now(), kind: faultSpotInJob})
	c.spots = append(c.spots, use)
	c.mu.Unlock()
	c.sb.GitHub.LoseJob(jobID)
}

// keyOf is the key of instance id's record in the spot pool, nil when the
// pool cannot be read.
func (c *chaos) keyOf(ctx context.Context, id string) *state.Key {
	p, err := c.store.GetPoolConfig(ctx, PoolSpot)
	if err != nil || p == nil {
		return nil
	}
	k := p.RecordKey(id)
	return &k
}

// spotJob starts the spot workflow's job fault: once job rec runs, its
// instance is interrupted.
func (c *chaos) spotJob(ctx context.Context, runID string, rec *jobUse) {
	for deadline := time.Now().Add(rec.wait); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		j, ok := c.sb.GitHub.Job(rec.id)
		if !ok || j.State == fakegithub.JobCompleted || j.State == fakegithub.JobFailed {
			return
		}
		if j.State != fakegithub.JobRunning {
			continue
		}
		inst, ok := github.InstanceOf(j.Runner)
		if !ok {
			return
		}
		// EC2 interrupts spot instances only: with the pool's spot breaker
		// open (two interruptions within its window), the pool launches
		// on-demand, and the job runs to its end.
		if live, err := c.fleet.List(ctx, fleet.Filter{IDs: []string{inst}}); err != nil || len(live) != 1 || live[0].UsageClass != fleet.Spot {
			c.mu.Lock()
			c.activity["spot workflows on an on-demand instance (not interrupted)"]++
			c.mu.Unlock()
			return
		}
		time.Sleep(time.Second) // mid-job
		c.interruptSpot(ctx, runID, inst, rec.id)
		return
	}
}

// checkSpot is invariant 18 over the interruptions played, once settled.
func (c *chaos) checkSpot(ctx context.Context) []string {
	c.mu.Lock()
	spots := append([]*spotUse(nil), c.spots...)
	c.mu.Unlock()
	if len(spots) == 0 {
		return nil
	}
	var v []string
	b, err := c.store.GetSpotBreaker(ctx, PoolSpot)
	if err != nil {
		return []string{"[18] spot breaker of " + PoolSpot + " not read: " + err.Error()}
	}
	breaker := spotCounts{b}
	for _, s := range spots {
		what := fmt.Sprintf("[18] spot instance %s of %s, interrupted under job %d", s.instance, s.run, s.job)
		if j, _ := c.sb.GitHub.Job(s.job); j.State != fakegithub.JobFailed && j.Result != "failed" && j.Result != "cancelled" {
			v = append(v, fmt.Sprintf("%s: the job %s (%s), not failed", what, j.State, j.Result))
		}
		if !s.heard {
			v = append(v, what+": its agent never wrote UD_INTERRUPTED within the notice window")
		}
		key := c.keyOf(ctx, s.instance)
		if key == nil {
			return append(v, "[18] pool "+PoolSpot+" not read")
		}
		rec, err := c.store.Get(ctx, *key)
		switch {
		case state.IsNotFound(err):
			// Closed records expire; refresh's act says how it closed it.
		case err != nil:
			v = append(v, what+": record not read: "+err.Error())
		case rec.State != state.Terminated:
			v = append(v, fmt.Sprintf("%s: its record is %s, not closed", what, rec.State))
		default:
			// Whoever ended it first (refresh finding it gone:
			// refresh.ReasonGoneInterrupted; release's check the agent
			// never answered; refresh's silent heartbeat), the record
			// keeps the notice, and refresh counted it as interrupted
			// (the breaker, below).
			if _, ok := rec.Signals[state.SignalInterrupted]; !ok {
				v = append(v, fmt.Sprintf("%s: its record (%s: %q) does not say it was interrupted", what, rec.State, rec.TerminatedReason))
			}
		}
		// Entries older than the breaker's window (15 min) are dropped: a
		// chaos run's interruptions are all within it.
		if _, ok := breaker.interruptions()[s.instance]; !ok {
			v = append(v, what+": not counted by the pool's spot breaker")
		}
	}
	c.mu.Lock()
	c.activity["spot interruptions"] = len(spots)
	c.activity["spot breaker interruptions counted"] = len(breaker.interruptions())
	c.mu.Unlock()
	return v
}

// spotCounts reads a breaker that may be nil (none noted).
type spotCounts struct{ b *state.SpotBreaker }

func (s spotCounts) interruptions() map[string]int64 {
	if s.b == nil {
		return nil
	}
	return s.b.Interruptions
}
