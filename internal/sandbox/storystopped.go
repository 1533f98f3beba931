package sandbox

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/scaledown"
)

// The story's stopped tier (issue 41), on a pool of its own so that its
// stops and starts leave the other pools' reuse counts alone:
//
//   - its first workflow launches two instances, each job leaving a file
//     in the runner's home;
//   - idle past its warm time (the pool keeps nobody idle; the minimum
//     running time is 5 s in the sandbox), scale-down stops both: records
//     stopped, runners deregistered, EC2 stopping then stopped, the
//     instance host halting their agents;
//   - preflight's start check passes, fails naming UnauthorizedOperation
//     with the provision role's StartOwnInstances statement removed, and
//     passes once it is put back (storypreflight.go);
//   - the next workflow finds no warm instance and starts one of them (the
//     same instance, booted again: a new boot id) instead of launching;
//     its job finds nothing of the earlier run; released, it is pooled
//     once its agent says clean;
//   - the other, left stopped, is terminated past keep_seconds (60 s, the
//     least the provider takes) by the story's last scale-down (or by the
//     refresh schedule, whichever comes first), and the started one, idle
//     again, is stopped in its place.
//
// Scale-down acts on every pool, so the tier's first part plays before
// any other workflow (the other pools hold no idle instance it could
// retire); the keep time runs while the rest of the story plays.

// PoolStopped is StoryDeploy's pool with a stopped tier (examples/sandbox's
// stopped_pool: two stopped at most, each kept 60 s, no idle window).
const PoolStopped = "linux-stopped"

// tierStory is what the tier's first steps leave for its last.
type tierStory struct {
	launched []string // by the pool's first workflow
	started  string   // started for the second workflow
	kept     string   // left stopped, to be terminated past its keep time
}

// stoppedTier plays the tier's first part: stopped by scale-down, one
// started for the next workflow.
func (st *Story) stoppedTier(ctx context.Context) {
	const left = `"$HOME/left-by-run-2001"`
	first := st.play(ctx, flow{name: "stopped tier: a workflow on " + PoolStopped + " (2 runners), each job leaves a file in its home",
		runID: "run-2001", pool: PoolStopped, runners: 2, created: 2, script: "touch " + left})
	st.mu.Lock()
	for _, id := range first {
		delete(st.Launched, id) // the story's other pools' launches are counted apart
	}
	st.tier.launched = first
	st.mu.Unlock()
	if len(first) != 2 || ctx.Err() != nil {
		return
	}
	boots := map[string]string{}
	for _, id := range first {
		boots[id] = st.bootID(id)
	}
	if !st.stopIdle(ctx, first) {
		return
	}
	// Both stopped and nothing else playing: preflight's start check, and
	// what it says when the role may not start.
	st.preflightStart(ctx)
	got := st.play(ctx, flow{name: "stopped tier: the next workflow starts a stopped instance instead of launching; its job finds no file of the earlier run",
		runID: "run-2002", pool: PoolStopped, runners: 1, started: 1, script: "test ! -e " + left})
	if len(got) != 1 {
		return
	}
	id := got[0]
	st.tier.started = id
	for _, other := range first {
		if other != id {
			st.tier.kept = other
		}
	}
	st.check("stopped tier: the started instance is one scale-down stopped, booted again, pooled clean after its run",
		"one of "+strings.Join(first, ", ")+", a new boot id, idle and clean", func() (string, bool) {
			after := st.bootID(id)
			rec, err := st.store.FindInstance(ctx, id)
			if err != nil {
				return err.Error(), false
			}
			got := fmt.Sprintf("%s: boot %s → %s; record %s, clean %v, pooled %v", id, short(boots[id]), short(after), rec.State, rec.Clean(), rec.Pooled())
			return got, slices.Contains(first, id) && after != "" && after != boots[id] && rec.Pooled() && rec.Clean()
		})
}

// stopIdle invokes scale-down, as its schedule would, until it has stopped
// ids (their idle time past the pool's minimum running time), then waits
// for EC2 to show them stopped: a provision starts only what EC2 shows
// stopped, never one still stopping.
func (st *Story) stopIdle(ctx context.Context, ids []string) bool {
	start := time.Now()
	stopped := map[string]bool{}
	var other []string
	var failure error
	for deadline := start.Add(30 * time.Second); len(stopped) < len(ids) && time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(500 * time.Millisecond) {
		var out scaledown.Output
		if failure = st.invoke(ctx, bundle.HandlerScaleDown, map[string]any{}, &out); failure != nil {
			continue
		}
		st.mu.Lock()
		st.tally.scaled(out)
		st.mu.Unlock()
		for _, d := range out.Stopped {
			if slices.Contains(ids, d.InstanceID) {
				stopped[d.InstanceID] = true
			}
		}
		for _, d := range out.Terminated {
			if slices.Contains(ids, d.InstanceID) {
				other = append(other, d.InstanceID+" terminated: "+d.Reason)
			}
		}
	}
	ec2 := map[string]string{}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		insts, err := st.fleet.List(ctx, fleet.Filter{IDs: ids})
		if err != nil {
			continue
		}
		clear(ec2)
		for _, in := range insts {
			ec2[in.ID] = in.State
		}
		if all(ids, func(id string) bool { return ec2[id] == "stopped" }) {
			break
		}
	}
	records, registered := map[string]string{}, 0
	for _, id := range ids {
		if rec, err := st.store.FindInstance(ctx, id); err == nil {
			records[id] = string(rec.State)
		}
	}
	for _, r := range st.sb.GitHub.Runners() {
		if inst, ok := github.InstanceOf(r.Name); ok && slices.Contains(ids, inst) {
			registered++
		}
	}
	got := fmt.Sprintf("%d stopped by scale-down in %.1fs; records %v; EC2 %v; %d runners of them registered", len(stopped), time.Since(start).Seconds(),
		pairs(records), pairs(ec2), registered)
	if len(other) > 0 {
		got += "; and " + strings.Join(other, "; ")
	}
	if failure != nil && len(stopped) < len(ids) {
		got += "; scale-down: " + failure.Error()
	}
	ok := len(stopped) == len(ids) && len(other) == 0 && registered == 0 &&
		all(ids, func(id string) bool { return records[id] == string(state.Stopped) && ec2[id] == "stopped" })
	st.record(Step{Name: "stopped tier: idle past its warm time, scale-down stops both instances instead of terminating them",
		Want: fmt.Sprintf("%d stopped: records stopped, EC2 stopped, no runner registered, nothing terminated", len(ids)), Got: got, Took: time.Since(start), OK: ok})
	return ok
}

