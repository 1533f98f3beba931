package sandbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// The DynamoDB faults of a chaos run, the clock skew, and the control
// plane's functions firing every few seconds.
const (
	faultDDBThrottleShare = "DynamoDB throttled: 30% of requests for 1-4 s (background)"
	faultDDBThrottleAll   = "DynamoDB throttled: every request for 2-5 s (background)"
	faultDDB500Share      = "DynamoDB 500: 20% of requests for 1-3 s (background)"
	faultDDBHotItem       = "DynamoDB hot item: a live instance's record throttled 30-40 s"
	faultDDBThrottled     = "DynamoDB requests: throttled (400)"
	faultDDBHotRequest    = "DynamoDB requests: touching a hot item (throttled or unprocessed)"
	faultDDB500           = "DynamoDB requests: 500 before moto saw them"
	faultDDB500After      = "DynamoDB requests: write done, then answered 500"
)

// dynamoDB is the DynamoDB trouble under way, guarded by chaos.mu.
type dynamoDB struct {
	throttle float64 // share of requests throttled
	code     string  // with this error
	fail     float64 // share of requests answered 500
	// hot are instance records whose partition is throttled, until when.
	// A hot item outlasts the SDK's retries (5 attempts, at most about 30 s
	// of backoff): its callers see the error, as they would on AWS when one
	// partition exceeds its throughput for a while.
	hot map[string]time.Time // by instance id
}

// dynamoAnswer decides one DynamoDB request from the bursts under way and
// the run's rng.
func (c *chaos) dynamoAnswer(req DynamoRequest) DynamoAnswer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var a DynamoAnswer
	now := time.Now()
	for _, k := range req.Keys {
		// c.hot holds instance ids; instance records are keyed
		// <role id>:<instance id>.
		id := k
		if _, after, ok := strings.Cut(k, ":"); ok {
			id = after
		}
		if until, ok := c.hot[id]; ok && now.Before(until) {
			a.HotKeys = append(a.HotKeys, k)
		}
	}
	switch {
	case len(a.HotKeys) > 0:
		c.faults[faultDDBHotRequest]++
	case c.throttle > 0 && c.rng.Float64() < c.throttle:
		a.Throttle = c.code
		c.faults[faultDDBThrottled]++
	case c.fail > 0 && c.rng.Float64() < c.fail:
		// Half of the failed writes fail after moto applied them: the
		// caller's retry then meets its own write.
		if req.Write && c.rng.Intn(2) == 0 {
			a.FailAfter = true
			c.faults[faultDDB500After]++
		} else {
			a.Fail = true
			c.faults[faultDDB500]++
		}
	}
	return a
}

// indexLag: every index query of the run is answered from a view 0-3 s
// old (indexlag.go), as a global secondary index may be under load.
func (c *chaos) indexLag() time.Duration {
	return time.Duration(c.intn(3001)) * time.Millisecond
}

// dynamoFaults turns DynamoDB trouble on and off every 3-7 s, like
// githubFaults: a share of requests throttled (the SDK's retries absorb
// most), every request throttled for a while (some calls run out of
// attempts or of retry quota), or a share answered 500.
func (c *chaos) dynamoFaults(ctx context.Context) {
	c.bursts(ctx, 3000, 4000, func() (last time.Duration) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.code = DynamoThroughputExceeded
		if c.rng.Intn(3) == 0 {
			c.code = DynamoThrottling
		}
		switch c.rng.Intn(3) {
		case 0:
			c.throttle, last = 0.3, time.Duration(1000+c.rng.Intn(3000))*time.Millisecond
			c.faults[faultDDBThrottleShare]++
		case 1:
			c.throttle, last = 1, time.Duration(2000+c.rng.Intn(3000))*time.Millisecond
			c.faults[faultDDBThrottleAll]++
		default:
			c.fail, last = 0.2, time.Duration(1000+c.rng.Intn(2000))*time.Millisecond
			c.faults[faultDDB500Share]++
		}
		return last
	}, func() {
		c.mu.Lock()
		c.throttle, c.fail = 0, 0
		c.mu.Unlock()
	})
}

// bursts runs trouble in bursts until ctx ends: after a gap of base to
// base+spread ms it calls start, which sets the trouble up and says how
// long it lasts, then stop.
func (c *chaos) bursts(ctx context.Context, base, spread int, start func() time.Duration, stop func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(base+c.intn(spread)) * time.Millisecond):
		}
		last := start()
		select {
		case <-ctx.Done():
		case <-time.After(last):
		}
		stop()
	}
}

