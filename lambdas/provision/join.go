package provision

import (
	"context"
	"fmt"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// StatusProvisioning is the status of an answer given before the run was
// ready: the caller asks again with the same payload (waitSeconds).
const StatusProvisioning = string(state.RunProvisioning)

// joinSlack is how long past its own deadline and rollback a run may still
// say provisioning before a call joining it gives up: the invocation that
// provisions it was stopped before it could mark it failed.
const joinSlack = 30 * time.Second

// join answers a call for a run another invocation provisions (a call
// asked again, its connection to the first lost or given up): it waits
// for that one to finish and reports the same instances. With waitSeconds
// it answers status provisioning once that much has passed, so that no
// connection waits for minutes; the caller asks again, until the run is
// ready, failed, or past its own deadline.
func (p *provisioner) join(ctx context.Context, run *state.Run) (*Output, error) {
	var answer <-chan time.Time
	if w := p.req.WaitSeconds; w != nil {
		t := time.NewTimer(time.Duration(*w) * time.Second)
		defer t.Stop()
		answer = t.C
	}
	deadline := time.Unix(run.CreatedAt, 0).Add(p.req.timeout + rollbackReserve + joinSlack)
	for {
		switch run.Status {
		case state.RunReady:
			return p.fromRecords(ctx, run)
		case state.RunFailed:
			return nil, fmt.Errorf("provision of run %s failed: %s", run.ID, run.Detail)
		case state.RunReleased:
			return nil, controlplane.Invalid("runId", "run %s was released already; a re-run needs a new runId (for example run_id-run_attempt)", run.ID)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("run %s is still marked provisioning %s after its deadline: the invocation that provisioned it was stopped; release it, and use a new runId",
				run.ID, time.Since(deadline).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("run %s is still being provisioned by another invocation: %w", run.ID, ctx.Err())
		case <-answer:
			return p.progress(ctx, run), nil
		case <-time.After(time.Second):
		}
		var err error
		if run, err = storeOf(p.d).GetRun(ctx, run.ID); err != nil {
			return nil, err
		}
	}
}

// progress is the answer of a call that stopped waiting for a run still
// being provisioned: status provisioning, its label, and how far it got.
func (p *provisioner) progress(ctx context.Context, run *state.Run) *Output {
	out := &Output{RunID: run.ID, Label: p.label, Pool: p.req.Pool, Status: StatusProvisioning, Instances: []Instance{}, UsageClass: p.req.UsageClass,
		ElapsedSeconds: time.Since(time.Unix(run.CreatedAt, 0)).Seconds()}
	ready := 0
	for _, id := range run.InstanceIDs {
		if inst, err := storeOf(p.d).Get(ctx, p.req.pool.RecordKey(id)); err == nil && inst.RunID == run.ID && inst.State == state.Running {
			ready++
		}
	}
	switch {
	case len(run.InstanceIDs) == 0:
		out.Progress = fmt.Sprintf("0 of %d runners: waiting for the pool's capacity or a launch", run.InstanceCount)
	default:
		out.Progress = fmt.Sprintf("%d of %d runners ready, %d instances given to the run", ready, run.InstanceCount, len(run.InstanceIDs))
	}
	return out
}

func (p *provisioner) fromRecords(ctx context.Context, run *state.Run) (*Output, error) {
	p.mine = map[string]*member{}
	for _, id := range run.InstanceIDs {
		inst, err := storeOf(p.d).Get(ctx, p.req.pool.RecordKey(id))
		if err != nil || inst.RunID != run.ID || inst.State != state.Running {
			continue
		}
		source := "created"
		switch {
		case inst.StartedAt >= run.CreatedAt && inst.StartedAt != 0:
			source = sourceStarted // started from the stopped tier for this run
		case inst.Uses > 1:
			source = "reused"
		}
		p.mine[id] = &member{inst: inst, source: source, done: true}
	}
	out := p.output()
	// Since the run began, not this call: a call asked again answers in a
	// moment what took the run minutes. (The instances' own timings are
	// the first call's, and not kept.)
	out.ElapsedSeconds = time.Since(time.Unix(run.CreatedAt, 0)).Seconds()
	return out, nil
}

func (p *provisioner) output() *Output {
	out := &Output{RunID: p.req.RunID, Label: p.label, Pool: p.req.Pool, Status: string(state.RunReady), Instances: []Instance{}}
	for _, m := range p.members() {
		out.Instances = append(out.Instances, Instance{InstanceID: m.inst.ID, InstanceType: m.inst.InstanceType, UsageClass: m.inst.UsageClass, Source: m.source,
			ClaimedSeconds: m.claimed, ConfiguredSeconds: m.configured, ReadySeconds: m.ready})
		switch m.source {
		case "reused":
			out.Reused++
		case sourceStarted:
			out.Started++
		default:
			out.Created++
		}
	}
	out.UsageClass = p.req.UsageClass
	p.mu.Lock()
	out.ClaimsRefused = p.refused
	out.StartsFailed = p.startsFailed
	out.SpotBreaker = p.byBreaker
	p.mu.Unlock()
	out.ElapsedSeconds = time.Since(p.start).Seconds()
	out.QueuedSeconds = p.queued.Seconds()
	return out
}
