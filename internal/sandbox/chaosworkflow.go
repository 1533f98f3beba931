package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// What one workflow of a chaos run does, and how it calls the functions.

// workflow is what a GitHub workflow does: provision, one job per runner,
// and release in an always() step; a failed release step is re-run once.
func (c *chaos) workflow(ctx context.Context, runID, pool string, count int, fault string) bool {
	// While a runner release goes out, new workflows wait (chaosrelease.go).
	taken := c.gate.enter(pool == PoolJIT)
	defer taken()
	// A fault counts once it happened: a kill timer that fires after the
	// call returned, or an armed CreateFleet kill when everything was reused,
	// injects nothing.
	var prov provision.Output
	pctx, cancel := context.WithCancel(ctx)
	switch fault {
	case faultKillAfterFleet:
		c.mu.Lock()
		c.armed[runID] = cancel
		c.mu.Unlock()
	case faultKillProvision:
		time.AfterFunc(time.Duration(200+c.intn(2500))*time.Millisecond, func() { c.kill(pctx, cancel, fault) })
	}
	err := c.invokeStep(pctx, "provision", map[string]any{"runId": runID, "pool": pool, "instanceCount": count}, &prov)
	cancel()
	c.mu.Lock()
	delete(c.armed, runID) // not met when everything was reused
	c.mu.Unlock()
	ok := err == nil && prov.Status == "ready"
	if err == nil {
		c.noteStarts(prov.Started, prov.StartsFailed)
	}
	c.floodOrdinary(runID, err, ok) // invariant 12 (chaosflood.go)
	if !ok {
		c.failed("provision", err, fault)
	}
	run := &runUse{fault: fault, pool: pool}
	if ok {
		ids := make([]string, 0, len(prov.Instances))
		for _, in := range prov.Instances {
			ids = append(ids, in.InstanceID)
		}
		c.mu.Lock()
		c.given[runID] = ids
		run.ids, run.from = ids, time.Now()
		c.runs[runID] = run
		c.mu.Unlock()
		if c.shouldIntrude() {
			c.intrude(ctx, runID, pool, count, prov.Label)
		}
		if ok = c.runJobs(ctx, runID, prov.Label, ids, fault, taken); !ok {
			c.failed("job", nil, fault)
		}
	}

	var rel release.Output
	rctx, cancel := context.WithCancel(ctx)
	if fault == faultKillRelease {
		time.AfterFunc(time.Duration(100+c.intn(1200))*time.Millisecond, func() { c.kill(rctx, cancel, fault) })
	}
	c.mu.Lock()
	run.to = time.Now() // the workflow stops using its instances here
	c.mu.Unlock()
	err = c.invokeStep(rctx, "release", map[string]any{"runId": runID}, &rel)
	cancel()
	if err != nil {
		if ok {
			c.failed("release", err, fault)
		}
		ok = false
		if err = c.invokeStep(ctx, "release", map[string]any{"runId": runID}, &rel); err != nil {
			fmt.Fprintf(c.out, "  %s: release re-run failed too: %v\n", runID, err)
		}
	}
	return ok
}

var variablePart = regexp.MustCompile(`i-[0-9a-f]+|[0-9]+(\.[0-9]+)?`)

// failed counts a workflow's first failed step by its kind: the step, the
// fault the workflow drew, and the error's first words.
func (c *chaos) failed(step string, err error, fault string) {
	why := step + " failed"
	if err != nil {
		msg := err.Error()
		if errors.Is(err, context.Canceled) {
			msg = "killed"
		}
		// Ids and numbers vary between runs; the kind of failure does not.
		msg = variablePart.ReplaceAllString(msg, "N")
		if len(msg) > 120 {
			msg = msg[:120]
		}
		why += ": " + msg
	}
	c.mu.Lock()
	c.failures[why+" ["+fault+"]"]++
	c.mu.Unlock()
}

