// Package provision is the provision function (DESIGN.md §6, seed
// lifecycle-walkthrough.md): it gives a run its runners, reusing clean idle
// instances from the pool and creating the rest, and returns once every one
// is registered with GitHub under the runId label.
package provision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/pool"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Input is the provision payload.
type Input struct {
	RunID                string   `json:"runId"`
	Pool                 string   `json:"pool"`
	InstanceCount        *int     `json:"instanceCount,omitempty"`
	UsageClass           string   `json:"usageClass,omitempty"`
	AllowedInstanceTypes []string `json:"allowedInstanceTypes,omitempty"`
	Owner                string   `json:"owner,omitempty"`
	TimeoutSeconds       *int     `json:"timeoutSeconds,omitempty"`
}

// Instance is one runner given to the run.
type Instance struct {
	InstanceID   string  `json:"instanceId"`
	InstanceType string  `json:"instanceType"`
	UsageClass   string  `json:"usageClass"`
	Source       string  `json:"source"` // "reused" or "created"
	ReadySeconds float64 `json:"readySeconds"`
}

// Output is what provision returns.
type Output struct {
	RunID          string     `json:"runId"`
	Pool           string     `json:"pool"`
	Status         string     `json:"status"`
	Instances      []Instance `json:"instances"`
	Reused         int        `json:"reused"`
	Created        int        `json:"created"`
	ElapsedSeconds float64    `json:"elapsedSeconds"`
}

// Launcher is the EC2 side of provision.
type Launcher interface {
	// Launch starts count instances of the pool with one fleet request and
	// tags them (pool, owner, assignment). It may return fewer than asked,
	// with detail saying why.
	Launch(ctx context.Context, spec LaunchSpec) (launched []Launched, detail string, err error)
	// Running reports which of ids are in the EC2 state running.
	Running(ctx context.Context, ids []string) (map[string]bool, error)
	// Terminate terminates instances; ones already gone are no error.
	Terminate(ctx context.Context, ids []string) error
}

// LaunchSpec is one fleet request.
type LaunchSpec struct {
	Pool       *state.PoolConfig
	Types      []string
	UsageClass string
	Count      int
	Owner      string
	Assignment string
}

// Launched is one instance EC2 started.
type Launched struct {
	ID           string
	InstanceType string
	UsageClass   string
	LaunchedAt   time.Time
}

const (
	defaultTimeout = 10 * time.Minute
	maxTimeout     = 15 * time.Minute
	minTimeout     = 30 * time.Second
)

// request is a validated Input with its defaults filled in.
type request struct {
	Input
	count   int
	timeout time.Duration
	types   []string
	matcher pool.Matcher
	pool    *state.PoolConfig
}

// Handle runs one provision.
func Handle(ctx context.Context, d *controlplane.Deps, fleet Launcher, payload json.RawMessage) (*Output, error) {
	start := time.Now()
	req, err := parse(ctx, d, payload)
	if err != nil {
		return nil, err
	}
	canonical, _ := json.Marshal(req.Input)
	run, created, err := d.Store.StartRun(ctx, state.Run{ID: req.RunID, Pool: req.Pool, Owner: req.Owner, InstanceCount: req.count, Request: string(canonical)})
	if state.ClauseOf(err) == state.ClausePayload {
		return nil, controlplane.Invalid("runId", "run %s was provisioned with another payload (%s); use a new runId", req.RunID, run.Request)
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(req.timeout))
	defer cancel()
	p := &provisioner{d: d, fleet: fleet, req: req, start: start, log: d.Log.With("runId", req.RunID, "pool", req.Pool)}
	if !created {
		return p.join(ctx, run)
	}
	out, err := p.provision(ctx)
	if err != nil {
		p.log.Error("provision failed", "err", err)
		p.rollback(context.WithoutCancel(ctx))
		if _, serr := d.Store.SetRunStatus(context.WithoutCancel(ctx), req.RunID, state.RunFailed, err.Error(), state.RunProvisioning); serr != nil && state.ClauseOf(serr) == "" {
			p.log.Error("mark run failed", "err", serr)
		}
		return nil, err
	}
	return out, nil
}

