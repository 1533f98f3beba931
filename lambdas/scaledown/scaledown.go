package scaledown

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// EC2 is what scale-down asks of EC2 (a *fleet.Fleet).
type EC2 interface {
	List(ctx context.Context, f fleet.Filter) ([]fleet.Instance, error)
	Terminate(ctx context.Context, ids []string) (fleet.TerminateResult, error)
	SetTags(ctx context.Context, ids []string, tags map[string]string) error
	UntagOrphan(ctx context.Context, id string) error
	// Stop stops one instance, keeping its volumes (the stopped tier).
	Stop(ctx context.Context, id string) error
}

// Deps are what scale-down runs with: the control plane's (GitHub
// included) and EC2.
type Deps struct {
	*controlplane.Deps
	EC2 EC2 // a *fleet.Fleet in the bundle
}

// Output is the run's summary: every instance with what happened and why.
type Output struct {
	Kept       []Decision `json:"kept"`
	Terminated []Decision `json:"terminated"`
	Orphaned   []Decision `json:"orphaned"`
	Untagged   []Decision `json:"untagged"`
	// Stopped went to the pool's stopped tier (or finished a stop).
	Stopped []Decision `json:"stopped"`
	// Deferred were decided but not acted on: the run's deadline came
	// first. The next run decides them again.
	Deferred []Decision `json:"deferred"`
	// Swept are ghost runners deleted (see GhostCandidates).
	Swept  []Ghost  `json:"swept"`
	Errors []string `json:"errors,omitempty"`
	// GatherSeconds is the part of ElapsedSeconds spent reading (pools,
	// EC2, records, runners) before the first action.
	GatherSeconds  float64 `json:"gatherSeconds"`
	ElapsedSeconds float64 `json:"elapsedSeconds"`
	// Skipped says why nothing was done (another invocation was running).
	Skipped string `json:"skipped,omitempty"`
}

// Handle runs one scale-down. The payload may be empty or {}.
//
// It stops starting work a margin before ctx's deadline (the function's
// timeout) and may be cut off anywhere: records are marked before their
// instances are terminated, and instances are terminated in batches as the
// run goes, so what a cut leaves is a record marked whose instance the next
// run (or refresh) terminates.
func Handle(ctx context.Context, deps Deps, payload json.RawMessage) (*Output, error) {
	start := time.Now()
	d, ec2, gh := deps.Deps, deps.EC2, deps.GitHub
	if err := controlplane.DecodeNone(payload); err != nil {
		return nil, err
	}
	release, ok, err := d.SingleFlight(ctx, bundle.HandlerScaleDown)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Another invocation is running: it does this one's work.
		return &Output{Skipped: "another invocation holds the single-flight lease"}, nil
	}
	defer release()
	e := &executor{d: d, ec2: ec2, gh: gh}
	actx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		margin := stopMargin(time.Until(deadline))
		e.stop = deadline.Add(-margin)
		// Calls in flight at the stop end before the last batch must go.
		var cancel context.CancelFunc
		actx, cancel = context.WithDeadline(ctx, deadline.Add(-margin/2))
		defer cancel()
	}
	in, err := gather(actx, d, ec2, gh)
	if err != nil {
		return nil, err
	}
	e.in = in
	gathered := time.Since(start).Seconds()
	e.term = startTerminator(ctx, ec2)
	out := e.act(actx, Decide(in))
	out.GatherSeconds = gathered
	out.Swept = append(out.Swept, e.sweep(actx, GhostCandidates(in))...)
	if err := e.term.close(); err != nil {
		e.fail(fmt.Sprintf("terminate: %v (the records are marked; the next scale-down terminates them)", err))
	}
	out.Errors = e.errors
	out.ElapsedSeconds = time.Since(start).Seconds()
	d.Log.Info("scale-down finished", "kept", len(out.Kept), "terminated", len(out.Terminated), "orphaned", len(out.Orphaned),
		"untagged", len(out.Untagged), "stopped", len(out.Stopped), "deferred", len(out.Deferred), "swept", len(out.Swept), "errors", len(out.Errors))
	return out, nil
}

