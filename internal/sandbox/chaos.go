package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// ChaosOptions configure a chaos run.
type ChaosOptions struct {
	Workflows   int   // how many workflows to play
	Concurrency int   // how many at once; default 4
	Seed        int64 // the same seed makes the same choices of faults
	Out         io.Writer
}

// ChaosReport is what a chaos run did and found.
type ChaosReport struct {
	Seed       int64
	Workflows  int
	Succeeded  int // every step of the workflow worked
	Failed     int // a step failed, as faults make them; not a violation
	Jobs       int
	Faults     map[string]int
	Failures   map[string]int // why workflows failed: the first failed step, by kind
	Violations []string
	Elapsed    time.Duration
}

// The faults a workflow may meet; each workflow draws one, and the
// background faults (agent kills, GitHub errors, duplicated pool messages)
// hit whatever runs at the time.
const (
	faultNone            = "none"
	faultKillAfterFleet  = "provision killed after CreateFleet, before its records"
	faultKillProvision   = "provision killed midway (random moment)"
	faultKillRelease     = "release killed while waiting for deregistration"
	faultKillAgent       = "agent process killed (background, any lifecycle step)"
	faultKillAgentInJob  = "agent process killed during a job"
	faultGitHub5xx       = "GitHub 5xx (background)"
	faultGitHubRateLimit = "GitHub secondary rate limit (background)"
	faultGitHubSlow      = "GitHub slow, 1-2 s (background)"
	faultDuplicateMsg    = "pool message duplicated and delayed"
	faultClockSkew       = "instance clock off by up to ±4 s"
)

var workflowFaults = []string{faultNone, faultKillAfterFleet, faultKillProvision, faultKillRelease, faultKillAgentInJob}

// chaos holds one run's state.
type chaos struct {
	sb     *Sandbox
	d      Deployment
	lambda *lambda.Client
	store  *state.Store
	fleet  *fleet.Fleet
	out    io.Writer

	mu     sync.Mutex
	rng    *rand.Rand
	faults map[string]int
	// given: what provision handed each run, the check for "no job on a
	// runner of another run".
	given    map[string][]string
	jobs     []fakegithub.Job
	failures map[string]int
	// armed are the provisions to kill once a CreateFleet answer went back
	// (one per CreateFleet), by runId.
	armed map[string]context.CancelFunc
}

// Chaos plays many workflows with random faults against a deployed sandbox,
// then lets one refresh settle and checks the invariants.
func (s *Sandbox) Chaos(ctx context.Context, d Deployment, o ChaosOptions) (ChaosReport, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	cfg, err := awsconf.Load(ctx, awsconf.Options{Region: Region, Endpoint: s.URL, AccessKeyID: "chaos", SecretAccessKey: "chaos", MaxAttempts: 1})
	if err != nil {
		return ChaosReport{}, err
	}
	c := &chaos{sb: s, d: d, lambda: cfg.Lambda(), store: state.New(s.AWS.DynamoDB(), d.Table), fleet: fleet.New(s.AWS.EC2(), Environment),
		out: o.Out, rng: rand.New(rand.NewSource(o.Seed)), faults: map[string]int{}, given: map[string][]string{}, failures: map[string]int{}, armed: map[string]context.CancelFunc{}}
	start := time.Now()
	rep := ChaosReport{Seed: o.Seed, Workflows: o.Workflows}

	s.SetFaults(Faults{AfterCreateFleet: c.afterCreateFleet, DuplicateMessage: c.duplicate, ClockOffset: c.clockOffset})
	bg, stopBackground := context.WithCancel(ctx)
	var bgDone sync.WaitGroup
	bgDone.Add(3)
	go func() { defer bgDone.Done(); c.killAgents(bg) }()
	go func() { defer bgDone.Done(); c.githubFaults(bg) }()
	go func() { defer bgDone.Done(); c.refreshLoop(bg) }()

	// Each workflow's fault is drawn up front, so a seed gives the same plan
	// whatever the timing.
	plan := make([]string, o.Workflows)
	for i := range plan {
		plan[i] = workflowFaults[c.intn(len(workflowFaults))]
	}
	sem := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	var okCount, failCount int
	var countMu sync.Mutex
	for i := 0; i < o.Workflows && ctx.Err() == nil; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			ok := c.workflow(ctx, fmt.Sprintf("chaos-%d-%d", o.Seed, i), 1+c.intn(2), plan[i])
			countMu.Lock()
			if ok {
				okCount++
			} else {
				failCount++
			}
			done := okCount + failCount
			countMu.Unlock()
			if done%10 == 0 || done == o.Workflows {
				fmt.Fprintf(c.out, "  %d/%d workflows played (%d with every step ok) in %.0fs\n", done, o.Workflows, okCount, time.Since(start).Seconds())
			}
		}(i)
	}
	wg.Wait()
	stopBackground()
	bgDone.Wait()
	s.SetFaults(Faults{})
	s.GitHub.ClearFaults()

	fmt.Fprintln(c.out, "  faults off; settling: refresh until the records and EC2 agree ...")
	rep.Violations = c.settleAndCheck(ctx)
	rep.Succeeded, rep.Failed = okCount, failCount
	c.mu.Lock()
	rep.Faults, rep.Jobs, rep.Failures = c.faults, len(c.jobs), c.failures
	c.mu.Unlock()
	rep.Elapsed = time.Since(start)
	return rep, ctx.Err()
}

