package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// The scale-set mode in a chaos run (group "scaleset"). ChaosDeploy gives
// the linux pool the scale set ChaosScaleSet, so the listener runs as the
// module's ECS service task throughout the play. A share of the workflows
// are scale-set workflows: a few jobs that say runs-on: ChaosScaleSet, with
// no provision or release, each meeting one fault of the mode drawn up
// front: the listener's task killed mid-burst, its message queue token
// expired, a message delivered twice (its acknowledgement lost). Agent
// kills, instance deaths and GitHub faults hit them as they hit the rest.
// Invariants 13-17 (checkScaleSet, and check for 16) are about them.
//
// Each was seen catching its violation with its control taken out (not
// committed; README "Faults"): the agent's wipe and check skipped, 13 and
// 15 (a job failed on the file a job before it left); the sandbox starting
// a second listener task, 17; half the listener's releases skipped, 13 (jobs
// starved: the pool full of unreleased runs) but not 16, since refresh ends
// such runs at max_runtime before settling. 14 has no control to take out in
// a run: TestInvariant14FlagsTwoJobsOnOneInstanceAtOnce shows its check.

// ChaosScaleSet is the scale set the chaos run's linux pool serves.
const ChaosScaleSet = "chaos-scale"

const (
	faultSSListenerKilled = "scale set: the listener's ECS task killed mid-burst"
	faultSSTokenExpired   = "scale set: the listener's message queue token expired"
	faultSSMessageTwice   = "scale set: a message delivered twice (its acknowledgement lost)"
)

var scaleSetFaults = []string{faultNone, faultSSListenerKilled, faultSSTokenExpired, faultSSMessageTwice}

// ssLeftoverMark starts the line a scale-set job prints when it finds the
// file an earlier job left in $HOME (invariant 15).
const ssLeftoverMark = "SCALE-SET LEFTOVER"

// ssJob is a scale-set job of the run and what became of it.
type ssJob struct {
	workflow, tag string // tag names the job in its drop file
	fault         string
	id            int64
	job           fakegithub.Job
	timedOut      bool
}

// ssScript is what a scale-set job runs: every chaos job's prologue (a
// hostile job's leftovers fail it), then a line in the drop box for each
// time the script starts (invariant 13: exactly once), then it fails if a
// file an earlier job left in $HOME is there, and leaves its own.
func ssScript(tag string, k hostileKit) string {
	return jobPrologue(tag, k) + fmt.Sprintf(`echo "$(date +%%s.%%N) $(hostname)" >>%q
if [ -e "$HOME/ghr-ss-left" ]; then echo "%s: $(cat "$HOME/ghr-ss-left")"; exit 43; fi
echo %q >"$HOME/ghr-ss-left"
sleep 1; echo scale-set job %s
`, ssDrop(k, tag), ssLeftoverMark, tag, tag)
}

func ssDrop(k hostileKit, tag string) string { return filepath.Join(k.drop, "ss-"+tag) }

// scaleSetID is the fake's id of ChaosScaleSet (0 until the listener
// created it).
func (c *chaos) scaleSetID() int {
	for _, set := range c.sb.GitHub.ScaleSets() {
		if set.Name == ChaosScaleSet {
			return set.ID
		}
	}
	return 0
}

// scaleSetWorkflow queues jobs for the scale set, injects the workflow's
// fault while they are under way and waits for them.
func (c *chaos) scaleSetWorkflow(ctx context.Context, name string, jobs int, fault string) bool {
	taken := c.gate.enter(true)
	defer taken()
	set := c.scaleSetID()
	if fault == faultSSMessageTwice && set != 0 && c.sb.GitHub.RedeliverMessage(set) {
		c.count(fault) // the next message the listener acknowledges comes again
	}
	recs := make([]*ssJob, jobs)
	for i := range recs {
		tag := fmt.Sprintf("%s-%d", name, i)
		recs[i] = &ssJob{workflow: name, tag: tag, fault: fault, id: c.sb.GitHub.EnqueueJob(ChaosScaleSet, ssScript(tag, c.hostile))}
	}
	if fault == faultSSTokenExpired && set != 0 {
		c.sb.GitHub.ExpireMessageQueueToken(set)
		c.count(fault)
	}
	const wait = 4 * time.Minute
	deadline := time.Now().Add(wait)
	go func() {
		defer taken()
		for _, rec := range recs {
			for ; time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
				if j, ok := c.sb.GitHub.Job(rec.id); !ok || j.State != fakegithub.JobQueued {
					break
				}
			}
		}
	}()
	if fault == faultSSListenerKilled {
		// Mid-burst: once the first job runs (or after 5 s), while the
		// others wait or run.
		go func() {
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
				if j, _ := c.sb.GitHub.Job(recs[0].id); j.State != fakegithub.JobQueued {
					break
				}
			}
			if c.sb.KillECSTask(c.d.ListenerService) {
				c.count(fault)
			}
		}()
	}
	ok := true
	for _, rec := range recs {
		jctx, cancel := context.WithDeadline(ctx, deadline)
		job, err := c.sb.GitHub.WaitJobContext(jctx, rec.id)
		cancel()
		if err != nil {
			job, _ = c.sb.GitHub.Job(rec.id)
		}
		finished := job.State == fakegithub.JobCompleted || job.State == fakegithub.JobFailed
		rec.job, rec.timedOut = job, !finished && ctx.Err() == nil
		c.mu.Lock()
		c.ssJobs = append(c.ssJobs, rec)
		c.mu.Unlock()
		ok = ok && finished && job.Result == "succeeded"
	}
	if !ok {
		c.failed("scale-set job", nil, fault)
	}
	return ok
}