// act carries out the decisions, renewals first: a run cut short must not
// let the leases of the instances it keeps lapse while it retires others.
func (e *executor) act(ctx context.Context, decisions []Decision) *Output {
	out := &Output{Kept: []Decision{}, Terminated: []Decision{}, Orphaned: []Decision{}, Untagged: []Decision{}, Stopped: []Decision{}, Deferred: []Decision{}, Swept: []Ghost{}}
	var work []int
	for _, phase := range []Action{Renew, Untag, Orphan, Stop, Terminate} {
		for i, dec := range decisions {
			if dec.Action == phase {
				work = append(work, i)
			}
		}
	}
	type result struct {
		dec  Decision
		into *[]Decision
	}
	results := make([]result, len(decisions))
	for i, dec := range decisions {
		results[i] = result{dec, &out.Kept} // Keep, and what is not started
	}
	started := e.each(ctx, len(work), func(w int) {
		i := work[w]
		dec := decisions[i]
		switch dec.Action {
		case Renew:
			results[i] = result{e.renew(ctx, dec), &out.Kept}
		case Untag:
			if err := e.ec2.UntagOrphan(ctx, dec.InstanceID); err != nil {
				e.fail(err.Error())
				results[i] = result{dec, nil}
				return
			}
			results[i] = result{dec, &out.Untagged}
		case Orphan:
			tags := map[string]string{fleet.TagOrphan: dec.Assignment}
			if rec := e.in.Records[dec.InstanceID]; rec != nil && rec.GithubRunnerID != 0 {
				tags[fleet.TagGithubRunnerID] = strconv.FormatInt(rec.GithubRunnerID, 10)
			}
			if err := e.ec2.SetTags(ctx, []string{dec.InstanceID}, tags); err != nil {
				e.fail(err.Error())
				results[i] = result{dec, nil}
				return
			}
			results[i] = result{dec, &out.Orphaned}
		case Stop:
			dec := e.stopInstance(ctx, dec)
			results[i] = result{dec, map[Action]*[]Decision{Stop: &out.Stopped, Terminate: &out.Terminated, Keep: &out.Kept}[dec.Action]}
		case Terminate:
			dec, gone := e.retire(ctx, dec)
			results[i] = result{dec, &out.Kept}
			if gone {
				results[i].into = &out.Terminated
			}
		}
	})
	for w, ok := range started {
		if !ok {
			dec := decisions[work[w]]
			dec.Reason += "; deferred: the run's deadline came first"
			results[work[w]] = result{dec, &out.Deferred}
		}
	}
	for _, r := range results {
		if r.into != nil {
			*r.into = append(*r.into, r.dec)
		}
	}
	return out
}

// gather reads the pools, the live instances, their records and one runner
// listing per owner: of the instances, of the records and of the pools (a
// ghost may outlive every instance of its owner).
func gather(ctx context.Context, d *controlplane.Deps, ec2 EC2, gh controlplane.GitHub) (Input, error) {
	in := Input{Now: d.Now(), Pools: map[string]state.PoolConfig{}, Runners: map[string][]github.Runner{}}
	pools, err := storeOf(d).ListPoolConfigs(ctx)
	if err != nil {
		return in, err
	}
	owners := map[string]bool{}
	for _, p := range pools {
		p.Timings = p.Timings.WithDefaults()
		in.Pools[p.Name] = p
		owners[p.Owner] = true
	}
	if in.Instances, err = ec2.List(ctx, fleet.Filter{}); err != nil {
		return in, err
	}
	ids := make([]string, len(in.Instances))
	for i, inst := range in.Instances {
		ids[i] = inst.ID
		if _, orphan := inst.Orphan(); !orphan && inst.Tags[fleet.TagOwner] != "" {
			owners[inst.Tags[fleet.TagOwner]] = true
		}
	}
	if in.Records, err = storeOf(d).ByInstanceID(ctx, ids, in.roles()); err != nil {
		return in, err
	}
	for _, rec := range in.Records {
		owners[rec.Owner] = true
	}
	// The listings come after the records on purpose: a runner registered
	// in between belongs to a claim, which Decide recognises (runnersOf).
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(Concurrency)
	for owner := range owners {
		if owner == "" {
			continue
		}
		g.Go(func() error {
			runners, err := gh.ListRunners(ctx, owner)
			if err != nil {
				return fmt.Errorf("list runners of %s: %w", owner, err)
			}
			mu.Lock()
			in.Runners[owner] = runners
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return in, err
	}
	in.Runner = func(owner string, id int64) (github.Runner, bool, error) {
		r, err := gh.GetRunner(ctx, owner, id)
		if github.IsNotFound(err) {
			return github.Runner{}, false, nil
		}
		return r, err == nil, err
	}
	return in, nil
}
