package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// ChaosOptions configure a chaos run.
type ChaosOptions struct {
	Workflows   int   // how many workflows to play
	Concurrency int   // how many at once; default 4 (long-job workflows run beside them)
	Seed        int64 // the same seed makes the same choices of faults
	Out         io.Writer
	// Off names groups of faults not to inject (see FaultGroups), to tell
	// which of them a violation needs.
	Off []string
}

// FaultGroups are the groups of faults ChaosOptions.Off can leave out.
var FaultGroups = map[string]string{
	"kills":         "the workflow's own fault: provision, release or its agent killed (still drawn, so the plan stays)",
	"agent-kills":   "agents killed in the background",
	"github":        "GitHub 5xx, rate limits, slowness",
	"messages":      "pool messages duplicated and delayed",
	"clock-skew":    "instance clocks off by up to ±5 min",
	"dynamodb":      "DynamoDB throttling and 500 bursts",
	"hot-items":     "a live instance's record throttled 30-40 s",
	"index-lag":     "index queries answered from a view 0-3 s old",
	"logs":          "CloudWatch Logs throttling, 500s and hangs of the agents' log shipping",
	"long-jobs":     "jobs past the pool's max_runtime",
	"control-plane": "refresh and scale-down every few seconds",
	"release":       "an actions/runner release published halfway (chaosrelease.go)",
	"flood":         "another repository flooding provision into the pools' fair-share limits (chaosflood.go)",
	"scaleset":      "scale-set workflows, with the listener's task killed, its queue token expired, messages delivered twice (chaosscaleset.go)",
	"spot":          "a spot instance interrupted mid-job: the metadata notice, then EC2 terminates it (chaosspot.go)",
	"stops":         "EC2 refusing one start of a stopped instance in three (InsufficientInstanceCapacity); the linux pool's stopped tier is ChaosDeploy's (chaosstopped.go)",
}

// ChaosReport is what a chaos run did and found.
type ChaosReport struct {
	Seed      int64
	Workflows int
	Succeeded int // every step of the workflow worked
	Failed    int // a step failed, as faults make them; not a violation
	Jobs      int
	Faults    map[string]int
	Failures  map[string]int // why workflows failed: the first failed step, by kind
	// Activity counts what the control plane did meanwhile (refresh and
	// scale-down runs, their terminations and keeps) and the peak of live
	// instances.
	Activity map[string]int
	// Explained are failed jobs, terminations and runner deletions that an
	// injected kill of the instance's own agent explains: not violations.
	Explained []string
	// Flood counts what the flooding repository asked and got
	// (chaosflood.go); nil when it did not run.
	Flood      map[string]int
	Violations []string
	Elapsed    time.Duration
}

// The faults a workflow may meet; each workflow draws one, and the
// background faults (agent kills, GitHub and DynamoDB errors, duplicated
// pool messages, index lag) hit whatever runs at the time.
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
	faultClockSkew       = "instance clock off by up to ±5 min"
	faultLongJob         = "job outlives the pool's max_runtime (by 15 s)"
	faultIntruder        = "another repository's workflow asks provision and release for the run (intruder.go)"
)

var workflowFaults = []string{faultNone, faultKillAfterFleet, faultKillProvision, faultKillRelease, faultKillAgentInJob, faultHostileJob}

// longJobEvery: workflows 1, 21, 41, ... run a job longer than the pool's
// max_runtime. They are placed, not drawn, so that even a short run has
// one, and early, so that they end with the others.
const longJobEvery = 20

// chaos holds one run's state.
type chaos struct {
	sb     *Sandbox
	d      Deployment
	lambda *lambda.Client
	store  *state.Store
	fleet  *fleet.Fleet
	out    io.Writer
	start  time.Time

	// From the pool's configuration: the long job's length and invariant 7.
	maxInstances int
	maxRuntime   time.Duration

	mu     sync.Mutex
	rng    *rand.Rand
	faults map[string]int
	// given: what provision handed each run, the check for "no job on a
	// runner of another run".
	given    map[string][]string
	failures map[string]int
	// armed are the provisions to kill once a CreateFleet answer went back
	// (one per CreateFleet), by runId.
	armed map[string]context.CancelFunc

	hostile hostileKit  // what hostile jobs use, where their daemons report (hostile.go)
	gate    releaseGate // the release published mid-run (chaosrelease.go)
	intr    intruders   // another repository's attempts on runs (intruder.go)
	fl      flood       // a third repository flooding provision (chaosflood.go)

	history  // what invariants 5-7 look back on (observe.go)
	dynamoDB // the DynamoDB fault bursts under way (chaosfaults.go)
	cwLogs   // the CloudWatch Logs burst under way (chaoslogs.go)
}