// awaitKeepTime waits until the instance left stopped is past its keep
// time, so that the story's last scale-down terminates it.
func (st *Story) awaitKeepTime(ctx context.Context) {
	if st.tier.kept == "" {
		return
	}
	rec, err := st.store.FindInstance(ctx, st.tier.kept)
	if err != nil || rec.State != state.Stopped {
		return // the step after the scale-down says what it is
	}
	until := time.Unix(rec.Threshold, 0).Add(time.Second) // Expired compares whole seconds
	if wait := time.Until(until); wait > 0 {
		fmt.Fprintf(st.out, "[%5.1fs]      waiting %.0fs for %s's keep time (stopped at %s, kept %ds) ...\n", time.Since(st.start).Seconds(),
			wait.Seconds(), st.tier.kept, time.Unix(rec.StoppedAt, 0).UTC().Format(time.TimeOnly), rec.Threshold-rec.StoppedAt)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// checkKeepTime checks, after the story's last scale-down, that the
// instance left stopped is gone past its keep time and the started one,
// idle again, stopped in its place.
func (st *Story) checkKeepTime(ctx context.Context, out scaledown.Output) {
	if st.tier.kept == "" || st.tier.started == "" {
		return
	}
	st.check("stopped tier: the instance stopped past keep_seconds is terminated; the started one, idle again, is stopped",
		st.tier.kept+" terminated (record and EC2), "+st.tier.started+" stopped", func() (string, bool) {
			// Scale-down says why; refresh judges a stopped record by its
			// lease, which is the keep time, and says so ("lease expired").
			by, past := "refresh", false
			for _, d := range out.Terminated {
				if d.InstanceID == st.tier.kept {
					by, past = "scale-down ("+d.Reason+")", strings.Contains(d.Reason, "keep time")
				}
			}
			var kept, started *state.Instance
			var ec2 map[string]string
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				kept, _ = st.store.FindInstance(ctx, st.tier.kept)
				started, _ = st.store.FindInstance(ctx, st.tier.started)
				ec2 = map[string]string{}
				if insts, err := st.fleet.List(ctx, fleet.Filter{IDs: []string{st.tier.kept, st.tier.started}, States: []string{"pending", "running", "stopping", "stopped", "shutting-down"}}); err == nil {
					for _, in := range insts {
						ec2[in.ID] = in.State
					}
				}
				gone := ec2[st.tier.kept] == "" || ec2[st.tier.kept] == "shutting-down"
				if gone && ec2[st.tier.started] == "stopped" || time.Now().After(deadline) || ctx.Err() != nil {
					break
				}
			}
			if kept == nil || started == nil {
				return "records not found", false
			}
			got := fmt.Sprintf("%s: record %s (%s) by %s, EC2 %q; %s: record %s, EC2 %q", st.tier.kept, kept.State, kept.TerminatedReason, by, ec2[st.tier.kept],
				st.tier.started, started.State, ec2[st.tier.started])
			gone := ec2[st.tier.kept] == "" || ec2[st.tier.kept] == "shutting-down"
			past = past || by == "refresh" && kept.TerminatedReason == "lease expired"
			return got, kept.State == state.Terminated && past && gone &&
				started.State == state.Stopped && ec2[st.tier.started] == "stopped"
		})
}

// bootID is the boot the instance's agent runs under, which a start
// names anew ("" before any stop).
func (st *Story) bootID(id string) string {
	if a := st.sb.Agent(id); a != nil {
		return a.BootID()
	}
	return ""
}

func short(boot string) string {
	if boot == "" {
		return "(first)"
	}
	return boot[:min(8, len(boot))]
}

func all(ids []string, ok func(string) bool) bool {
	for _, id := range ids {
		if !ok(id) {
			return false
		}
	}
	return true
}

// pairs lists a map's id=value pairs in id order.
func pairs(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	return "[" + strings.Join(parts, " ") + "]"
}
