// Package refresh is the refresh function (DESIGN.md §6), run by a schedule:
// it terminates instances whose lease ended, expires those whose agent went
// silent, reconciles EC2 with the records, and re-sends pool messages a crash
// left unsent. Its invariant: after a refresh, every live instance of the
// deployment has a live record and every live record a live instance
// (except those younger than createdTTL, still being written).
package refresh

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/pool"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// EC2 is what refresh asks of EC2.
type EC2 interface {
	// Live lists the deployment's instances that are not terminated, by tag.
	Live(ctx context.Context) ([]LiveInstance, error)
	// Terminate terminates instances in batches; gone ones are no error.
	Terminate(ctx context.Context, ids []string) error
}

// LiveInstance is an EC2 instance of the deployment.
type LiveInstance struct {
	ID         string
	Pool       string
	LaunchedAt time.Time
}

// Decision is one thing refresh did, with why.
type Decision struct {
	InstanceID string `json:"instanceId"`
	Pool       string `json:"pool,omitempty"`
	Reason     string `json:"reason"`
}

// Output summarises a refresh.
type Output struct {
	Terminated     []Decision `json:"terminated"`
	Expired        []Decision `json:"expired"`
	Repooled       []Decision `json:"repooled"`
	Errors         []string   `json:"errors,omitempty"`
	ElapsedSeconds float64    `json:"elapsedSeconds"`
}

// Handle runs one refresh. The payload may be empty or {}.
func Handle(ctx context.Context, d *controlplane.Deps, ec2 EC2, payload json.RawMessage) (*Output, error) {
	start := time.Now()
	if err := controlplane.DecodeNone(payload); err != nil {
		return nil, err
	}
	r := &refresher{d: d, ec2: ec2, now: d.Store.Now(), out: &Output{Terminated: []Decision{}, Expired: []Decision{}, Repooled: []Decision{}}}
	pools, err := d.Store.ListPoolConfigs(ctx)
	if err != nil {
		return nil, err
	}
	live := map[string]*state.Instance{} // every record in a live state, by id
	for i := range pools {
		p, err := d.Pool(ctx, pools[i].Name)
		if err != nil {
			return nil, err
		}
		if err := r.pool(ctx, p, live); err != nil {
			r.fail(err)
		}
	}
	if err := r.reconcile(ctx, pools, live); err != nil {
		r.fail(err)
	}
	r.out.ElapsedSeconds = time.Since(start).Seconds()
	d.Log.Info("refresh finished", "terminated", len(r.out.Terminated), "expired", len(r.out.Expired), "repooled", len(r.out.Repooled), "errors", len(r.out.Errors))
	if len(r.out.Errors) > 0 && len(r.out.Terminated)+len(r.out.Expired)+len(r.out.Repooled) == 0 {
		return r.out, errors.New("refresh failed: " + r.out.Errors[0])
	}
	return r.out, nil
}

type refresher struct {
	d   *controlplane.Deps
	ec2 EC2
	now time.Time
	out *Output
}

func (r *refresher) fail(err error) {
	r.out.Errors = append(r.out.Errors, err.Error())
	r.d.Log.Error("refresh step failed", "err", err)
}

var liveStates = []state.State{state.Created, state.Claimed, state.Running, state.Idle}

// pool handles one pool's records: expired leases, stale heartbeats, unsent
// pool messages. It adds the pool's live records to live.
func (r *refresher) pool(ctx context.Context, p *state.PoolConfig, live map[string]*state.Instance) error {
	var ids []string
	for _, st := range liveStates {
		insts, err := r.d.Store.ByPoolState(ctx, p.Name, st, time.Time{})
		if err != nil {
			return err
		}
		for _, inst := range insts {
			ids = append(ids, inst.ID)
		}
	}
	// The index lacks heartbeats and signals and may be stale: decide on the
	// records themselves.
	records, err := r.d.Store.GetMany(ctx, ids)
	if err != nil {
		return err
	}
	var expired []*state.Instance
	for _, id := range ids {
		inst, ok := records[id]
		if !ok || inst.State == state.Terminated {
			continue
		}
		if inst.Expired(r.now) {
			expired = append(expired, inst) // its record is marked terminated below
			continue
		}
		live[id] = inst
		switch {
		case r.stale(inst, p):
			reason := "heartbeat stale"
			if inst.HeartbeatAt == 0 {
				reason = "no heartbeat after the boot time"
			}
			if _, err := r.d.Store.Expire(ctx, inst.Ref(), reason); err == nil {
				r.out.Expired = append(r.out.Expired, Decision{inst.ID, p.Name, reason})
			}
		case inst.State == state.Idle && inst.Clean() && inst.PooledAt == 0:
			r.repool(ctx, p, inst)
		}
	}
	return r.terminate(ctx, expired, "lease expired", true)
}

