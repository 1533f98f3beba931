package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// Step is one line of the story's summary.
type Step struct {
	Name string
	Want string
	Got  string
	Took time.Duration
	OK   bool
}

// Story plays workflows against a deployed sandbox, invoking the functions
// only through the front endpoint's Invoke API, as `aws lambda invoke` does.
type Story struct {
	sb     *Sandbox
	d      Deployment
	lambda *lambda.Client
	store  *state.Store
	fleet  *fleet.Fleet
	out    io.Writer
	start  time.Time

	mu    sync.Mutex // concurrent workflows record at once
	Steps []Step
	// Launched is every instance id the story saw created.
	Launched map[string]bool
	tally    tally     // what the functions returned, for their metrics
	rel      published // the runner release published mid-story (storyupgrade.go)
	tier     tierStory // the stopped tier's instances (storystopped.go)
	// seen is what the story saw of each run it played, for the cost
	// report's check (storycost.go).
	seen map[string]runSeen
}

// NewStory prepares a story; out receives the live progress.
func NewStory(ctx context.Context, sb *Sandbox, d Deployment, out io.Writer) (*Story, error) {
	cfg, err := awsconf.Load(ctx, awsconf.Options{Region: Region, Endpoint: sb.URL, AccessKeyID: "sandbox", SecretAccessKey: "sandbox", MaxAttempts: 1})
	if err != nil {
		return nil, err
	}
	return &Story{sb: sb, d: d, lambda: admin.Lambda(cfg), store: state.New(sb.AWS.DynamoDB(), d.Table), fleet: fleet.New(sb.AWS.EC2(), Environment),
		out: out, start: time.Now(), Launched: map[string]bool{}, seen: map[string]runSeen{}}, nil
}

// Play runs the whole story and reports whether every step did what it should.
func (st *Story) Play(ctx context.Context) bool {
	stopView := st.liveView(ctx)
	defer stopView()

	// The stopped tier plays first: its scale-downs would retire the
	// other pools' idle instances later on.
	st.stoppedTier(ctx)
	if ctx.Err() != nil {
		return false
	}
	first := st.play(ctx, flow{name: "cold provision of 3 runners, a job on each, release", runID: "run-1001", pool: PoolJIT, runners: 3, created: 3})
	if ctx.Err() != nil {
		return false // interrupted: stop here, the caller cleans up
	}
	st.check("a stock image: each new instance downloaded the pinned runner release", fmt.Sprintf("at least %d downloads of actions/runner v%s", len(first), runnerrelease.Default),
		func() (string, bool) {
			n := st.sb.GitHub.Count(fakegithub.CountReleaseDownload)
			return fmt.Sprintf("%d downloads, checked against the pool's SHA-256", n), n >= len(first) && len(first) > 0
		})
	st.play(ctx, flow{name: "second workflow reuses the pooled runners", runID: "run-1002", pool: PoolJIT, runners: 3, reused: 3, sameAs: first})
	if ctx.Err() != nil {
		return false
	}
	// GitHub publishes a newer runner release while the pool idles: the
	// next workflow's jobs must not wait on an update.
	st.newRelease(ctx, PoolJIT, first)
	st.play(ctx, flow{name: "a workflow on the new release, no job waiting on an update", runID: "run-1006", pool: PoolJIT, runners: 3, reused: 3, sameAs: first, version: st.rel.version})
	if ctx.Err() != nil {
		return false
	}

	var wg sync.WaitGroup
	var a, b []string
	wg.Add(2)
	go func() {
		defer wg.Done()
		a = st.play(ctx, flow{name: "concurrent workflow A (2 runners, 6 jobs)", runID: "run-1003", pool: PoolJIT, runners: 2, jobs: 6, created: -1, reused: -1})
	}()
	go func() {
		defer wg.Done()
		b = st.play(ctx, flow{name: "concurrent workflow B (2 runners)", runID: "run-1004", pool: PoolJIT, runners: 2, created: -1, reused: -1})
	}()
	wg.Wait()
	if ctx.Err() != nil {
		return false
	}
	st.check("concurrent workflows share nothing, reuse the pool", "4 distinct runners, 3 reused + 1 created",
		func() (string, bool) {
			all := append(slices.Clone(a), b...)
			distinct := map[string]bool{}
			for _, id := range all {
				distinct[id] = true
			}
			return fmt.Sprintf("%d distinct runners, %d instances launched in total", len(distinct), len(st.Launched)),
				len(all) == 4 && len(distinct) == 4 && len(st.Launched) == 4
		})
	// The scale-set mode on the same warm pool: jobs that name only the
	// scale set, with no invoking job.
	st.scaleSet(ctx, 3)
	if ctx.Err() != nil {
		return false
	}
	// More workflows at once than the pool's max_instances (10 in
	// examples/sandbox) and the account's Lambda concurrency.
	st.burst(ctx, PoolJIT, 12, 10)
	if ctx.Err() != nil {
		return false
	}
	// The token pool's idle window (the story deploys it always active)
	// fills it before its first workflow, which then claims warm runners.
	token := flow{name: "a token pool (for GHES without just-in-time runners): 2 runners, 4 jobs", runID: "run-1005", pool: PoolToken, runners: 2, jobs: 4, created: 2}
	if warm := st.prewarm(ctx, PoolToken); len(warm) == token.runners {
		token.name = "a pre-warmed token pool (for GHES without just-in-time runners): 2 runners, 4 jobs"
		token.created, token.reused, token.sameAs = 0, token.runners, warm
	}
	if ctx.Err() != nil {
		return false
	}
	st.play(ctx, token)
	if ctx.Err() != nil {
		return false
	}
	st.checkRelease(ctx)
	st.buildCLI() // for the last step, while the story waits
	st.awaitKeepTime(ctx)
	st.scaleDown(ctx)
	if ctx.Err() != nil {
		return false
	}
	st.scheduledRefresh(ctx)
	st.checkMetrics()
	st.check("IAM allowed every request of the functions and agents", "0 requests denied by the deployed policies", func() (string, bool) {
		d := st.sb.Denials()
		if len(d) == 0 {
			return "0 denied", true
		}
		return fmt.Sprintf("%d denied, first: %s", len(d), d[0]), false
	})
	st.costReport(ctx)
	return st.ok()
}