// checkScaleSet returns the violations of invariants 13, 14, 15 and 17:
// what happened, which settling cannot change (16 is in check).
func (c *chaos) checkScaleSet(ctx context.Context) []string {
	var v []string
	set := c.scaleSetID()
	c.mu.Lock()
	jobs := append([]*ssJob(nil), c.ssJobs...)
	var ordinary []fakegithub.Job
	for _, use := range c.jobUses {
		ordinary = append(ordinary, use.job)
	}
	c.mu.Unlock()
	// 13. Every job assigned to the scale set ran exactly once (its script
	// started once: one line in its drop file) and succeeded, on a runner
	// of the scale set whose name ends with an instance of the linux pool;
	// unless an injected kill of that instance's agent during the job
	// explains its failure.
	for _, j := range jobs {
		raw, _ := os.ReadFile(ssDrop(c.hostile, j.tag))
		starts := strings.Count(string(raw), "\n")
		what := fmt.Sprintf("[13] scale-set job %d (%s, fault %q)", j.id, j.tag, j.fault)
		if starts != 1 {
			v = append(v, fmt.Sprintf("%s ran %d times, want once: %q", what, starts, strings.TrimSpace(string(raw))))
		}
		if j.timedOut || j.job.Result != "succeeded" {
			inst, _ := github.InstanceOf(j.job.Runner)
			c.mu.Lock()
			k := c.killedIn([]string{inst}, j.job.Started, j.job.Finished.Add(killExplains), faultKillAgentInJob)
			c.mu.Unlock()
			if k == "" {
				v = append(v, fmt.Sprintf("%s did not succeed: state %s result %q on %q (timed out %v): %s", what, j.job.State, j.job.Result, j.job.Runner, j.timedOut, lastLine(j.job.Output)))
			}
		}
		if j.job.Runner == "" {
			continue
		}
		if j.job.ScaleSetID != set || c.sb.GitHub.ScaleSetOf(j.job.RunnerID) != set {
			v = append(v, fmt.Sprintf("%s ran on runner %s (id %d, scale set %d), not a runner of scale set %d", what, j.job.Runner, j.job.RunnerID, c.sb.GitHub.ScaleSetOf(j.job.RunnerID), set))
		}
		inst, ok := github.InstanceOf(j.job.Runner)
		if rec, err := c.store.FindInstance(ctx, inst); !ok || err != nil || rec == nil || rec.Pool != PoolJIT {
			v = append(v, fmt.Sprintf("%s ran on runner %s, whose name ends with no instance of pool %s (%v)", what, j.job.Runner, PoolJIT, err))
		}
	}
	// 14. No instance ran two jobs at once (a scale-set job or another):
	// the jobs' Started-Finished spans on each instance do not overlap.
	all := ordinary
	for _, j := range jobs {
		all = append(all, j.job)
	}
	v = append(v, jobsAtOnce(all, c.at)...)
	// 15. Every job boundary wiped: no scale-set job saw the file an earlier
	// job left in $HOME, nor a hostile job's leftovers.
	for _, j := range jobs {
		for _, mark := range []string{ssLeftoverMark, leftoverMark} {
			if i := strings.Index(j.job.Output, mark); i >= 0 {
				line, _, _ := strings.Cut(j.job.Output[i:], "\n")
				v = append(v, fmt.Sprintf("[15] scale-set job %d (%s) on %s found what an earlier job left: %s", j.id, j.tag, j.job.Runner, line))
			}
		}
	}
	// 17. Never two listener tasks at once, nor other ECS trouble the
	// sandbox saw (ECSViolations); and the listener runs at the end.
	if ev := c.sb.ECSViolations(); len(ev) > 0 {
		// When: the tasks' starts, stops, kills and exits.
		var when []string
		for _, e := range c.sb.ECSTaskEvents() {
			when = append(when, fmt.Sprintf("%s %.8s pid %d %s", e.Kind, e.TaskID, e.PID, c.at(e.At)))
		}
		for _, e := range ev {
			v = append(v, fmt.Sprintf("[17] ECS: %s (the tasks: %s)", e, strings.Join(when, ", ")))
		}
	}
	if c.d.ListenerService != "" {
		running := false
		for _, t := range c.sb.ECSTasks() {
			running = running || t.Service == c.d.ListenerService
		}
		if !running {
			v = append(v, "[17] the listener's ECS service runs no task after the play")
		}
	}
	sort.Strings(v)
	return v
}

