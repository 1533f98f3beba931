package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// Flooder is a third repository the invoker role trusts: throughout a
// chaos run its workflows flood provision of the JIT pool with runs of
// their own (docs/security.md, C24). The pool's fair-share limits
// (ChaosDeploy) must hold it to its share, and Repo's workflows must not
// feel it (invariant 12).
const Flooder = Org + "/flood"

// flood tallies the flooding repository's provisions and what the table
// showed of its share, guarded by its own mu.
type flood struct {
	mu                    sync.Mutex
	on                    bool
	maxProv, maxQueued    int
	repoID, ourID         string
	seq                   int
	runs                  map[string]bool // every run it tried: true once released
	attempts, ready       int
	crashed               int // killed once its share showed one more lease: a lease stays until its deadline
	genuine               int // genuine runs under way: at most one, as one waiting for capacity holds a Lambda execution
	refusedProv, refusedQ int
	other                 map[string]int // failures for other reasons (faults), by kind
	first                 time.Time      // its first refusal by a limit
	// What the sampler read of the share items and the capacity queue.
	peakLeases, peakPlaces, ourLeases, ourPlaces int
	// Repo's provisions after the flood's first refusal, and those ready.
	ordinaryAfter, ordinaryReady int
	violations                   []string
	wg                           sync.WaitGroup
}

// floodLoop floods provision until ctx ends. First, workflows whose
// provision crashes once it holds its lease (killed, as chaos kills
// Repo's): a crashed invocation's lease lasts until its deadline, so the
// flood reaches its limit without holding many processes or instances;
// every sixth attempt a genuine run (provision, then release) goes beside.
// Then, every 1.5 s, a genuine run: refused at the limit. Only one genuine
// run is under way at a time (one waiting for the pool's capacity holds
// one of the account's Lambda executions, which the sandbox keeps at 10),
// and the rate bounds the CPU it takes from the play.
func (c *chaos) floodLoop(ctx context.Context) {
	f := &c.fl
	go c.sampleShares(ctx)
	for i := 0; ctx.Err() == nil && i < 2*f.maxProv && !f.refused(); i++ {
		if i%6 == 5 && !f.busy() {
			c.floodAsync(ctx)
		}
		c.floodCrash(ctx)
	}
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(1500 * time.Millisecond):
			if !f.busy() {
				c.floodAsync(ctx)
			}
		}
	}
	f.wg.Wait()
}

func (f *flood) refused() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refusedProv+f.refusedQ > 0
}

func (f *flood) busy() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.genuine > 0
}

func (c *chaos) floodRun() string {
	f := &c.fl
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	f.attempts++
	id := fmt.Sprintf("flood-%d", f.seq)
	f.runs[id] = false
	return id
}

// floodInvoke calls handler for runID with a token of Flooder's workflow run.
func (c *chaos) floodInvoke(ctx context.Context, handler, runID string, payload map[string]any, out any) error {
	payload["runId"] = runID
	payload["idToken"] = c.sb.GitHub.IDToken(fakegithub.Workflow{Repository: Flooder, RunID: runID}, Audience)
	return c.invoke(ctx, handler, payload, out)
}

func provisionPayload() map[string]any { return map[string]any{"pool": PoolJIT, "instanceCount": 1} }

// floodCrash asks provision for a new run and kills the invocation once
// the flood's share shows one more lease (or lets its answer count).
func (c *chaos) floodCrash(ctx context.Context) {
	runID := c.floodRun()
	before, _ := c.store.ProvisionLeases(ctx, PoolJIT, c.fl.repoID)
	pctx, kill := context.WithCancel(ctx)
	defer kill()
	done := make(chan error, 1)
	var prov provision.Output
	go func() { done <- c.floodInvoke(pctx, "provision", runID, provisionPayload(), &prov) }()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case err := <-done:
			c.floodOutcome(runID, err, prov.Status)
			c.floodRelease(ctx, runID)
			return
		case <-deadline:
			kill()
		case <-time.After(50 * time.Millisecond):
			if n, err := c.store.ProvisionLeases(ctx, PoolJIT, c.fl.repoID); err == nil && n > before {
				kill()
				<-done
				c.fl.mu.Lock()
				c.fl.crashed++
				c.fl.mu.Unlock()
				c.floodRelease(ctx, runID)
				return
			}
		}
	}
}