func (st *Story) ok() bool {
	for _, s := range st.Steps {
		if !s.OK {
			return false
		}
	}
	return len(st.Steps) > 0
}

func (st *Story) record(s Step) {
	st.mu.Lock()
	defer st.mu.Unlock()
	mark := "ok  "
	if !s.OK {
		mark = "FAIL"
	}
	fmt.Fprintf(st.out, "[%5.1fs] %s %s — %s (%.1fs)\n", time.Since(st.start).Seconds(), mark, s.Name, s.Got, s.Took.Seconds())
	st.Steps = append(st.Steps, s)
}

func (st *Story) check(name, want string, f func() (string, bool)) {
	start := time.Now()
	got, ok := f()
	st.record(Step{Name: name, Want: want, Got: got, Took: time.Since(start), OK: ok})
}

// invoke calls a function through the endpoint and decodes its answer; a
// FunctionError becomes an error carrying the function's message.
func (st *Story) invoke(ctx context.Context, handler string, payload, out any) error {
	in, _ := json.Marshal(payload)
	in = st.sb.sign(in) // as the workflow's invoking job sends it
	var res *lambda.InvokeOutput
	err := ThrottleRetry(ctx, func() (err error) {
		res, err = st.lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(st.d.Functions[handler]), Payload: in})
		return err
	})
	if err != nil {
		return err
	}
	if res.FunctionError != nil {
		return fmt.Errorf("%s failed: %s", handler, res.Payload)
	}
	return json.Unmarshal(res.Payload, out)
}

// flow is one workflow of the story: runners provisioned from pool for
// runID, jobs run on them (more jobs than runners: a just-in-time pool
// gives each job a runner of its own, a token pool's runners take several),
// then released. created/reused < 0 are not checked; started (from the
// pool's stopped tier) is; sameAs, when given, are the instances the
// workflow must get; version, when given, is the runner release every job
// must run on, with no update message sent; script, when given, is what
// each job runs.
type flow struct {
	name, runID, pool        string
	runners, jobs            int
	created, reused, started int
	sameAs                   []string
	version                  string
	script                   string
}