// jobsAtOnce returns the violations of invariant 14 among jobs: two whose
// Started-Finished spans on one instance overlap. A job that never ended
// (its runner's agent killed, given up on) has no span to judge.
func jobsAtOnce(jobs []fakegithub.Job, at func(time.Time) string) []string {
	type span struct {
		id         int64
		start, end time.Time
	}
	byInstance := map[string][]span{}
	for _, j := range jobs {
		inst, ok := github.InstanceOf(j.Runner)
		if !ok || j.Started.IsZero() || j.Finished.IsZero() {
			continue
		}
		byInstance[inst] = append(byInstance[inst], span{j.ID, j.Started, j.Finished})
	}
	var v []string
	for _, inst := range sortedKeysOf(byInstance) {
		spans := byInstance[inst]
		for i, a := range spans {
			for _, b := range spans[i+1:] {
				if a.start.Before(b.end) && b.start.Before(a.end) {
					v = append(v, fmt.Sprintf("[14] instance %s ran jobs %d and %d at once (%s-%s, %s-%s)", inst, a.id, b.id, at(a.start), at(a.end), at(b.start), at(b.end)))
				}
			}
		}
	}
	return v
}

// checkStanding returns the violations of invariant 16, which refresh and
// the listener may still settle: no standing run of the scale set (run id
// ss<id>-…) holds an instance, and no runner of the scale set is
// registered.
func (c *chaos) checkStanding(ctx context.Context) []string {
	set := c.scaleSetID()
	if set == 0 {
		return nil
	}
	var v []string
	seen := map[string]bool{}
	for _, st := range []state.State{state.Created, state.Claimed, state.Running} {
		recs, err := c.store.ByPoolState(ctx, PoolJIT, st, time.Time{})
		if err != nil {
			return []string{"query records: " + err.Error()}
		}
		for _, listed := range recs {
			// The index holds no runId (state/table.go): the record does.
			// (Reading it from the index, the check saw no standing run
			// even with the listener's release taken out.)
			r, err := c.store.Get(ctx, listed.Key)
			if state.IsNotFound(err) {
				continue
			}
			if err != nil {
				return []string{"read record: " + err.Error()}
			}
			held := r.State == state.Created || r.State == state.Claimed || r.State == state.Running
			if strings.HasPrefix(r.RunID, "ss") && held && !seen[r.ID] {
				seen[r.ID] = true
				v = append(v, fmt.Sprintf("[16] instance %s is still held by the scale set's run %s (%s)", r.ID, r.RunID, r.State))
			}
		}
	}
	for _, rn := range c.sb.GitHub.Runners() {
		if c.sb.GitHub.ScaleSetOf(rn.ID) == set {
			v = append(v, fmt.Sprintf("[16] runner %s of the scale set is still registered (busy %v)", rn.Name, rn.Busy))
		}
	}
	return v
}

// waitScaleSet waits until the listener created ChaosScaleSet and holds
// its session, and removes the drop files of an earlier run in the same
// folder (a run of the same seed names its jobs alike: one of them "ran
// twice" across two runs before).
func (c *chaos) waitScaleSet(ctx context.Context) error {
	old, _ := filepath.Glob(filepath.Join(c.hostile.drop, "ss-*"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	if c.d.ListenerService == "" {
		return fmt.Errorf("fault group scaleset: the deployment has no listener (deploy with ChaosDeploy, whose linux pool serves %s), or leave the group out", ChaosScaleSet)
	}
	for deadline := time.Now().Add(2 * time.Minute); ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		for _, set := range c.sb.GitHub.ScaleSets() {
			if set.Name == ChaosScaleSet && set.SessionOwner != "" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scale set %s: no listener session within 2 minutes: %+v", ChaosScaleSet, c.sb.GitHub.ScaleSets())
		}
	}
	return ctx.Err()
}