func (c *chaos) intn(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Intn(n)
}

func (c *chaos) count(fault string) {
	c.mu.Lock()
	c.faults[fault]++
	c.mu.Unlock()
}

// workflow is what a GitHub workflow does: provision, one job per runner,
// and release in an always() step; a failed release step is re-run once.
func (c *chaos) workflow(ctx context.Context, runID string, count int, fault string) bool {
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
	err := c.invoke(pctx, "provision", map[string]any{"runId": runID, "pool": "linux", "instanceCount": count}, &prov)
	cancel()
	c.mu.Lock()
	delete(c.armed, runID) // not met when everything was reused
	c.mu.Unlock()
	ok := err == nil && prov.Status == "ready"
	if !ok {
		c.failed("provision", err, fault)
	}
	if ok {
		ids := make([]string, 0, len(prov.Instances))
		for _, in := range prov.Instances {
			ids = append(ids, in.InstanceID)
		}
		c.mu.Lock()
		c.given[runID] = ids
		c.mu.Unlock()
		if ok = c.runJobs(ctx, runID, ids, fault == faultKillAgentInJob); !ok {
			c.failed("job", nil, fault)
		}
	}

	var rel release.Output
	rctx, cancel := context.WithCancel(ctx)
	if fault == faultKillRelease {
		time.AfterFunc(time.Duration(100+c.intn(1200))*time.Millisecond, func() { c.kill(rctx, cancel, fault) })
	}
	err = c.invoke(rctx, "release", map[string]any{"runId": runID}, &rel)
	cancel()
	if err != nil {
		if ok {
			c.failed("release", err, fault)
		}
		ok = false
		if err = c.invoke(ctx, "release", map[string]any{"runId": runID}, &rel); err != nil {
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

func (c *chaos) runJobs(ctx context.Context, runID string, ids []string, killAgent bool) bool {
	jobs := make([]int64, len(ids))
	for i := range ids {
		jobs[i] = c.sb.GitHub.EnqueueJob(runID, "sleep 0.3; echo job of "+runID)
	}
	if killAgent {
		time.AfterFunc(150*time.Millisecond, func() {
			if c.sb.KillAgent(ids[c.intn(len(ids))]) {
				c.count(faultKillAgentInJob)
			}
		})
	}
	ok := true
	for _, id := range jobs {
		jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		job, err := c.sb.GitHub.WaitJobContext(jctx, id)
		cancel()
		if err != nil {
			job, _ = c.sb.GitHub.Job(id)
			ok = false
		}
		c.mu.Lock()
		c.jobs = append(c.jobs, job)
		c.mu.Unlock()
		ok = ok && job.Result == "succeeded"
	}
	return ok
}

func (c *chaos) invoke(ctx context.Context, handler string, payload, out any) error {
	in, _ := json.Marshal(payload)
	res, err := c.lambda.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(c.d.Functions[handler]), Payload: in})
	if err != nil {
		return err
	}
	if res.FunctionError != nil {
		return fmt.Errorf("%s: %s", handler, res.Payload)
	}
	return json.Unmarshal(res.Payload, out)
}

// afterCreateFleet kills one armed provision right after a CreateFleet:
// its own, or another's while it is under way.
func (c *chaos) afterCreateFleet() {
	c.mu.Lock()
	var kill context.CancelFunc
	for runID, cancel := range c.armed {
		kill = cancel
		delete(c.armed, runID)
		break
	}
	c.mu.Unlock()
	if kill != nil {
		kill()
		c.count(faultKillAfterFleet)
	}
}

// kill ends an invocation still under way.
func (c *chaos) kill(ctx context.Context, cancel context.CancelFunc, fault string) {
	if ctx.Err() == nil {
		cancel()
		c.count(fault)
	}
}

func (c *chaos) duplicate() (bool, time.Duration) {
	if c.intn(3) != 0 {
		return false, 0
	}
	c.count(faultDuplicateMsg)
	return true, time.Duration(c.intn(2000)) * time.Millisecond
}

// clockOffset puts a third of the new instances' clocks off, within the
// heartbeat staleness limit of examples/sandbox (10 s).
func (c *chaos) clockOffset(string) time.Duration {
	if c.intn(3) != 0 {
		return 0
	}
	c.count(faultClockSkew)
	return time.Duration(c.intn(8001)-4000) * time.Millisecond
}

// killAgents kills a random live agent every second or two: during boot,
// registration, a job, deregistration or idle, whichever it meets.
func (c *chaos) killAgents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(800+c.intn(1500)) * time.Millisecond):
		}
		live, err := c.fleet.List(ctx, fleet.Filter{Pool: "linux"})
		if err != nil || len(live) == 0 {
			continue
		}
		if c.sb.KillAgent(live[c.intn(len(live))].ID) {
			c.count(faultKillAgent)
		}
	}
}