// play plays a flow and returns the instances it got.
func (st *Story) play(ctx context.Context, f flow) []string {
	if f.jobs == 0 {
		f.jobs = f.runners
	}
	start, refusedBefore := time.Now(), st.sb.ProfileRefusals()
	asked := start
	var out provision.Output
	err := st.invoke(ctx, "provision", map[string]any{"runId": f.runID, "pool": f.pool, "instanceCount": f.runners}, &out)
	answered := time.Now()
	var ids []string
	for _, in := range out.Instances {
		ids = append(ids, in.InstanceID)
		if in.Source == "created" {
			st.mu.Lock()
			st.Launched[in.InstanceID] = true
			st.mu.Unlock()
		}
	}
	sort.Strings(ids)
	ok := err == nil && out.Status == "ready" && len(ids) == f.runners &&
		(f.created < 0 || out.Created == f.created) && (f.reused < 0 || out.Reused == f.reused) && out.Started == f.started &&
		(f.sameAs == nil || slices.Equal(ids, f.sameAs))
	got := fmt.Sprintf("provision %s: %d ready (%d created, %d reused) in %.1fs", f.runID, len(ids), out.Created, out.Reused, out.ElapsedSeconds)
	if out.Started > 0 || f.started > 0 {
		got = fmt.Sprintf("provision %s: %d ready (%d created, %d reused, %d started from the stopped tier) in %.1fs", f.runID, len(ids), out.Created, out.Reused, out.Started, out.ElapsedSeconds)
	}
	if split, found := SplitOf(start, answered, out, st.sb.GitHub.History()); found {
		got += "; slowest: " + split.String()
	}
	if n := st.sb.ProfileRefusals() - refusedBefore; n > 0 {
		// A pool applied moments ago: IAM's delay (iamlag.go) is in the launch.
		got += fmt.Sprintf("; waited out %d launches EC2 refused while the new instance profile propagated", n)
	}
	if err != nil {
		got = err.Error()
	}
	st.record(Step{Name: f.name + ": provision", Want: fmt.Sprintf("%d ready", f.runners), Got: got, Took: time.Since(start), OK: ok})
	if err != nil {
		return ids
	}
	st.mu.Lock()
	st.tally.provisioned(out)
	st.mu.Unlock()

	start = time.Now()
	updatesBefore := len(st.sb.GitHub.UpdateMessages())
	queued := make([]int64, f.jobs)
	for i := range queued {
		queued[i] = st.sb.GitHub.EnqueueJob(out.Label, cmp.Or(f.script, "echo building "+f.runID))
	}
	foreign := 0
	runners := map[string]bool{}
	var done []fakegithub.Job
	for _, id := range queued {
		job, err := st.sb.GitHub.WaitJobContext(ctx, id)
		if err != nil || job.Result != "succeeded" {
			continue
		}
		done = append(done, job)
		runners[job.Runner] = true
		if inst, _ := github.InstanceOf(job.Runner); !slices.Contains(ids, inst) {
			foreign++
		}
	}
	want := fmt.Sprintf("%d jobs on %s's runners", f.jobs, f.runID)
	wantRunners := f.runners
	if f.pool == PoolJIT {
		want, wantRunners = want+", one runner each", f.jobs
	}
	got = fmt.Sprintf("%d/%d succeeded on %d runners, %d on a runner of another run", len(done), f.jobs, len(runners), foreign)
	if f.jobs > f.runners {
		g := NextJobGaps(done, st.sb.GitHub.History())
		got += fmt.Sprintf("; next-job gap p50 %.2fs max %.2fs (job done → next job started)", Quantile(g.Started, 0.5).Seconds(), Quantile(g.Started, 1).Seconds())
		if f.pool == PoolJIT {
			got += fmt.Sprintf(", next runner online p50 %.2fs", Quantile(g.Online, 0.5).Seconds())
		}
	}
	jobsOK := len(done) == f.jobs && foreign == 0 && len(runners) == wantRunners
	if f.version != "" {
		want += ", each on runner v" + f.version + ", 0 update messages"
		extra, ok := st.onRelease(done, f.version, updatesBefore)
		got, jobsOK = got+extra, jobsOK && ok
	}
	st.record(Step{Name: f.name + ": jobs", Want: want, Got: got, Took: time.Since(start), OK: jobsOK})

	start = time.Now()
	var rel release.Output
	err = st.invoke(ctx, "release", map[string]any{"runId": f.runID}, &rel)
	if err == nil {
		st.saw(f.runID, seenOf(out, asked, answered, start, time.Now()))
	}
	got = fmt.Sprintf("release %s: %d back in the pool, %d expired in %.1fs", f.runID, len(rel.Released), len(rel.Expired), rel.ElapsedSeconds)
	if err != nil {
		got = err.Error()
	} else {
		st.mu.Lock()
		st.tally.released(rel)
		st.mu.Unlock()
	}
	st.record(Step{Name: f.name + ": release", Want: fmt.Sprintf("%d back in the pool", f.runners), Got: got, Took: time.Since(start), OK: err == nil && len(rel.Released) == f.runners})
	return ids
}