// Limits of a payload's values that need no pool to check.
const (
	// MaxAllowedInstanceTypes bounds the globs of one request: a pool has
	// a handful of types, and the request is stored in the run item.
	MaxAllowedInstanceTypes = 64
)

var poolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ParsePayload decodes a provision payload and applies every rule that needs
// no pool configuration (the rest — instanceCount against maxInstances, the
// globs against the pool's types, owner against the pool's — is checked once
// the pool is read). It calls nothing: what it accepts is safe to log, store
// and use as a DynamoDB key, a GitHub label and a GitHub API path.
func ParsePayload(payload []byte) (Input, error) {
	var in Input
	if err := controlplane.Decode(payload, &in); err != nil {
		return in, err
	}
	if err := controlplane.CheckRunID(in.RunID); err != nil {
		return in, err
	}
	if in.Pool == "" {
		return in, controlplane.Invalid("pool", "required: the name of a pool of this deployment")
	}
	if !poolNameRE.MatchString(in.Pool) {
		return in, controlplane.Invalid("pool", "%s must be 1-64 letters, digits, '-' or '_' (a ghrunner_pool name)", controlplane.Quote(in.Pool))
	}
	if in.UsageClass != "" && in.UsageClass != "spot" && in.UsageClass != "on-demand" {
		return in, controlplane.Invalid("usageClass", "%s must be spot or on-demand", controlplane.Quote(in.UsageClass))
	}
	if n := len(in.AllowedInstanceTypes); n > MaxAllowedInstanceTypes {
		return in, controlplane.Invalid("allowedInstanceTypes", "at most %d globs, got %d", MaxAllowedInstanceTypes, n)
	}
	if _, err := pool.NewMatcher(in.UsageClass, in.AllowedInstanceTypes); err != nil {
		field, rule, _ := strings.Cut(err.Error(), ": ")
		return in, controlplane.Invalid(field, "%s", rule)
	}
	if in.Owner != "" {
		if _, err := github.ParseOwner(in.Owner); err != nil {
			return in, controlplane.Invalid("owner", "%s must be an organization (acme) or a repository (acme/api)", controlplane.Quote(in.Owner))
		}
	}
	// Compared in seconds: multiplied first, a huge value would wrap
	// around into the allowed range.
	if t := in.TimeoutSeconds; t != nil && (*t < int(minTimeout.Seconds()) || *t > int(maxTimeout.Seconds())) {
		return in, controlplane.Invalid("timeoutSeconds", "must be %d to %d, got %d", int(minTimeout.Seconds()), int(maxTimeout.Seconds()), *t)
	}
	return in, nil
}

