package provision

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/pool"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// claim takes up to n clean idle instances from the pool and keeps those
// whose EC2 instance runs. Whether their agent is alive is judged while
// waiting for its registration (its heartbeat counter must move), never by
// comparing the agent's clock with ours. The pool queue is only a hint: if
// it fails, provision creates what it could not claim.
func (p *provisioner) claim(ctx context.Context, n int, reg *state.Registration) int {
	t := p.req.pool.Timings
	claimer := &pool.Claimer{Store: p.d.Store, RoleID: p.req.pool.InstanceRoleID, Request: state.ClaimRequest{
		RunID: p.req.RunID, Pool: p.req.Pool, Owner: p.req.Owner, LaunchTemplateVersion: p.req.pool.LaunchTemplateVersion,
		MaxUses: t.MaxUses, MaxAge: state.D(t.MaxAge), ClaimTTL: state.D(t.ClaimTTL), Registration: reg,
		// The agent starts the run's runner from this release: the pool's
		// now, even where refresh has not written it into the record yet.
		RunnerTarget: p.req.pool.RunnerTarget(),
	}}
	res, err := p.d.Queue(p.req.pool).Take(ctx, n, p.req.matcher, claimer.Claim)
	for _, old := range claimer.Retire {
		p.d.Expire(ctx, old.Ref(), "not reusable: launch template, use count, age or a rebalance recommendation")
	}
	p.adopt(ctx, claimer.Instances, "reused")
	p.mu.Lock()
	p.refused += res.Stale
	p.mu.Unlock()
	if err != nil {
		p.log.Warn("pool queue failed: creating what was not claimed", "err", err, "claimed", len(claimer.Instances))
	}
	if len(claimer.Instances) == 0 {
		return 0
	}
	ids := make([]string, len(claimer.Instances))
	for i, inst := range claimer.Instances {
		ids[i] = inst.ID
	}
	running, err := p.fleet.Running(ctx, ids)
	if err != nil {
		// Unknown is not dead: the registration wait decides.
		p.log.Warn("claimed instances not checked in EC2", "err", err)
		return len(claimer.Instances)
	}
	kept := 0
	for _, inst := range claimer.Instances {
		if running[inst.ID] {
			kept++
			continue
		}
		p.log.Warn("claimed instance not running in EC2: retired", "instanceId", inst.ID)
		p.d.Expire(ctx, inst.Ref(), "not running in EC2 when claimed")
		p.forget(inst.ID)
	}
	p.log.Info("claimed from pool", "claimed", kept, "received", res.Received, "stale", res.Stale, "exhausted", res.Exhausted)
	return kept
}

// create launches n instances and writes their records at once, before
// anything else can fail, so no instance exists without a record for long.
// It returns the members it added. The launch is reserved against the
// pool's cap first; an instance whose record could not be written is
// terminated at once (refresh would otherwise find it only after
// createdTTL).
func (p *provisioner) create(ctx context.Context, n int, reg *state.Registration) ([]*member, error) {
	assignment := state.NewAssignment()
	if err := p.reserve(ctx, assignment, n); err != nil {
		return nil, err
	}
	launched, why, err := p.fleet.Launch(ctx, LaunchSpec{Pool: p.req.pool, Types: p.req.types, UsageClass: p.launchClass(ctx), Count: n, Owner: p.req.Owner, Assignment: assignment})
	p.launches().note(len(launched), why, err)
	recorded, rerr := p.record(ctx, launched, assignment, reg)
	p.adopt(ctx, recorded, "created")
	if unrecorded := missingFrom(launched, recorded); len(unrecorded) > 0 {
		if terr := p.fleet.Terminate(context.WithoutCancel(ctx), unrecorded); terr != nil {
			p.log.Error("terminate instances without a record", "instanceIds", unrecorded, "err", terr)
		} else {
			p.log.Warn("terminated instances whose record could not be written", "instanceIds", unrecorded)
		}
	}
	// The records now count through the index, after its lag; the
	// reservation covers that lag and, if this process dies before this
	// line, the instances until refresh reconciles them.
	if serr := storeOf(p.d).SettleReservation(context.WithoutCancel(ctx), p.req.Pool, assignment, idsOf(recorded), indexLag); serr != nil {
		p.log.Warn("settle capacity reservation", "err", serr)
	}
	members := p.membersOf(recorded)
	if err != nil {
		return members, fmt.Errorf("launch %d instances: %w", n, err)
	}
	if rerr != nil {
		return members, rerr
	}
	if len(launched) < n {
		return members, &shortLaunch{got: len(launched), asked: n, why: why}
	}
	return members, nil
}

// indexLag bounds how long a new record may take to appear in the index.
const indexLag = 30 * time.Second

