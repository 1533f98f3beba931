package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/scaledown"
)

// scaleDown invokes scale-down: a pool outside its idle window is trimmed
// to nothing and its instances end; a pool within one keeps its idle count.
func (st *Story) scaleDown(ctx context.Context) {
	start := time.Now()
	jitKeep, tokenKeep := st.keptIdle(ctx, PoolJIT), st.keptIdle(ctx, PoolToken)
	keep := jitKeep + tokenKeep
	var out scaledown.Output
	err := st.invoke(ctx, bundle.HandlerScaleDown, map[string]any{}, &out)
	st.mu.Lock()
	st.tally.scaled(out)
	st.mu.Unlock()
	// The pools' live instances once scale-down's terminations landed. The
	// token pool may hold more than its idle count: the refresh schedule
	// pre-warms it while its runners are busy (idle count = spare
	// runners), and scale-down keeps those younger than the minimum
	// running time; the JIT pool keeps exactly its window's count (none
	// outside it). The stopped tier's pool is checked on its own
	// (checkKeepTime).
	live, jit, token, tier := -1, -1, -1, -1
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(500 * time.Millisecond) {
		in, lerr := st.fleet.List(ctx, fleet.Filter{})
		if lerr == nil {
			live, jit, token, tier = len(in), 0, 0, 0
			for _, i := range in {
				switch i.Tags[fleet.TagPool] {
				case PoolJIT:
					jit++
				case PoolToken:
					token++
				case PoolStopped:
					tier++
				}
			}
			if jit == jitKeep && token >= tokenKeep && live == jit+token+tier {
				break
			}
		}
	}
	got := fmt.Sprintf("%d terminated, %d stopped, %d kept; %d instances alive", len(out.Terminated), len(out.Stopped), len(out.Kept), live)
	reasons := map[string]int{}
	for _, k := range out.Kept {
		reasons[k.Reason]++
	}
	for r, n := range reasons {
		got += fmt.Sprintf("; %d kept: %s", n, r)
	}
	if err != nil {
		got = err.Error()
	}
	terminated := map[string]bool{}
	for _, d := range out.Terminated {
		terminated[d.InstanceID] = true
	}
	// Every instance a provision launched is outside a window (the stopped
	// tier's pool apart: st.Launched leaves it out).
	every := true
	for id := range st.Launched {
		every = every && terminated[id]
	}
	st.record(Step{Name: "scale-down (" + PoolJIT + " outside its idle window " + IdleWindowCron(time.Now()) + " UTC)",
		Want: fmt.Sprintf("%s trimmed to 0, %d idle kept by active windows", PoolJIT, keep),
		Got:  got, Took: time.Since(start), OK: err == nil && every && jit == jitKeep && token >= tokenKeep && live == jit+token+tier})
	st.checkKeepTime(ctx, out)
}

// scheduledRefresh waits for the refresh schedule terraform deployed to fire
// (rate(1 minute) in examples/sandbox, first run a minute after deploy) and
// checks that the run succeeded.
func (st *Story) scheduledRefresh(ctx context.Context) {
	start := time.Now()
	name := st.d.Functions[bundle.HandlerRefresh] // the module names each schedule after its function
	fmt.Fprintf(st.out, "[%5.1fs]      waiting for the schedule %s to fire (its first run is a minute after deploy) ...\n", time.Since(st.start).Seconds(), name)
	var results []error
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(time.Second) {
		if results = st.sb.ScheduleResults(name); len(results) > 0 {
			break
		}
	}
	got, ok := "did not fire within 90s", false
	if len(results) > 0 {
		got, ok = fmt.Sprintf("fired %d×, refresh succeeded", len(results)), results[0] == nil
		if results[0] != nil {
			got = "fired, refresh failed: " + results[0].Error()
		}
	}
	st.record(Step{Name: "the refresh schedule fires and refresh succeeds", Want: "one successful scheduled refresh", Got: got, Took: time.Since(start), OK: ok})
}