func parse(ctx context.Context, d *controlplane.Deps, payload json.RawMessage) (*request, error) {
	in, err := ParsePayload(payload)
	if err != nil {
		return nil, err
	}
	p, err := d.Pool(ctx, in.Pool)
	if state.IsNotFound(err) {
		return nil, controlplane.Invalid("pool", "unknown pool %q%s", in.Pool, knownPools(ctx, d))
	}
	if err != nil {
		return nil, err
	}
	req := &request{Input: in, pool: p, count: 1, timeout: defaultTimeout}
	if in.InstanceCount != nil {
		req.count = *in.InstanceCount
	}
	if req.count < 1 || req.count > p.MaxInstances {
		return nil, controlplane.Invalid("instanceCount", "must be 1 to %d (the pool's maxInstances), got %d", p.MaxInstances, req.count)
	}
	if in.UsageClass == "" {
		req.UsageClass = p.UsageClass
	}
	if req.UsageClass != "spot" && req.UsageClass != "on-demand" {
		return nil, controlplane.Invalid("usageClass", "%q must be spot or on-demand", in.UsageClass)
	}
	req.matcher, err = pool.NewMatcher(req.UsageClass, in.AllowedInstanceTypes)
	if err != nil {
		field, rule, _ := strings.Cut(err.Error(), ": ")
		return nil, controlplane.Invalid(field, "%s", rule)
	}
	if req.types = req.matcher.Allowed(p.InstanceTypes); len(req.types) == 0 {
		return nil, controlplane.Invalid("allowedInstanceTypes", "%v match none of the pool's instance types %v", in.AllowedInstanceTypes, p.InstanceTypes)
	}
	if in.Owner == "" {
		req.Owner = p.Owner
	}
	if req.Owner != p.Owner && !(strings.Count(p.Owner, "/") == 0 && strings.HasPrefix(req.Owner, p.Owner+"/") && strings.Count(req.Owner, "/") == 1) {
		return nil, controlplane.Invalid("owner", "%q must be the pool's owner %q or one of its repositories (%s/<repo>)", in.Owner, p.Owner, p.Owner)
	}
	if in.TimeoutSeconds != nil {
		req.timeout = time.Duration(*in.TimeoutSeconds) * time.Second // 30-900: checked by ParsePayload
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl)-5*time.Second < req.timeout {
		req.timeout = time.Until(dl) - 5*time.Second
	}
	return req, nil
}

func knownPools(ctx context.Context, d *controlplane.Deps) string {
	pools, err := d.Store.ListPoolConfigs(ctx)
	if err != nil || len(pools) == 0 {
		return ""
	}
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	return "; known pools: " + strings.Join(names, ", ")
}

// provisioner is one provision in progress.
type provisioner struct {
	d     *controlplane.Deps
	fleet Launcher
	req   *request
	start time.Time
	log   interface {
		Info(string, ...any)
		Warn(string, ...any)
		Error(string, ...any)
	}

	mu      sync.Mutex
	mine    map[string]*member // every instance this provision touched
	created int
	reused  int
}

// member is an instance of this run and how far it got.
type member struct {
	inst   *state.Instance
	source string
	ready  float64
	done   bool
}

func (p *provisioner) provision(ctx context.Context) (*Output, error) {
	p.mine = map[string]*member{}
	reg, err := p.d.RegistrationFor(ctx, p.req.Owner)
	if err != nil {
		return nil, err
	}
	claimed, err := p.claim(ctx, p.req.count, reg)
	if err != nil {
		return nil, err
	}
	if missing := p.req.count - claimed; missing > 0 {
		if err := p.create(ctx, missing, reg); err != nil {
			return nil, err
		}
	}
	if err := p.waitAll(ctx, reg); err != nil {
		return nil, err
	}
	if _, err := p.d.Store.SetRunStatus(ctx, p.req.RunID, state.RunReady, "", state.RunProvisioning); err != nil {
		if state.ClauseOf(err) == state.ClauseStatus {
			return nil, errors.New("the run was released while it was being provisioned")
		}
		return nil, err
	}
	return p.output(), nil
}