func (r *refresher) stale(inst *state.Instance, p *state.PoolConfig) bool {
	if inst.HeartbeatAt != 0 {
		return r.now.Sub(time.Unix(inst.HeartbeatAt, 0)) > state.D(p.Timings.StaleAfter)
	}
	return r.now.Sub(time.Unix(inst.LaunchedAt, 0)) > state.D(p.Timings.BootTime)
}

// repool sends the pool message a release (or a refresh) could not.
func (r *refresher) repool(ctx context.Context, p *state.PoolConfig, inst *state.Instance) {
	msg := pool.Message{InstanceID: inst.ID, Pool: inst.Pool, InstanceType: inst.InstanceType, UsageClass: inst.UsageClass, IdleUntil: inst.Threshold}
	if err := r.d.Queue(p).Send(ctx, msg); err != nil {
		r.fail(err)
		return
	}
	if _, err := r.d.Store.MarkPooled(ctx, inst.Ref()); err == nil {
		r.out.Repooled = append(r.out.Repooled, Decision{inst.ID, p.Name, "clean idle instance had no pool message"})
	}
}

// terminate marks records terminated (conditionally: a record renewed or
// claimed meanwhile is left alone), then terminates the instances in EC2 and
// deletes their GitHub runners. If EC2 fails after the records were marked,
// reconcile terminates the instances again on the next run.
func (r *refresher) terminate(ctx context.Context, insts []*state.Instance, reason string, ifExpired bool) error {
	var ids []string
	marked := map[string]*state.Instance{}
	for _, inst := range insts {
		t := state.Termination{Assignment: inst.Assignment, IfExpired: ifExpired, Reason: reason}
		if inst.TerminatedReason != "" {
			t.Reason = inst.TerminatedReason
		}
		if _, err := r.d.Store.Terminate(ctx, inst.ID, t); err != nil {
			if state.ClauseOf(err) == "" {
				r.fail(err)
			}
			continue
		}
		ids = append(ids, inst.ID)
		marked[inst.ID] = inst
	}
	if len(ids) == 0 {
		return nil
	}
	if err := r.ec2.Terminate(ctx, ids); err != nil {
		return err
	}
	sort.Strings(ids)
	for _, id := range ids {
		inst := marked[id]
		why := reason
		if inst.TerminatedReason != "" {
			why = reason + ": " + inst.TerminatedReason
		}
		r.out.Terminated = append(r.out.Terminated, Decision{id, inst.Pool, why})
		if inst.GithubRunnerID != 0 {
			if err := r.d.GitHub.DeleteRunner(ctx, inst.Owner, inst.GithubRunnerID); err != nil {
				r.fail(err)
			}
		}
	}
	return nil
}

// reconcile compares EC2 with the records: instances without a live record
// (older than createdTTL, so a provision still writing its records is left
// alone) are terminated; live records whose instance is gone are marked.
func (r *refresher) reconcile(ctx context.Context, pools []state.PoolConfig, live map[string]*state.Instance) error {
	instances, err := r.ec2.Live(ctx)
	if err != nil {
		return err
	}
	grace := map[string]time.Duration{}
	maxGrace := time.Duration(0)
	for _, p := range pools {
		g := state.D(p.Timings.WithDefaults(p.OS).CreatedTTL)
		grace[p.Name] = g
		maxGrace = max(maxGrace, g)
	}
	inEC2 := map[string]bool{}
	var orphans []string
	var orphanDecisions []Decision
	for _, in := range instances {
		inEC2[in.ID] = true
		if _, ok := live[in.ID]; ok {
			continue
		}
		g, ok := grace[in.Pool]
		if !ok {
			g = maxGrace
		}
		if r.now.Sub(in.LaunchedAt) < g {
			continue
		}
		orphans = append(orphans, in.ID)
		orphanDecisions = append(orphanDecisions, Decision{in.ID, in.Pool, "no live record"})
	}
	if len(orphans) > 0 {
		if err := r.ec2.Terminate(ctx, orphans); err != nil {
			return err
		}
		r.out.Terminated = append(r.out.Terminated, orphanDecisions...)
	}
	var gone []*state.Instance
	for id, inst := range live {
		if inEC2[id] || r.now.Sub(time.Unix(inst.LaunchedAt, 0)) < grace[inst.Pool] {
			continue
		}
		if _, err := r.d.Store.Terminate(ctx, id, state.Termination{Assignment: inst.Assignment, Reason: "instance gone from EC2"}); err == nil {
			gone = append(gone, inst)
			r.out.Terminated = append(r.out.Terminated, Decision{id, inst.Pool, "instance gone from EC2"})
		}
	}
	for _, inst := range gone {
		if inst.GithubRunnerID != 0 {
			if err := r.d.GitHub.DeleteRunner(ctx, inst.Owner, inst.GithubRunnerID); err != nil {
				r.fail(err)
			}
		}
	}
	return nil
}