// runJobs runs one job per runner and waits for them; with faultLongJob the
// first job outlives the pool's max_runtime. taken is called once every
// job left the queue (or was given up on).
func (c *chaos) runJobs(ctx context.Context, runID, label string, ids []string, fault string, taken func()) bool {
	recs := make([]*jobUse, len(ids))
	for i := range ids {
		script, wait := "sleep 0.3; echo job of "+runID, 30*time.Second
		if fault == faultLongJob && i == 0 {
			long := c.maxRuntime + 15*time.Second
			script, wait = fmt.Sprintf("sleep %d; echo long job of %s", int(long.Seconds()), runID), long+30*time.Second
			c.count(faultLongJob)
		}
		if fault == faultSpotInJob && i == 0 {
			// Long enough that EC2 takes the instance back under it.
			script, wait = "sleep 60; echo spot job of "+runID, 90*time.Second
		}
		if fault == faultHostileJob && i == 0 {
			script = hostileScript(runID, c.hostile) + script
			c.count(faultHostileJob)
		}
		script = jobPrologue(runID, c.hostile) + script
		recs[i] = &jobUse{run: runID, wait: wait, queued: time.Now(), id: c.sb.GitHub.EnqueueJob(label, script)}
	}
	go func() {
		defer taken()
		for _, rec := range recs {
			for deadline := rec.queued.Add(rec.wait); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
				if j, ok := c.sb.GitHub.Job(rec.id); !ok || j.State != fakegithub.JobQueued {
					break
				}
			}
		}
	}()
	if fault == faultSpotInJob {
		go c.spotJob(ctx, runID, recs[0])
	}
	if fault == faultKillAgentInJob {
		time.AfterFunc(150*time.Millisecond, func() {
			if id := ids[c.intn(len(ids))]; c.sb.KillAgent(id) {
				c.killed(id, faultKillAgentInJob)
			}
		})
	}
	ok := true
	for _, rec := range recs {
		jctx, cancel := context.WithTimeout(ctx, time.Until(rec.queued.Add(rec.wait)))
		job, err := c.sb.GitHub.WaitJobContext(jctx, rec.id)
		cancel()
		if err != nil {
			job, _ = c.sb.GitHub.Job(rec.id)
		}
		// Jobs are waited for one after the other: one that finished while
		// a longer one ran is not late.
		finished := job.State == fakegithub.JobCompleted || job.State == fakegithub.JobFailed
		rec.job, rec.ended, rec.timedOut = job, time.Now(), !finished && ctx.Err() == nil
		c.mu.Lock()
		c.jobUses = append(c.jobUses, rec)
		c.mu.Unlock()
		ok = ok && finished && job.Result == "succeeded"
	}
	return ok
}

// answerWithin bounds how long a workflow step waits for provision or
// release: a Lambda runs up to its timeout (15 minutes), and a step that
// waits that long would stall the run. The invocation goes on unwatched.
const answerWithin = 150 * time.Second

// invokeStep is invoke for a workflow's step, given up on after
// answerWithin. Ending ctx kills the invocation (an injected kill) only
// while the step waits: one given up on runs on, as on AWS.
func (c *chaos) invokeStep(ctx context.Context, handler string, payload, out any) error {
	ictx, kill := context.WithCancel(context.WithoutCancel(ctx))
	detach := context.AfterFunc(ctx, kill)
	done := make(chan error, 1)
	var res json.RawMessage
	go func() { done <- c.invoke(ictx, handler, payload, &res) }()
	select {
	case err := <-done:
		detach()
		kill()
		if err != nil {
			return err
		}
		return json.Unmarshal(res, out)
	case <-time.After(answerWithin):
		detach()
		c.count(faultHung + handler)
		return fmt.Errorf("%s: no answer within %s", handler, answerWithin)
	}
}

// faultHung prefixes the count of steps given up on: not a fault injected,
// but shown with them.
const faultHung = "(not a fault) step given up after 150 s without an answer: "

func (c *chaos) invoke(ctx context.Context, handler string, payload, out any) error {
	in, _ := json.Marshal(payload)
	in = c.sb.sign(in) // as the workflow's invoking job sends it
	var res *lambda.InvokeOutput
	err := ThrottleRetry(ctx, func() (err error) {
		res, err = c.lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(c.d.Functions[handler]), Payload: in})
		return err
	})
	if err != nil {
		return err
	}
	if res.FunctionError != nil {
		return fmt.Errorf("%s: %s", handler, res.Payload)
	}
	return json.Unmarshal(res.Payload, out)
}