// claim takes up to n clean idle instances from the pool and keeps those
// whose agent is alive and whose EC2 instance runs.
func (p *provisioner) claim(ctx context.Context, n int, reg *state.Registration) (int, error) {
	t := p.req.pool.Timings
	claimer := &pool.Claimer{Store: p.d.Store, Request: state.ClaimRequest{
		RunID: p.req.RunID, Pool: p.req.Pool, Owner: p.req.Owner, LaunchTemplateVersion: p.req.pool.LaunchTemplateVersion,
		MaxUses: t.MaxUses, MaxAge: state.D(t.MaxAge), ClaimTTL: state.D(t.ClaimTTL), Registration: reg,
	}}
	res, err := p.d.Queue(p.req.pool).Take(ctx, n, p.req.matcher, claimer.Claim)
	for _, old := range claimer.Retire {
		p.d.Expire(ctx, old.Ref(), "not reusable: launch template, use count or age")
	}
	p.adopt(ctx, claimer.Instances, "reused")
	if err != nil {
		return 0, fmt.Errorf("claim from the pool: %w", err)
	}
	if len(claimer.Instances) == 0 {
		return 0, nil
	}
	ids := make([]string, len(claimer.Instances))
	for i, inst := range claimer.Instances {
		ids[i] = inst.ID
	}
	running, err := p.fleet.Running(ctx, ids)
	if err != nil {
		return 0, fmt.Errorf("check claimed instances in EC2: %w", err)
	}
	kept := 0
	stale := state.D(t.StaleAfter)
	for _, inst := range claimer.Instances {
		fresh := inst.HeartbeatAt != 0 && time.Since(time.Unix(inst.HeartbeatAt, 0)) <= stale
		if running[inst.ID] && fresh {
			kept++
			continue
		}
		p.log.Warn("claimed instance unhealthy: retired", "instanceId", inst.ID, "running", running[inst.ID], "heartbeatFresh", fresh)
		p.d.Expire(ctx, inst.Ref(), "unhealthy when claimed")
		p.forget(inst.ID)
	}
	p.log.Info("claimed from pool", "claimed", kept, "received", res.Received, "stale", res.Stale, "exhausted", res.Exhausted)
	return kept, nil
}

// create launches n instances and writes their records at once, before
// anything else can fail, so no instance exists without a record for long
// (refresh reconciles the rest by their tags).
func (p *provisioner) create(ctx context.Context, n int, reg *state.Registration) error {
	if err := p.checkCapacity(ctx, n); err != nil {
		return err
	}
	assignment := state.NewAssignment()
	launched, detail, err := p.fleet.Launch(ctx, LaunchSpec{Pool: p.req.pool, Types: p.req.types, UsageClass: p.req.UsageClass, Count: n, Owner: p.req.Owner, Assignment: assignment})
	recorded, rerr := p.record(ctx, launched, assignment, reg)
	p.adopt(ctx, recorded, "created")
	if err != nil {
		return fmt.Errorf("launch %d instances: %w", n, err)
	}
	if rerr != nil {
		return rerr
	}
	if len(launched) < n {
		return fmt.Errorf("EC2 launched %d of %d instances: %s", len(launched), n, detail)
	}
	return nil
}

func (p *provisioner) checkCapacity(ctx context.Context, n int) error {
	live := 0
	for _, st := range []state.State{state.Created, state.Claimed, state.Running, state.Idle} {
		insts, err := p.d.Store.ByPoolState(ctx, p.req.Pool, st, time.Time{})
		if err != nil {
			return err
		}
		live += len(insts)
	}
	if live+n > p.req.pool.MaxInstances {
		return fmt.Errorf("pool %s has %d live instances of its maxInstances %d: cannot create %d more", p.req.Pool, live, p.req.pool.MaxInstances, n)
	}
	return nil
}

func (p *provisioner) record(ctx context.Context, launched []Launched, assignment string, reg *state.Registration) ([]*state.Instance, error) {
	var mu sync.Mutex
	var recorded []*state.Instance
	g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	g.SetLimit(16)
	for _, l := range launched {
		g.Go(func() error {
			material := *reg
			material.Assignment = assignment
			inst, err := p.d.Store.Create(gctx, state.NewInstance{
				ID: l.ID, Pool: p.req.Pool, Owner: p.req.Owner, RunID: p.req.RunID, Assignment: assignment,
				InstanceType: l.InstanceType, UsageClass: l.UsageClass, LaunchTemplateVersion: p.req.pool.LaunchTemplateVersion,
				LaunchedAt: l.LaunchedAt, TTL: state.D(p.req.pool.Timings.CreatedTTL), Registration: &material,
			})
			if err != nil {
				return fmt.Errorf("record instance %s: %w", l.ID, err)
			}
			mu.Lock()
			recorded = append(recorded, inst)
			mu.Unlock()
			return nil
		})
	}
	err := g.Wait()
	return recorded, err
}

