package sandbox_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actions/scaleset"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// deployedScaleSet deploys the sandbox with the linux pool serving scale
// set name: the module's listener runs as an ECS service, from the image the
// provider built and pushed.
func deployedScaleSet(t *testing.T, name string) (*sandbox.Sandbox, sandbox.Deployment, *lambda.Client) {
	t.Helper()
	sb, d, fn := deployedWith(t, sandbox.DeployOptions{ScaleSet: name})
	if d.ListenerService == "" {
		t.Fatal("the deployment has no listener service")
	}
	t.Cleanup(func() {
		for _, v := range sb.ECSViolations() {
			t.Errorf("ECS: %s", v)
		}
	})
	return sb, d, fn
}

// warmOne leaves one warm instance in pool linux: a workflow's run of
// one instance, then its release.
func warmOne(t testing.TB, fn *lambda.Client, d sandbox.Deployment, store *state.Store, runID string) string {
	t.Helper()
	return warmMany(t, fn, d, store, runID, 1)[0]
}

// warmMany leaves n warm instances in pool linux, claimable: a workflow's
// run of n, then its release.
func warmMany(t testing.TB, fn *lambda.Client, d sandbox.Deployment, store *state.Store, runID string, n int) []string {
	t.Helper()
	var prov provision.Output
	invoke(t, fn, d.Functions[bundle.HandlerProvision], fmt.Sprintf(`{"runId":%q,"pool":"linux","instanceCount":%d}`, runID, n), &prov)
	var rel release.Output
	invoke(t, fn, d.Functions[bundle.HandlerRelease], fmt.Sprintf(`{"runId":%q}`, runID), &rel)
	if len(rel.Released) != n {
		t.Fatalf("release: %+v", rel)
	}
	for _, id := range rel.Released {
		waitIdle(t, store, id, time.Minute)
	}
	return rel.Released
}

// waitSession waits until the scale set name exists at GitHub and a
// listener other than not holds its message session: jobs queued before
// would be no scale set's. It returns the holder.
func waitSession(t testing.TB, gh *fakegithub.Server, name, not string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, set := range gh.ScaleSets() {
			if set.Name == name && set.SessionOwner != "" && set.SessionOwner != not {
				return set.SessionOwner
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session of %s held by a listener other than %q within %s: %+v", name, not, within, gh.ScaleSets())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitStatus waits until pool linux's scale set status (what ghrunner
// status shows) names holder as its session's, and a poll answered if
// polled (written once per report, every 15 s).
func waitStatus(t *testing.T, store *state.Store, scaleSet, holder string, polled bool, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
		st, err := store.GetScaleSetStatus(context.Background(), "linux")
		if err == nil && st != nil && st.Holder == holder && (!polled || st.PolledAt > 0) && st.ScaleSet == scaleSet && st.ScaleSetID != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scale set's status: %+v %v; want held by %q (a poll answered: %v)", st, err, holder, polled)
		}
	}
}

// waitIdle waits until instance id is idle in the pool again: released,
// reaped, wiped, checked and queued for the next claim.
func waitIdle(t testing.TB, store *state.Store, id string, within time.Duration) *state.Instance {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rec, err := store.FindInstance(context.Background(), id)
		if err == nil && rec.Pooled() {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s not idle within %s: %+v %v", id, within, rec, err)
		}
		time.Sleep(20 * time.Millisecond) // BenchmarkScaleSet times it
	}
}

// TestE2E_TheScaleSetMode plays the scale-set mode as a user deploys it,
// on one deployment: terraform applies the module with a pool's
// scale_set, the provider builds the listener's image from the bundle and
// pushes it, and the sandbox runs the ECS service's task from that image.
// The parts run one after the other, each leaving the pool as it found it.
func TestE2E_TheScaleSetMode(t *testing.T) {
	t.Parallel()
	sb, d, fn := deployedScaleSet(t, "linux-scale")
	store := state.New(sb.AWS.DynamoDB(), d.Table)
	for _, part := range []struct {
		name string
		play func(*testing.T, *sandbox.Sandbox, sandbox.Deployment, *lambda.Client, *state.Store)
	}{
		{"a job runs on a warm pooled instance with no invoking job", aScaleSetJobRunsOnAWarmPooledInstanceWithNoInvokingJob},
		{"a listener killed mid-job leaks nothing and its successor finishes the run", aListenerKilledMidJobLeaksNothingAndItsSuccessorFinishesTheRun},
		{"a burst of jobs runs each once on clean instances across a listener kill", aBurstOfScaleSetJobsRunsEachOnceOnCleanInstancesAcrossAListenerKill},
		{"a scale set deleted at GitHub is made again and serves the next job", aScaleSetDeletedAtGitHubIsMadeAgain},
		{"a job cancelled before its runner took it gives its instance back to the pool", aJobCancelledBeforeItsRunnerTookItGivesItsInstanceBack},
	} {
		if !t.Run(part.name, func(t *testing.T) { part.play(t, sb, d, fn, store) }) {
			return // the next part starts from what this one should have left
		}
	}
}