// floodAsync plays a genuine run of Flooder beside: provision, release.
func (c *chaos) floodAsync(ctx context.Context) {
	c.fl.wg.Add(1)
	c.fl.mu.Lock()
	c.fl.genuine++
	c.fl.mu.Unlock()
	go func() {
		defer func() {
			c.fl.mu.Lock()
			c.fl.genuine--
			c.fl.mu.Unlock()
			c.fl.wg.Done()
		}()
		runID := c.floodRun()
		var prov provision.Output
		err := c.floodInvoke(ctx, "provision", runID, provisionPayload(), &prov)
		c.floodOutcome(runID, err, prov.Status)
		c.floodRelease(ctx, runID)
	}()
}

// floodRelease releases a flood run in the background (and cleanFlood
// again any not released by the end).
func (c *chaos) floodRelease(ctx context.Context, runID string) {
	c.fl.wg.Add(1)
	go func() {
		defer c.fl.wg.Done()
		var out json.RawMessage
		if c.floodInvoke(ctx, "release", runID, map[string]any{}, &out) == nil {
			c.fl.mu.Lock()
			c.fl.runs[runID] = true
			c.fl.mu.Unlock()
		}
	}()
}

// floodOutcome counts a provision's answer; a refusal by a limit must name
// the pool's setting and its value.
func (c *chaos) floodOutcome(runID string, err error, status string) {
	f := &c.fl
	f.mu.Lock()
	defer f.mu.Unlock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	limit := func(n *int, clause, setting string, max int) {
		*n++
		if f.first.IsZero() {
			f.first = time.Now()
		}
		if want := fmt.Sprintf("%s (%d)", setting, max); !strings.Contains(msg, want) {
			f.violations = append(f.violations, fmt.Sprintf("[12] provision of %s's run %s was refused by %s without naming %q: %.300s", Flooder, runID, clause, want, msg))
		}
	}
	switch {
	case err == nil && status == "ready":
		f.ready++
	case strings.Contains(msg, "maxProvisionsPerRepository"):
		limit(&f.refusedProv, "maxProvisionsPerRepository", "max_provisions_per_repository", f.maxProv)
	case strings.Contains(msg, "maxQueuedPerRepository"):
		limit(&f.refusedQ, "maxQueuedPerRepository", "max_queued_per_repository", f.maxQueued)
	case errors.Is(err, context.Canceled):
		f.other["stopped with the play"]++
	default:
		if err == nil {
			msg = "answered " + status
		}
		if len(msg) > 90 {
			msg = msg[:90]
		}
		f.other[variablePart.ReplaceAllString(msg, "N")]++
	}
}

// floodOrdinary judges one of Repo's provisions: never refused by a
// per-repository limit (the flood's or its own), and still admitted once
// the flood is refused.
func (c *chaos) floodOrdinary(runID string, err error, ready bool) {
	f := &c.fl
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil && strings.Contains(err.Error(), "PerRepository") {
		f.violations = append(f.violations, fmt.Sprintf("[12] provision of %s's run %s was refused by a per-repository limit: %.300s", Repo, runID, err))
	}
	if f.on && !f.first.IsZero() {
		f.ordinaryAfter++
		if ready {
			f.ordinaryReady++
		}
	}
}