// adopt notes instances as this run's, in memory and in the run item.
func (p *provisioner) adopt(ctx context.Context, insts []*state.Instance, source string) {
	if len(insts) == 0 {
		return
	}
	ids := make([]string, len(insts))
	p.mu.Lock()
	for i, inst := range insts {
		p.mine[inst.ID] = &member{inst: inst, source: source}
		ids[i] = inst.ID
	}
	p.mu.Unlock()
	if _, err := p.d.Store.AddRunInstances(context.WithoutCancel(ctx), p.req.RunID, ids...); err != nil {
		p.log.Warn("record run instances", "err", err)
	}
}

func (p *provisioner) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.mine, id)
}

func (p *provisioner) members() []*member {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*member, 0, len(p.mine))
	for _, m := range p.mine {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].inst.ID < out[j].inst.ID })
	return out
}

// waitAll waits for every instance's UD_REG_OK and moves it to running.
// Instances that fail are given up and, once, replaced by new ones when a
// boot still fits the deadline.
func (p *provisioner) waitAll(ctx context.Context, reg *state.Registration) error {
	attempted := map[string]bool{}
	replaced := false
	for {
		var round []*member
		for _, m := range p.members() {
			if !m.done && !attempted[m.inst.ID] {
				attempted[m.inst.ID] = true
				round = append(round, m)
			}
		}
		if len(round) == 0 {
			return nil
		}
		failures := make([]error, len(round))
		var wg sync.WaitGroup
		for i, m := range round {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.waitOne(ctx, m); err != nil {
					p.log.Warn("instance failed to become ready", "instanceId", m.inst.ID, "err", err)
					p.giveUp(ctx, m)
					failures[i] = fmt.Errorf("%s: %w", m.inst.ID, err)
				}
			}()
		}
		wg.Wait()
		var failed []error
		for _, err := range failures {
			if err != nil {
				failed = append(failed, err)
			}
		}
		if len(failed) == 0 {
			continue
		}
		dl, _ := ctx.Deadline()
		fits := time.Until(dl) > state.D(p.req.pool.Timings.BootTime)
		released := false
		for _, err := range failed {
			released = released || errors.Is(err, errReleased)
		}
		if replaced || !fits || released {
			return fmt.Errorf("%d of %d instances did not become ready: %w", len(failed), p.req.count, errors.Join(failed...))
		}
		replaced = true
		if err := p.create(ctx, len(failed), reg); err != nil {
			return fmt.Errorf("replace %d failed instances (%w): %w", len(failed), errors.Join(failed...), err)
		}
	}
}

var errReleased = errors.New("the run was released")

func (p *provisioner) waitOne(ctx context.Context, m *member) error {
	lease := time.Unix(m.inst.Threshold, 0)
	wctx, cancel := context.WithDeadline(ctx, lease)
	defer cancel()
	if _, err := p.d.Store.WaitSignal(wctx, m.inst.ID, m.inst.Assignment, state.SignalRegOK, state.SignalRegFailed, p.d.Poll); err != nil {
		return err
	}
	run, err := p.d.Store.GetRun(ctx, p.req.RunID)
	if err != nil {
		return err
	}
	if run.Status == state.RunReleased {
		return errReleased
	}
	inst, err := p.d.Store.MarkRunning(ctx, m.inst.Ref(), state.D(p.req.pool.Timings.MaxRuntime), state.D(p.req.pool.Timings.RuntimeCap))
	if err != nil {
		return err
	}
	p.mu.Lock()
	m.inst, m.done, m.ready = inst, true, time.Since(p.start).Seconds()
	p.mu.Unlock()
	return nil
}