// aScaleSetJobRunsOnAWarmPooledInstanceWithNoInvokingJob: a job that names
// only the scale set in runs-on runs on the pool's warm instance with no
// provision or release call, the instance is wiped and pooled after the
// job, and the next job runs on it again without seeing what the first
// left.
func aScaleSetJobRunsOnAWarmPooledInstanceWithNoInvokingJob(t *testing.T, sb *sandbox.Sandbox, d sandbox.Deployment, fn *lambda.Client, store *state.Store) {
	warm := warmOne(t, fn, d, store, "78201")
	holder := waitSession(t, sb.GitHub, "linux-scale", "", time.Minute)
	calls := sb.Invocations()

	first := sb.GitHub.EnqueueJob("linux-scale", "echo secret-of-the-first >$HOME/left-behind; echo first")
	j, err := sb.GitHub.WaitJob(first, 90*time.Second)
	if err != nil || j.Result != "succeeded" {
		t.Fatalf("the scale set's first job: %+v %v", j, err)
	}
	if !strings.HasSuffix(j.Runner, warm) {
		t.Errorf("the first job ran on runner %s, want one of the warm instance %s", j.Runner, warm)
	}
	// The listener recorded the job's workflow run on the standing run
	// that took it: what refresh re-runs should spot take the instance
	// under the job (issue 37).
	if rec := waitIdle(t, store, warm, time.Minute); rec.LastRunID == "" {
		t.Errorf("the released instance %s names no last run", warm)
	} else if run, err := store.GetRun(context.Background(), rec.LastRunID); err != nil || run.Job == nil || run.Job.WorkflowRunID != first || !strings.HasSuffix(run.Job.Repository, "/repo") {
		t.Errorf("standing run %s after its job: %+v %v; want the job's workflow run %d recorded", rec.LastRunID, run, err, first)
	}

	second := sb.GitHub.EnqueueJob("linux-scale", "test ! -e $HOME/left-behind && echo clean")
	j, err = sb.GitHub.WaitJob(second, 90*time.Second)
	if err != nil || j.Result != "succeeded" || !strings.Contains(j.Output, "clean") {
		t.Fatalf("the second job (the first's file must be gone): %+v %v", j, err)
	}
	if !strings.HasSuffix(j.Runner, warm) {
		t.Errorf("the second job ran on runner %s, want the reused warm instance %s", j.Runner, warm)
	}
	for name, n := range sb.Invocations() {
		if (name == d.Functions[bundle.HandlerProvision] || name == d.Functions[bundle.HandlerRelease]) && n != calls[name] {
			t.Errorf("%s was invoked %d times during the scale set's jobs: the mode needs no invoking job", name, n-calls[name])
		}
	}
	if starts := sb.ECSTaskStarts()[d.ListenerService]; starts != 1 {
		t.Errorf("the listener's task started %d times, want once", starts)
	}
	// What ghrunner status shows of the scale set: its session's holder
	// and a poll answered (written once per report, every 15 s).
	waitStatus(t, store, "linux-scale", holder, true, 30*time.Second)
	waitIdle(t, store, warm, time.Minute)
}

// noneHeld fails unless, within two minutes, no instance of the linux pool
// is created, claimed or running and no runner is registered.
func noneHeld(t *testing.T, sb *sandbox.Sandbox, store *state.Store) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var held []string
		for _, st := range []state.State{state.Created, state.Claimed, state.Running} {
			recs, err := store.ByPoolState(context.Background(), "linux", st, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				held = append(held, r.ID+" "+string(st))
			}
		}
		if len(held) == 0 && len(sb.GitHub.Runners()) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still held: %v; runners registered: %s", held, fmt.Sprint(sb.GitHub.Runners()))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// aListenerKilledMidJobLeaksNothingAndItsSuccessorFinishesTheRun kills