// githubFaults turns GitHub trouble on and off: 5xx, secondary rate limits
// and slowness, each for a few seconds on a share of the requests.
func (c *chaos) githubFaults(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(2000+c.intn(3000)) * time.Millisecond):
		}
		var f fakegithub.Fault
		switch kind := c.intn(3); kind {
		case 0:
			f = fakegithub.Fault{Status: 502, Fraction: 0.3}
			c.count(faultGitHub5xx)
		case 1:
			f = fakegithub.Fault{Status: 403, RetryAfter: 1, Fraction: 0.2}
			c.count(faultGitHubRateLimit)
		default:
			f = fakegithub.Fault{Latency: time.Duration(1000+c.intn(1000)) * time.Millisecond, Fraction: 0.3}
			c.count(faultGitHubSlow)
		}
		c.sb.GitHub.Inject(f)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(1000+c.intn(2000)) * time.Millisecond):
		}
		c.sb.GitHub.ClearFaults()
	}
}

// refreshLoop runs refresh every few seconds, as its schedule would with a
// shorter period, so reconciliation works under the faults too.
func (c *chaos) refreshLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
		var out json.RawMessage
		c.invoke(ctx, "refresh", map[string]any{}, &out)
	}
}

// settleAndCheck runs refresh every few seconds until EC2 and the records
// agree, within the created TTL of examples/sandbox (refresh terminates an
// instance without a record only once it is that old) plus a margin, and
// returns the violations left.
func (c *chaos) settleAndCheck(ctx context.Context) []string {
	const createdTTL = 60 * time.Second
	deadline := time.Now().Add(createdTTL + 30*time.Second)
	var v []string
	for round := 1; ; round++ {
		var out json.RawMessage
		if err := c.invoke(ctx, "refresh", map[string]any{}, &out); err != nil {
			v = []string{"refresh failed after the faults: " + err.Error()}
		} else {
			time.Sleep(time.Second) // terminated instances' agents stop
			if v = c.check(ctx); len(v) == 0 {
				fmt.Fprintf(c.out, "  settled after %d refreshes\n", round)
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return v
		}
		if round%4 == 1 {
			fmt.Fprintf(c.out, "  after refresh %d: %d mismatches (e.g. %s); refreshing again ...\n", round, len(v), v[0])
		}
		time.Sleep(4 * time.Second)
	}
}

// check returns every invariant violation it finds.
func (c *chaos) check(ctx context.Context) []string {
	var v []string
	live, err := c.fleet.List(ctx, fleet.Filter{})
	if err != nil {
		return []string{"list instances: " + err.Error()}
	}
	alive := map[string]bool{}
	for _, in := range live {
		alive[in.ID] = true
	}
	// The index finds the live records; a consistent read gets all of each
	// (the index does not project every attribute).
	var ids []string
	for _, st := range []state.State{state.Created, state.Claimed, state.Running, state.Idle} {
		recs, err := c.store.ByPoolState(ctx, "linux", st, time.Time{})
		if err != nil {
			return []string{"query records: " + err.Error()}
		}
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
	}
	for _, in := range live {
		ids = append(ids, in.ID) // an instance whose record says terminated
	}
	full, err := c.store.GetMany(ctx, ids)
	if err != nil {
		return []string{"read records: " + err.Error()}
	}
	records := map[string]state.Instance{}
	for id, r := range full {
		if r != nil && r.State != state.Terminated {
			records[id] = *r
		}
	}
	// 1. Every instance alive has a live record, and every live record an
	// instance: nothing lost, nothing leaked.
	for id := range alive {
		if _, ok := records[id]; !ok {
			v = append(v, fmt.Sprintf("instance %s runs without a live record (leaked): %s", id, c.describeInstance(ctx, id, live)))
		}
	}
	for id, r := range records {
		if !alive[id] {
			v = append(v, fmt.Sprintf("record %s (%s) has no running instance (lost)", id, r.State))
		}
	}
	// 2. No instance held two runIds at once: its runner registrations for
	// different labels never overlap in time.
	byInstance := map[string][]fakegithub.Registration{}
	for _, reg := range c.sb.GitHub.History() {
		if inst, ok := github.InstanceOf(reg.Name); ok {
			byInstance[inst] = append(byInstance[inst], reg)
		}
	}
	for inst, regs := range byInstance {
		for i := range regs {
			for j := i + 1; j < len(regs); j++ {
				a, b := regs[i], regs[j]
				if !slices.Equal(a.Labels, b.Labels) && overlap(a, b) {
					v = append(v, fmt.Sprintf("instance %s was registered for %v and %v at once", inst, a.Labels, b.Labels))
				}
			}
		}
	}
	// 3. No job ran on a runner of another run: the runner that took a job
	// sits on an instance provision gave that job's run.
	c.mu.Lock()
	for _, job := range c.jobs {
		if job.Runner == "" {
			continue
		}
		inst, _ := github.InstanceOf(job.Runner)
		if !slices.Contains(c.given[job.Label], inst) {
			v = append(v, fmt.Sprintf("job %d of %s ran on %s, not one of its runners %v", job.ID, job.Label, job.Runner, c.given[job.Label]))
		}
	}
	c.mu.Unlock()
	// 4. No instance pooled that was not cleanly deregistered: an idle
	// record is clean and no runner of its instance is registered.
	registered := map[string]string{}
	for _, rn := range c.sb.GitHub.Runners() {
		if inst, ok := github.InstanceOf(rn.Name); ok {
			registered[inst] = rn.Name
		}
	}
	for id, r := range records {
		if r.State != state.Idle {
			continue
		}
		if !r.Clean() {
			v = append(v, fmt.Sprintf("idle instance %s is not marked clean: %s", id, describe(r)))
		}
		if name, ok := registered[id]; ok {
			v = append(v, fmt.Sprintf("idle instance %s still has runner %s registered", id, name))
		}
	}
	sort.Strings(v)
	return v
}

func describe(r state.Instance) string {
	var sig []string
	for name, s := range r.Signals {
		sig = append(sig, fmt.Sprintf("%s@%s", name, s.Assignment))
	}
	sort.Strings(sig)
	return fmt.Sprintf("state %s run %q assignment %s signals %v runner %q registration %v uses %d", r.State, r.RunID, r.Assignment, sig, r.RunnerName, r.Registration != nil, r.Uses)
}

func (c *chaos) describeInstance(ctx context.Context, id string, live []fleet.Instance) string {
	rec, err := c.store.Get(ctx, id)
	out := fmt.Sprintf("record %v", err)
	if rec != nil {
		out = "record " + describe(*rec) + " terminatedReason " + rec.TerminatedReason
	}
	for _, in := range live {
		if in.ID == id {
			out += fmt.Sprintf("; launched %s ago, tags %v", time.Since(in.LaunchTime).Round(time.Second), in.Tags)
		}
	}
	return out
}

func overlap(a, b fakegithub.Registration) bool {
	end := func(r fakegithub.Registration) time.Time {
		if r.To.IsZero() {
			return time.Now()
		}
		return r.To
	}
	return a.From.Before(end(b)) && b.From.Before(end(a))
}

// Print writes the report as a table.
func (r ChaosReport) Print(w io.Writer) {
	fmt.Fprintf(w, "\nchaos (seed %d): %d workflows (%d with every step ok, %d failed by the faults), %d jobs, %.0fs\n",
		r.Seed, r.Workflows, r.Succeeded, r.Failed, r.Jobs, r.Elapsed.Seconds())
	names := make([]string, 0, len(r.Faults))
	total := 0
	for name, n := range r.Faults {
		names = append(names, name)
		total += n
	}
	sort.Strings(names)
	fmt.Fprintf(w, "  %-62s %5s\n", "fault injected", "times")
	for _, name := range names {
		fmt.Fprintf(w, "  %-62s %5d\n", name, r.Faults[name])
	}
	fmt.Fprintf(w, "  %-62s %5d\n", "total", total)
	if len(r.Failures) > 0 {
		reasons := make([]string, 0, len(r.Failures))
		for why := range r.Failures {
			reasons = append(reasons, why)
		}
		sort.Strings(reasons)
		fmt.Fprintln(w, "  failed workflows, by first failed step [the fault the workflow drew]:")
		for _, why := range reasons {
			fmt.Fprintf(w, "    %3d  %s\n", r.Failures[why], why)
		}
	}
	fmt.Fprintf(w, "  violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintln(w, "    "+strings.TrimSpace(v))
	}
}