// sampleShares reads the share items and the capacity queue of the JIT
// pool every 300 ms: the flood never holds more than its limits.
func (c *chaos) sampleShares(ctx context.Context) {
	f := &c.fl
	for ctx.Err() == nil {
		leases, err1 := c.store.ProvisionLeases(ctx, PoolJIT, f.repoID)
		places, err2 := c.store.QueuePlaces(ctx, PoolJIT, f.repoID)
		ours, _ := c.store.ProvisionLeases(ctx, PoolJIT, f.ourID)
		ourPlaces, _ := c.store.QueuePlaces(ctx, PoolJIT, f.ourID)
		f.mu.Lock()
		if err1 == nil && err2 == nil {
			if leases > f.maxProv && leases > f.peakLeases {
				f.violations = append(f.violations, fmt.Sprintf("[12] %s held %d provision leases of pool %s at %s, above its max_provisions_per_repository %d", Flooder, leases, PoolJIT, c.at(time.Now()), f.maxProv))
			}
			if f.maxQueued > 0 && places > f.maxQueued && places > f.peakPlaces {
				f.violations = append(f.violations, fmt.Sprintf("[12] %s held %d places in pool %s's capacity queue at %s, above its max_queued_per_repository %d", Flooder, places, PoolJIT, c.at(time.Now()), f.maxQueued))
			}
			f.peakLeases, f.peakPlaces = max(f.peakLeases, leases), max(f.peakPlaces, places)
		}
		f.ourLeases, f.ourPlaces = max(f.ourLeases, ours), max(f.ourPlaces, ourPlaces)
		f.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// cleanFlood releases, once the faults are off, every flood run whose
// release did not answer, so that the settled check finds nothing of it.
func (c *chaos) cleanFlood(ctx context.Context) {
	f := &c.fl
	f.mu.Lock()
	var left []string
	for id, released := range f.runs {
		if !released {
			left = append(left, id)
		}
	}
	f.mu.Unlock()
	sem := make(chan struct{}, 3)
	var wg sync.WaitGroup
	for _, id := range left {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var out json.RawMessage
			_ = c.floodInvoke(ctx, "release", id, map[string]any{}, &out)
		}()
	}
	wg.Wait()
}

// checkFlood returns the violations of invariant 12 and puts the flood's
// counts in the report's activity.
func (c *chaos) checkFlood() (v []string, counts map[string]int) {
	f := &c.fl
	f.mu.Lock()
	defer f.mu.Unlock()
	v = append(v, f.violations...)
	if !f.on {
		return v, nil
	}
	if f.refusedProv == 0 {
		v = append(v, fmt.Sprintf("[12] %s was never refused by max_provisions_per_repository (%d) in %d provisions: the limit was not exercised", Flooder, f.maxProv, f.attempts))
	}
	if f.ordinaryAfter >= 3 && f.ordinaryReady == 0 {
		v = append(v, fmt.Sprintf("[12] none of %s's %d provisions after the flood's first refusal answered ready", Repo, f.ordinaryAfter))
	}
	counts = map[string]int{"attempts": f.attempts, "ready": f.ready, "crashed": f.crashed, "refused max_provisions_per_repository": f.refusedProv,
		"refused max_queued_per_repository": f.refusedQ, "peak leases": f.peakLeases, "peak places": f.peakPlaces, "ordinary peak leases": f.ourLeases,
		"ordinary peak places": f.ourPlaces, "ordinary after refusal": f.ordinaryAfter, "ordinary ready after refusal": f.ordinaryReady,
		"max_provisions_per_repository": f.maxProv, "max_queued_per_repository": f.maxQueued}
	for why, n := range f.other {
		counts["failed: "+why] = n
	}
	return v, counts
}

func (c *chaos) initFlood(maxProv, maxQueued int, off bool) {
	c.fl = flood{on: maxProv > 0 && !off, maxProv: maxProv, maxQueued: maxQueued, runs: map[string]bool{}, other: map[string]int{},
		repoID: strconv.FormatInt(c.sb.GitHub.RepositoryID(Flooder), 10), ourID: strconv.FormatInt(c.sb.GitHub.RepositoryID(Repo), 10)}
}