// reserve holds n of the pool's maxInstances for a launch, counting the
// pool's records and its instances in EC2 (either may lag). Instances
// launched by a provision that dies before writing their records count
// until refresh must have terminated them (createdTTL after launch, twice
// for the refresh period). At the cap, the pool's expired leases are
// terminated first: they hold capacity no run can use.
func (p *provisioner) reserve(ctx context.Context, id string, n int) error {
	hold := 2 * state.D(p.req.pool.Timings.CreatedTTL)
	count := func(ctx context.Context) (map[string]string, error) {
		live, err := storeOf(p.d).LiveIDs(ctx, p.req.Pool)
		if err != nil {
			return nil, err
		}
		inEC2, err := p.fleet.Live(ctx, p.req.Pool)
		if err != nil {
			return nil, err
		}
		for id, assignment := range inEC2 {
			if _, ok := live[id]; !ok {
				live[id] = assignment
			}
		}
		return live, nil
	}
	err := storeOf(p.d).Reserve(ctx, p.req.Pool, id, n, p.req.pool.MaxInstances, hold, count)
	if !state.IsPoolAtCap(err) {
		return err
	}
	if reaped := p.reapExpired(ctx); reaped == 0 {
		return err
	}
	return storeOf(p.d).Reserve(ctx, p.req.Pool, id, n, p.req.pool.MaxInstances, hold, count)
}

// reapExpired terminates the pool's instances whose lease has passed, each
// through the conditional write refresh uses (a lease renewed or extended
// meanwhile is left alone). It returns how many it terminated.
func (p *provisioner) reapExpired(ctx context.Context) int {
	var keys []state.Key
	for _, st := range state.LiveStates {
		insts, err := storeOf(p.d).ByPoolState(ctx, p.req.Pool, st, p.d.Now())
		if err != nil {
			return 0
		}
		for _, inst := range insts {
			keys = append(keys, inst.Key)
		}
	}
	records, err := storeOf(p.d).GetMany(ctx, keys)
	if err != nil {
		return 0
	}
	var expired []*state.Instance
	for _, rec := range records {
		if rec.State != state.Terminated && rec.Expired(p.d.Now()) {
			expired = append(expired, rec)
		}
	}
	reaped, err := p.d.Retire(ctx, p.fleet, expired, "lease expired (reaped at the pool's cap)", true)
	if err != nil {
		p.log.Warn("reap expired instances", "err", err) // refresh finishes what is left
	}
	return len(reaped)
}

func idsOf(insts []*state.Instance) []string {
	ids := make([]string, len(insts))
	for i, inst := range insts {
		ids[i] = inst.ID
	}
	return ids
}

func missingFrom(launched []Launched, recorded []*state.Instance) []string {
	have := map[string]bool{}
	for _, r := range recorded {
		have[r.ID] = true
	}
	var out []string
	for _, l := range launched {
		if !have[l.ID] {
			out = append(out, l.ID)
		}
	}
	return out
}

func (p *provisioner) record(ctx context.Context, launched []Launched, assignment string, reg *state.Registration) ([]*state.Instance, error) {
	var mu sync.Mutex
	var recorded []*state.Instance
	g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	g.SetLimit(16)
	for _, l := range launched {
		g.Go(func() error {
			var material *state.Registration
			if reg != nil { // none in a just-in-time pool
				m := *reg
				m.Assignment = assignment
				material = &m
			}
			ttl := state.D(p.req.pool.Timings.CreatedTTL)
			if p.req.RunID == "" {
				ttl += PrewarmGrace // see Prewarm
			}
			inst, err := storeOf(p.d).Create(gctx, state.NewInstance{
				ID: l.ID, RoleID: p.req.pool.InstanceRoleID, Pool: p.req.Pool, Owner: p.req.Owner, RunID: p.req.RunID, Assignment: assignment,
				InstanceType: l.InstanceType, UsageClass: l.UsageClass, LaunchTemplateVersion: p.req.pool.LaunchTemplateVersion,
				LaunchedAt: l.LaunchedAt, TTL: ttl, Registration: material,
				// The agent installs this release at boot, not its user
				// data's: a new instance starts on the pool's target.
				RunnerTarget: p.req.pool.RunnerTarget(),
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
	now := time.Since(p.start).Seconds()
	configured := now // a token pool's registration came with the claim
	if p.req.pool.JIT() {
		configured = 0 // waitOne mints it
	}
	p.mu.Lock()
	for i, inst := range insts {
		p.mine[inst.ID] = &member{inst: inst, source: source, claimed: now, configured: configured}
		ids[i] = inst.ID
	}
	p.mu.Unlock()
	if p.req.RunID == "" {
		return // pre-warmed: no run to note them in
	}
	if _, err := storeOf(p.d).AddRunInstances(context.WithoutCancel(ctx), p.req.RunID, ids...); err != nil {
		p.log.Warn("record run instances", "err", err)
	}
}

func (p *provisioner) forget(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.mine, id)
}

// membersOf returns the members of the given records.
func (p *provisioner) membersOf(insts []*state.Instance) []*member {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*member, 0, len(insts))
	for _, inst := range insts {
		if m, ok := p.mine[inst.ID]; ok {
			out = append(out, m)
		}
	}
	return out
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
