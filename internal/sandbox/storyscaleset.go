package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

// StoryScaleSet is the scale set the story's JIT pool serves (StoryDeploy).
const StoryScaleSet = "linux-scale"

// scaleSet plays a workflow in the scale-set mode on the warm pool: n jobs
// that name only the scale set in runs-on, no provision or release call.
// The listener is the module's ECS service, which the sandbox runs from
// the image the provider pushed. Each job must run on an instance the
// story's workflows left in the pool, and every instance must be back in
// the pool, clean, once the jobs are done.
func (st *Story) scaleSet(ctx context.Context, n int) {
	start := time.Now()
	name := fmt.Sprintf("a scale-set workflow: %d jobs with runs-on: %s on the warm pool, no invoking job", n, StoryScaleSet)
	want := fmt.Sprintf("%d jobs on %d reused instances, 0 provision or release calls, all pooled again", n, n)
	fail := func(got string) { st.record(Step{Name: name, Want: want, Got: got, Took: time.Since(start)}) }
	if !st.waitSession(ctx, time.Minute) {
		fail("no listener held the scale set's session within a minute")
		return
	}
	calls := st.sb.Invocations()
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = st.sb.GitHub.EnqueueJob(StoryScaleSet, fmt.Sprintf("echo scale-set job %d", i+1))
	}
	var wait time.Duration
	used := map[string]bool{}
	for _, id := range ids {
		j, err := st.sb.GitHub.WaitJob(id, 2*time.Minute)
		if err != nil || j.Result != "succeeded" {
			fail(fmt.Sprintf("job %d: %s %v", id, j.Result, err))
			return
		}
		wait = max(wait, j.Started.Sub(j.Queued))
		used[j.Runner[strings.LastIndex(j.Runner, "-i-")+1:]] = true
	}
	reused := 0
	for id := range used {
		if st.Launched[id] {
			reused++
		}
	}
	invoked := 0
	for fn, c := range st.sb.Invocations() {
		if fn == st.d.Functions[bundle.HandlerProvision] || fn == st.d.Functions[bundle.HandlerRelease] {
			invoked += c - calls[fn]
		}
	}
	pooled := st.pooledAgain(ctx, used, time.Minute)
	got := fmt.Sprintf("%d jobs on %d instances (%d reused), longest queued→running %.2fs, %d provision or release calls, %d pooled again",
		n, len(used), reused, wait.Seconds(), invoked, pooled)
	st.record(Step{Name: name, Want: want, Got: got, Took: time.Since(start),
		OK: len(used) == n && reused == n && invoked == 0 && pooled == n})
}

// waitSession waits until a listener holds the story's scale set's session.
func (st *Story) waitSession(ctx context.Context, within time.Duration) bool {
	for deadline := time.Now().Add(within); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		for _, set := range st.sb.GitHub.ScaleSets() {
			if set.Name == StoryScaleSet && set.SessionOwner != "" {
				return true
			}
		}
	}
	return false
}

// pooledAgain waits until the instances ids are idle, clean and queued for
// the next claim, and counts those that are.
func (st *Story) pooledAgain(ctx context.Context, ids map[string]bool, within time.Duration) int {
	deadline := time.Now().Add(within)
	for {
		n := 0
		for id := range ids {
			if rec, err := st.store.FindInstance(ctx, id); err == nil && rec.Pooled() {
				n++
			}
		}
		if n == len(ids) || time.Now().After(deadline) || ctx.Err() != nil {
			return n
		}
		time.Sleep(200 * time.Millisecond)
	}
}