// the listener's ECS task while its job runs: the job still ends
// once, the killed listener's session ends once nobody polls it, the task
// ECS starts again takes the scale set over, adopts the run from the
// records and releases it when its runner ended — though it never saw the
// job's completion — and the instance is back in the pool; nothing is
// left held or registered. The killed listener's provision never marked
// the instance running: taking such a claim for given up (as a workflow's
// run may: its jobs wait for provision's answer) expired the instance
// under its job, and this test failed with "instance … not idle …
// State:terminated".
func aListenerKilledMidJobLeaksNothingAndItsSuccessorFinishesTheRun(t *testing.T, sb *sandbox.Sandbox, d sandbox.Deployment, _ *lambda.Client, store *state.Store) {
	// The instance the part before left in the pool (the index may lag).
	var idle []state.Instance
	for deadline := time.Now().Add(30 * time.Second); len(idle) != 1; time.Sleep(200 * time.Millisecond) {
		var err error
		if idle, err = store.ByPoolState(context.Background(), "linux", state.Idle, time.Time{}); err != nil || time.Now().After(deadline) {
			t.Fatalf("the pool's idle instances: %d, %v; want the one the part before left", len(idle), err)
		}
	}
	warm := idle[0].ID
	holder := waitSession(t, sb.GitHub, "linux-scale", "", time.Minute)

	id := sb.GitHub.EnqueueJob("linux-scale", "sleep 4; echo done")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if j, _ := sb.GitHub.Job(id); j.State == fakegithub.JobRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job did not start within a minute")
		}
	}
	if !sb.KillECSTask(d.ListenerService) {
		t.Fatal("no listener task to kill")
	}
	j, err := sb.GitHub.WaitJob(id, time.Minute)
	if err != nil || j.Result != "succeeded" || !strings.HasSuffix(j.Runner, warm) {
		t.Fatalf("the job: %+v %v", j, err)
	}
	successor := waitSession(t, sb.GitHub, "linux-scale", holder, time.Minute)
	waitStatus(t, store, "linux-scale", successor, false, 30*time.Second)
	waitIdle(t, store, warm, time.Minute)
	noneHeld(t, sb, store)
}

// aBurstOfScaleSetJobsRunsEachOnceOnCleanInstancesAcrossAListenerKill
// queues twelve jobs for a scale set of at most three runners and kills
// the listener's task halfway: every job runs once and succeeds, each on
// an instance no other job held at the same time and that no earlier job
// left anything on (each job fails if the file a job before it wrote is
// there); a failed job's re-run (a new job of the same scale set, as
// "Re-run failed jobs" makes) runs; at the end nothing is held or
// registered.
func aBurstOfScaleSetJobsRunsEachOnceOnCleanInstancesAcrossAListenerKill(t *testing.T, sb *sandbox.Sandbox, d sandbox.Deployment, _ *lambda.Client, store *state.Store) {
	waitSession(t, sb.GitHub, "linux-scale", "", time.Minute)

	const script = "test ! -e $HOME/left-by-a-job && touch $HOME/left-by-a-job && sleep 1"
	var ids []int64
	for range 12 {
		ids = append(ids, sb.GitHub.EnqueueJob("linux-scale", script))
	}
	failed := sb.GitHub.EnqueueJob("linux-scale", "exit 3")
	waitDone := func(id int64) fakegithub.Job {
		j, err := sb.GitHub.WaitJob(id, 3*time.Minute)
		if err != nil {
			t.Fatalf("job %d: %v", id, err)
		}
		return j
	}
	waitDone(ids[4])
	if !sb.KillECSTask(d.ListenerService) {
		t.Fatal("no listener task to kill")
	}
	if j := waitDone(failed); j.Result != "failed" {
		t.Errorf("the failing job: %+v", j)
	}
	rerun := sb.GitHub.EnqueueJob("linux-scale", "echo re-run")
	if j := waitDone(rerun); j.Result != "succeeded" {
		t.Errorf("the failed job's re-run: %+v", j)
	}
	type span struct {
		job        int64
		start, end time.Time
	}
	byInstance := map[string][]span{}
	for _, id := range ids {
		j := waitDone(id)
		if j.Result != "succeeded" {
			t.Errorf("job %d: %s on %s (a file an earlier job left?): %s", id, j.Result, j.Runner, j.Output)
		}
		inst := j.Runner[strings.LastIndex(j.Runner, "-i-")+1:]
		byInstance[inst] = append(byInstance[inst], span{id, j.Started, j.Finished})
	}
	for inst, spans := range byInstance {
		for i, a := range spans {
			for _, b := range spans[i+1:] {
				if a.start.Before(b.end) && b.start.Before(a.end) {
					t.Errorf("instance %s ran jobs %d and %d at once", inst, a.job, b.job)
				}
			}
		}
	}
	// The burst waits for its own released instances (seconds) instead of
	// launching more (minutes on EC2, and their cost): launching, 8
	// instances served these 12 jobs.
	if len(byInstance) > 3 {
		t.Errorf("%d instances served 12 jobs on a scale set of at most 3 runners", len(byInstance))
	}
	noneHeld(t, sb, store)
}

