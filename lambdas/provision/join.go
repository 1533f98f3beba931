package provision

import (
	"context"
	"fmt"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

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
		inst, err := p.d.Store.Get(ctx, p.req.pool.RecordKey(id))
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
	out := &Output{RunID: p.req.RunID, Label: p.label, Pool: p.req.Pool, Status: string(state.RunReady), Instances: []Instance{}}
	for _, m := range p.members() {
		out.Instances = append(out.Instances, Instance{InstanceID: m.inst.ID, InstanceType: m.inst.InstanceType, UsageClass: m.inst.UsageClass, Source: m.source,
			ClaimedSeconds: m.claimed, ConfiguredSeconds: m.configured, ReadySeconds: m.ready})
		if m.source == "reused" {
			out.Reused++
		} else {
			out.Created++
		}
	}
	out.UsageClass = p.req.UsageClass
	p.mu.Lock()
	out.ClaimsRefused = p.refused
	p.mu.Unlock()
	out.ElapsedSeconds = time.Since(p.start).Seconds()
	out.QueuedSeconds = p.queued.Seconds()
	return out
}