// hotItems makes a random live instance's record hot every 40-60 s, for
// 30-40 s: its agent's heartbeats and reads, and every function touching
// it, are throttled longer than the SDK retries. (More often, and a hot
// record is nearly always in some refresh's batch read, which waits out
// unprocessed keys: the control plane would stall rather than race.)
func (c *chaos) hotItems(ctx context.Context) {
	for first := true; ; first = false {
		wait := time.Duration(40000+c.intn(20000)) * time.Millisecond
		if first {
			wait /= 2
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		live, err := c.fleet.List(ctx, fleet.Filter{})
		if err != nil || len(live) == 0 {
			continue
		}
		id := live[c.intn(len(live))].ID
		c.mu.Lock()
		c.hot[id] = time.Now().Add(time.Duration(30000+c.rng.Intn(10000)) * time.Millisecond)
		c.faults[faultDDBHotItem]++
		c.mu.Unlock()
	}
}

// clockOffset puts a third of the new instances' clocks off by up to five
// minutes either way: NTP-less or drifting hosts, far beyond the heartbeat
// staleness of examples/sandbox (10 s). Whatever the agent writes from its
// clock (heartbeats) is then that far off.
func (c *chaos) clockOffset(id string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rng.Intn(3) != 0 {
		return 0
	}
	off := time.Duration(c.rng.Intn(600001)-300000) * time.Millisecond
	c.faults[faultClockSkew]++
	c.clocks[id] = off
	return off
}

// decision is one instance in a refresh or scale-down answer.
type decision struct {
	InstanceID string `json:"instanceId"`
	Reason     string `json:"reason"`
}

// controlLoop invokes refresh or scale-down every few seconds (their
// schedules, much faster), one run at a time as reserved concurrency 1
// makes it on AWS, while workflows claim and release; it keeps what they
// terminated and why, for the checks of invariants 5 and 6.
func (c *chaos) controlLoop(ctx context.Context, handler string, lo, hi time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(lo + time.Duration(c.intn(int((hi-lo)/time.Millisecond)+1))*time.Millisecond):
		}
		var out struct {
			Terminated, Expired, Kept, Prewarmed, Joined, Stopped []decision
			Errors                                                []string
		}
		err := c.invoke(ctx, handler, map[string]any{}, &out)
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		c.mu.Lock()
		c.activity[handler+" runs"]++
		if err != nil {
			c.activity[handler+" runs failed"]++
		} else if len(out.Errors) > 0 {
			c.activity[handler+" runs with errors"]++
		}
		c.activity[handler+" terminated"] += len(out.Terminated)
		if handler == bundle.HandlerScaleDown {
			c.activity[handler+" kept"] += len(out.Kept)
			c.activity[handler+" stopped"] += len(out.Stopped)
		} else {
			c.activity[handler+" expired"] += len(out.Expired)
			c.activity[handler+" pre-warmed"] += len(out.Prewarmed)
			c.activity[handler+" joined"] += len(out.Joined)
		}
		for _, d := range out.Prewarmed {
			c.acts[d.InstanceID] = append(c.acts[d.InstanceID], fmt.Sprintf("%s pre-warmed it at %s: %s", handler, c.at(now), d.Reason))
		}
		for _, d := range out.Terminated {
			c.acts[d.InstanceID] = append(c.acts[d.InstanceID], fmt.Sprintf("%s terminated it at %s: %s", handler, c.at(now), d.Reason))
		}
		for _, d := range out.Stopped {
			c.acts[d.InstanceID] = append(c.acts[d.InstanceID], fmt.Sprintf("%s stopped it at %s: %s", handler, c.at(now), d.Reason))
		}
		for _, d := range out.Expired {
			c.acts[d.InstanceID] = append(c.acts[d.InstanceID], fmt.Sprintf("%s expired it at %s: %s", handler, c.at(now), d.Reason))
		}
		c.mu.Unlock()
	}
}

// at is a moment as seconds since the run started.
func (c *chaos) at(t time.Time) string { return fmt.Sprintf("+%.1fs", t.Sub(c.start).Seconds()) }

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

// killAgents kills a random live agent every second or two: during boot,
// registration, a job, deregistration or idle, whichever it meets.
func (c *chaos) killAgents(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(800+c.intn(1500)) * time.Millisecond):
		}
		live, err := c.fleet.List(ctx, fleet.Filter{})
		if err != nil || len(live) == 0 {
			continue
		}
		if id := live[c.intn(len(live))].ID; c.sb.KillAgent(id) {
			c.killed(id, faultKillAgent)
		}
	}
}

// githubFaults turns GitHub trouble on and off: 5xx, secondary rate limits
// and slowness, each for a few seconds on a share of the requests.
func (c *chaos) githubFaults(ctx context.Context) {
	c.bursts(ctx, 2000, 3000, func() time.Duration {
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
		return time.Duration(1000+c.intn(2000)) * time.Millisecond
	}, c.sb.GitHub.ClearFaults)
}