// aScaleSetDeletedAtGitHubIsMadeAgain deletes the scale set through GitHub's
// own client, as an administrator might: the listener's session ends with
// it, and the listener makes the scale set again (ensureScaleSet on every
// new session) and serves the next job that names it.
func aScaleSetDeletedAtGitHubIsMadeAgain(t *testing.T, sb *sandbox.Sandbox, _ sandbox.Deployment, _ *lambda.Client, _ *state.Store) {
	ctx := context.Background()
	c, err := scaleset.NewClientWithGitHubApp(scaleset.ClientWithGitHubAppConfig{
		GitHubConfigURL: sb.GitHub.ScaleSetConfigURL(sandbox.Org),
		GitHubAppAuth: scaleset.GitHubAppAuth{ClientID: strconv.FormatInt(sb.GitHub.AppID, 10),
			InstallationID: sb.GitHub.InstallationID(sandbox.Org), PrivateKey: string(sb.GitHub.PrivateKeyPEM)},
		SystemInfo: scaleset.SystemInfo{System: "ghrunner-tests", Subsystem: "admin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var old int
	for _, set := range sb.GitHub.ScaleSets() {
		if set.Name == "linux-scale" {
			old = set.ID
		}
	}
	if old == 0 {
		t.Fatal("no scale set linux-scale to delete")
	}
	if err := c.DeleteRunnerScaleSet(ctx, old); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		made := false
		for _, set := range sb.GitHub.ScaleSets() {
			made = made || set.Name == "linux-scale" && set.ID != old && set.SessionOwner != ""
		}
		if made {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scale set was not made again within a minute: %+v", sb.GitHub.ScaleSets())
		}
	}
	id := sb.GitHub.EnqueueJob("linux-scale", "echo after")
	if j, err := sb.GitHub.WaitJob(id, time.Minute); err != nil || j.Result != "succeeded" {
		t.Fatalf("the job after the scale set was made again: %+v %v", j, err)
	}
}

// aJobCancelledBeforeItsRunnerTookItGivesItsInstanceBack: a job is
// assigned to the scale set and its runner comes online, but its run is
// cancelled before the runner takes it (the fake holds the job from the
// runner until then): GitHub's count of assigned jobs falls, the
// listener deletes the runner nobody needs and releases its run, and the
// instance is back in the pool, wiped and claimable; nothing is left held
// or registered. Without the listener's trim (trim.go) the run stayed
// standing, its instance claimed for nobody, and this failed with
// "instance … not idle".
func aJobCancelledBeforeItsRunnerTookItGivesItsInstanceBack(t *testing.T, sb *sandbox.Sandbox, _ sandbox.Deployment, _ *lambda.Client, store *state.Store) {
	waitSession(t, sb.GitHub, "linux-scale", "", time.Minute)
	sb.GitHub.HoldScaleSetJobs(true)
	defer sb.GitHub.HoldScaleSetJobs(false)
	id := sb.GitHub.EnqueueJob("linux-scale", "echo must-not-run")
	var runner fakegithub.RunnerInfo
	for deadline := time.Now().Add(time.Minute); runner.Name == ""; time.Sleep(100 * time.Millisecond) {
		for _, r := range sb.GitHub.Runners() {
			if r.Online && sb.GitHub.ScaleSetOf(r.ID) != 0 {
				runner = r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no runner of the scale set online within a minute: %+v", sb.GitHub.Runners())
		}
	}
	if !sb.GitHub.CancelQueuedJob(id) {
		j, _ := sb.GitHub.Job(id)
		t.Fatalf("the job was no longer queued when cancelled: %+v", j)
	}
	sb.GitHub.HoldScaleSetJobs(false)
	inst := runner.Name[strings.LastIndex(runner.Name, "-i-")+1:]
	waitIdle(t, store, inst, time.Minute)
	if j, _ := sb.GitHub.Job(id); j.Runner != "" || j.Result != "cancelled" {
		t.Errorf("the cancelled job: %+v", j)
	}
	noneHeld(t, sb, store)
}
