package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// burst plays n one-runner workflows of pool at once, more than the pool's
// max_instances and than the account's Lambda concurrency: none may fail.
// The provisions beyond the cap wait their turn in the pool's capacity
// queue (lambdas/provision/queue.go) for the instances the first workflows
// release; the invocations beyond Lambda's concurrency are answered 429
// and sent again, as invoke.sh does. Each job takes 6 s, so that those
// sent again find the pool full and queue. The step reports what waiting
// cost.
func (st *Story) burst(ctx context.Context, pool string, n, maxInstances int) {
	start, throttledBefore := time.Now(), st.sb.Throttles()
	type result struct {
		prov      provision.Output
		provErr   error
		jobOK     bool
		released  int
		relErr    error
		provAfter time.Duration
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			run := fmt.Sprintf("run-burst-%02d", i+1)
			r.provErr = st.invoke(ctx, "provision", map[string]any{"runId": run, "pool": pool, "instanceCount": 1}, &r.prov)
			r.provAfter = time.Since(start)
			if r.provErr != nil || r.prov.Status != "ready" {
				return
			}
			st.mu.Lock()
			for _, in := range r.prov.Instances {
				if in.Source == "created" {
					st.Launched[in.InstanceID] = true
				}
			}
			st.tally.provisioned(r.prov)
			st.mu.Unlock()
			job, err := st.sb.GitHub.WaitJobContext(ctx, st.sb.GitHub.EnqueueJob(r.prov.Label, "sleep 6; echo built "+run))
			r.jobOK = err == nil && job.Result == "succeeded"
			var rel release.Output
			r.relErr = st.invoke(ctx, "release", map[string]any{"runId": run}, &rel)
			r.released = len(rel.Released)
			if r.relErr == nil {
				st.mu.Lock()
				st.tally.released(rel)
				st.mu.Unlock()
			}
		}()
	}
	wg.Wait()

	ready, waited, jobs, released := 0, 0, 0, 0
	var maxQueued, slowest time.Duration
	firstErr := ""
	for _, r := range results {
		switch {
		case r.provErr != nil && firstErr == "":
			firstErr = r.provErr.Error()
		case r.prov.Status == "ready" && len(r.prov.Instances) == 1:
			ready++
		}
		if r.prov.QueuedSeconds > 0 {
			waited++
			maxQueued = max(maxQueued, time.Duration(r.prov.QueuedSeconds*float64(time.Second)))
		}
		slowest = max(slowest, r.provAfter)
		if r.jobOK {
			jobs++
		}
		if r.relErr == nil && r.released == 1 {
			released++
		}
	}
	got := fmt.Sprintf("%d/%d provisions ready, %d waited for capacity (longest %.1fs), slowest answered after %.1fs; Lambda answered %d invocations 429 (sent again); %d/%d jobs succeeded, %d/%d released",
		ready, n, waited, maxQueued.Seconds(), slowest.Seconds(), st.sb.Throttles()-throttledBefore, jobs, n, released, n)
	if firstErr != "" {
		got += "; first failure: " + firstErr
	}
	st.record(Step{
		Name: fmt.Sprintf("a burst of %d one-runner workflows on a pool of max_instances %d, with %d concurrent Lambda executions", n, maxInstances, st.sb.functions.conc.limit),
		Want: fmt.Sprintf("every provision ready (those past the cap wait their turn), %d jobs, %d released", n, n),
		Got:  got, Took: time.Since(start),
		OK: ready == n && jobs == n && released == n && waited > 0,
	})
}