// Chaos plays many workflows with random faults against a deployed sandbox,
// then lets refresh settle and checks the invariants.
func (s *Sandbox) Chaos(ctx context.Context, d Deployment, o ChaosOptions) (ChaosReport, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	off := map[string]bool{}
	for _, g := range o.Off {
		if _, ok := FaultGroups[g]; !ok {
			return ChaosReport{}, fmt.Errorf("no fault group %q: one of %v", g, sortedKeysOf(FaultGroups))
		}
		off[g] = true
	}
	cfg, err := awsconf.Load(ctx, awsconf.Options{Region: Region, Endpoint: s.URL, AccessKeyID: "chaos", SecretAccessKey: "chaos", MaxAttempts: 1})
	if err != nil {
		return ChaosReport{}, err
	}
	c := &chaos{sb: s, d: d, lambda: admin.Lambda(cfg), store: state.New(s.AWS.DynamoDB(), d.Table), fleet: fleet.New(s.AWS.EC2(), Environment),
		out: o.Out, rng: rand.New(rand.NewSource(o.Seed)), faults: map[string]int{}, given: map[string][]string{}, failures: map[string]int{},
		armed: map[string]context.CancelFunc{}, history: newHistory(), dynamoDB: dynamoDB{hot: map[string]time.Time{}}}
	c.gate.init()
	pool, err := c.store.GetPoolConfig(ctx, PoolJIT)
	if err != nil || pool == nil {
		return ChaosReport{}, fmt.Errorf("pool linux: %v", err)
	}
	var doneHostile func()
	if c.hostile, doneHostile, err = newHostileKit(s.opts.Dir); err != nil {
		return ChaosReport{}, err
	}
	defer doneHostile()
	c.initFlood(pool.MaxProvisionsPerRepository, pool.MaxQueuedPerRepository, off["flood"])
	c.maxInstances, c.maxRuntime = pool.MaxInstances, state.D(pool.Timings.WithDefaults().MaxRuntime)
	if !off["scaleset"] {
		// The listener creates the scale set when its task starts: jobs
		// queued before would be no scale set's.
		if err := c.waitScaleSet(ctx); err != nil {
			return ChaosReport{}, err
		}
	}
	if !off["spot"] {
		if p, err := c.store.GetPoolConfig(ctx, PoolSpot); err != nil || p == nil {
			return ChaosReport{}, fmt.Errorf("fault group spot: the deployment has no pool %s (deploy with ChaosDeploy), or leave the group out: %v", PoolSpot, err)
		}
	}
	if !off["stops"] {
		if err := c.requireStoppedTier(ctx); err != nil {
			return ChaosReport{}, err
		}
	}
	c.start = time.Now()
	rep := ChaosReport{Seed: o.Seed, Workflows: o.Workflows}

	f := Faults{AfterCreateFleet: c.afterCreateFleet, DuplicateMessage: c.duplicate, ClockOffset: c.clockOffset,
		DynamoDB: c.dynamoAnswer, IndexLag: c.indexLag, Logs: c.logsAnswer, Note: c.count}
	if off["logs"] {
		f.Logs = nil
	}
	if !off["stops"] {
		f.StartRefused = c.startRefused
	}
	if off["messages"] {
		f.DuplicateMessage = nil
	}
	if off["clock-skew"] {
		f.ClockOffset = nil
	}
	if off["index-lag"] {
		f.IndexLag = nil
	}
	if off["dynamodb"] && off["hot-items"] {
		f.DynamoDB = nil
	}
	s.SetFaults(f)
	bg, stopBackground := context.WithCancel(ctx)
	var bgDone sync.WaitGroup
	for _, l := range []struct {
		group string
		loop  func(context.Context)
	}{
		{"", c.sampleFleet}, {"agent-kills", c.killAgents}, {"github", c.githubFaults}, {"dynamodb", c.dynamoFaults}, {"hot-items", c.hotItems}, {"logs", c.logsFaults},
		{"control-plane", func(ctx context.Context) { c.controlLoop(ctx, "refresh", 2*time.Second, 5*time.Second) }},
		{"control-plane", func(ctx context.Context) { c.controlLoop(ctx, bundle.HandlerScaleDown, 3*time.Second, 7*time.Second) }},
		{"flood", c.floodLoop},
	} {
		if !off[l.group] && (l.group != "flood" || c.fl.on) {
			bgDone.Add(1)
			go func() { defer bgDone.Done(); l.loop(bg) }()
		}
	}

	// Each workflow's fault is drawn up front, so a seed gives the same plan
	// whatever the timing.
	// One workflow in four runs on the token pool: the fallback for GitHub
	// Enterprise Server meets the same faults as the default.
	plan, pools, ssPlan := make([]string, o.Workflows), make([]string, o.Workflows), make([]string, o.Workflows)
	for i := range plan {
		plan[i], pools[i] = workflowFaults[c.intn(len(workflowFaults))], PoolJIT
		if c.intn(4) == 0 {
			pools[i] = PoolToken
			c.activity["token-pool workflows"]++
		}
		if off["kills"] {
			plan[i] = faultNone
		}
		if i%longJobEvery == 1 && !off["long-jobs"] {
			plan[i] = faultLongJob
		}
		// One workflow in four of the others is a scale-set workflow
		// (chaosscaleset.go), with a fault of the mode; drawn only when
		// the group plays, so that -off scaleset keeps the plan of before.
		if !off["scaleset"] && plan[i] != faultLongJob && c.intn(4) == 0 {
			ssPlan[i] = scaleSetFaults[c.intn(len(scaleSetFaults))]
			if pools[i] == PoolToken {
				c.activity["token-pool workflows"]--
			}
			c.activity["scale-set workflows"]++
		}
		// Placed after every draw, so that -off spot keeps the plan.
		if !off["spot"] && i%spotEvery == spotAt {
			if ssPlan[i] != "" {
				ssPlan[i] = ""
				c.activity["scale-set workflows"]--
			} else if pools[i] == PoolToken {
				c.activity["token-pool workflows"]--
			}
			plan[i], pools[i] = faultSpotInJob, PoolSpot
			c.activity["spot workflows"]++
		}
	}
	sem := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	var okCount, failCount int
	var countMu sync.Mutex
	var published sync.WaitGroup
	for i := 0; i < o.Workflows && ctx.Err() == nil; i++ {
		if i == o.Workflows/2 && i > 0 && !off["release"] {
			// GitHub publishes a runner release halfway (invariant 11).
			published.Add(1)
			go func() { defer published.Done(); c.publishRelease(ctx) }()
		}
		// A long job holds its workflow for over max_runtime: it runs beside
		// the others instead of taking one of their places.
		long := plan[i] == faultLongJob
		if !long {
			sem <- struct{}{}
		}
		wg.Add(1)
		go func(i int) {
			defer func() {
				if !long {
					<-sem
				}
				wg.Done()
			}()
			var ok bool
			if ssPlan[i] != "" {
				ok = c.scaleSetWorkflow(ctx, fmt.Sprintf("chaos-%d-%d", o.Seed, i), 2+c.intn(2), ssPlan[i])
			} else {
				ok = c.workflow(ctx, fmt.Sprintf("chaos-%d-%d", o.Seed, i), pools[i], 1+c.intn(2), plan[i])
			}
			countMu.Lock()
			if ok {
				okCount++
			} else {
				failCount++
			}
			done := okCount + failCount
			countMu.Unlock()
			if done%10 == 0 || done == o.Workflows {
				fmt.Fprintf(c.out, "  %d/%d workflows played (%d with every step ok) in %.0fs\n", done, o.Workflows, okCount, time.Since(c.start).Seconds())
			}
		}(i)
	}
	wg.Wait()
	published.Wait()
	stopBackground()
	bgDone.Wait()
	s.SetFaults(Faults{})
	s.GitHub.ClearFaults()

	c.cleanFlood(ctx)
	fmt.Fprintln(c.out, "  faults off; settling: refresh until the records and EC2 agree ...")
	rep.Violations = append(append(c.settleAndCheck(ctx), c.checkOnce()...), c.checkHostile()...)
	rep.Violations = append(rep.Violations, c.checkIntruders()...)
	rep.Violations = append(rep.Violations, c.checkLogs(ctx)...)
	explained, past := c.checkHistory(ctx)
	rep.Violations = append(rep.Violations, past...)
	rep.Violations = append(rep.Violations, c.checkUpdates()...)
	rep.Violations = append(rep.Violations, c.checkScaleSet(ctx)...)
	rep.Violations = append(rep.Violations, c.checkSpot(ctx)...)
	flooded, counts := c.checkFlood()
	rep.Violations, rep.Flood = append(rep.Violations, flooded...), counts
	rep.Succeeded, rep.Failed = okCount, failCount
	c.mu.Lock()
	rep.Faults, rep.Jobs, rep.Failures, rep.Activity, rep.Explained = c.faults, len(c.jobUses)+len(c.ssJobs), c.failures, c.activity, explained
	c.activity["scale-set jobs"] = len(c.ssJobs)
	if c.d.ListenerService != "" {
		c.activity["listener task starts"] = c.sb.ECSTaskStarts()[c.d.ListenerService]
	}
	// A fault that was set up but never met a request tests nothing: the
	// test world lost its aim (as when record keys changed shape under it).
	if c.faults[faultDDBHotItem] > 0 && c.faults[faultDDBHotRequest] == 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("fault injection: %d hot items set, no request touched one: the fault misses the records it means", c.faults[faultDDBHotItem]))
	}
	c.mu.Unlock()
	rep.Elapsed = time.Since(c.start)
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

// settleAndCheck runs refresh every few seconds until EC2 and the records
// agree, within the created TTL of examples/sandbox (refresh terminates an
// instance without a record only once it is that old) plus a margin, and
// returns the violations of invariants 1, 4 and 16 left.
func (c *chaos) settleAndCheck(ctx context.Context) []string {
	const createdTTL = 60 * time.Second
	deadline := time.Now().Add(createdTTL + 30*time.Second)
	var v []string
	for round := 1; ; round++ {
		var out json.RawMessage
		if err := c.invokeStep(ctx, "refresh", map[string]any{}, &out); err != nil {
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