// giveUp retires a member that will not become ready: a created instance is
// terminated, a claimed one goes back to the pool only once its agent says
// it is clean, otherwise it is expired.
func (p *provisioner) giveUp(ctx context.Context, m *member) {
	ctx = context.WithoutCancel(ctx)
	p.forget(m.inst.ID)
	cur, err := p.d.Store.Get(ctx, m.inst.ID)
	if err != nil {
		return
	}
	switch {
	case cur.State == state.Claimed && cur.Assignment == m.inst.Assignment:
		removal, rerr := p.d.RemovalFor(ctx, cur.Owner)
		if rerr != nil {
			p.d.Expire(ctx, cur.Ref(), rerr.Error())
			return
		}
		if idle, uerr := p.d.Store.Unclaim(ctx, cur.Ref(), state.D(p.req.pool.Timings.IdleTTL), removal); uerr == nil {
			p.d.Repool(ctx, idle, p.req.pool, 30*time.Second)
		}
	case cur.State == state.Created && cur.Assignment == m.inst.Assignment:
		p.terminate(ctx, cur, "did not become ready")
	case cur.State == state.Running && cur.RunID == p.req.RunID:
		p.d.ReleaseInstance(ctx, p.req.RunID, cur.ID)
	}
}

func (p *provisioner) terminate(ctx context.Context, inst *state.Instance, why string) {
	if err := p.fleet.Terminate(ctx, []string{inst.ID}); err != nil {
		p.d.Expire(ctx, inst.Ref(), why+"; terminate failed: "+err.Error())
		return
	}
	if _, err := p.d.Store.Terminate(ctx, inst.ID, state.Termination{Assignment: inst.Assignment, Reason: why}); err != nil && state.ClauseOf(err) == "" {
		p.log.Warn("mark terminated", "instanceId", inst.ID, "err", err)
	}
}

// rollback gives back everything this provision holds after it failed.
func (p *provisioner) rollback(ctx context.Context) {
	var wg sync.WaitGroup
	for _, m := range p.members() {
		wg.Add(1)
		go func() { defer wg.Done(); p.giveUp(ctx, m) }()
	}
	wg.Wait()
}

// join answers a retried invoke for a run another invocation provisions:
// wait for that one to finish and report the same instances.
func (p *provisioner) join(ctx context.Context, run *state.Run) (*Output, error) {
	for {
		switch run.Status {
		case state.RunReady:
			return p.fromRecords(ctx, run)
		case state.RunFailed:
			return nil, fmt.Errorf("provision of run %s failed: %s", run.ID, run.Detail)
		case state.RunReleased:
			return nil, controlplane.Invalid("runId", "run %s was released already; a re-run needs a new runId (for example run_id-run_attempt)", run.ID)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("run %s is still being provisioned by another invocation: %w", run.ID, ctx.Err())
		case <-time.After(time.Second):
		}
		var err error
		if run, err = p.d.Store.GetRun(ctx, run.ID); err != nil {
			return nil, err
		}
	}
}

func (p *provisioner) fromRecords(ctx context.Context, run *state.Run) (*Output, error) {
	p.mine = map[string]*member{}
	for _, id := range run.InstanceIDs {
		inst, err := p.d.Store.Get(ctx, id)
		if err != nil || inst.RunID != run.ID || inst.State != state.Running {
			continue
		}
		source := "created"
		if inst.Uses > 1 {
			source = "reused"
		}
		p.mine[id] = &member{inst: inst, source: source, done: true}
	}
	return p.output(), nil
}

func (p *provisioner) output() *Output {
	out := &Output{RunID: p.req.RunID, Pool: p.req.Pool, Status: string(state.RunReady), Instances: []Instance{}}
	for _, m := range p.members() {
		out.Instances = append(out.Instances, Instance{InstanceID: m.inst.ID, InstanceType: m.inst.InstanceType, UsageClass: m.inst.UsageClass, Source: m.source, ReadySeconds: m.ready})
		if m.source == "reused" {
			out.Reused++
		} else {
			out.Created++
		}
	}
	out.ElapsedSeconds = time.Since(p.start).Seconds()
	return out
}
