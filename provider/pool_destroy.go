package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/resource"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
)

// Destroying a pool: Delete's order, the sweep of the pool's instances once
// no launch can start (the config and the template are gone), and the seam
// tests use to act between its steps.

// sweepSettle and sweepEvery: sweepPool lists the pool's live instances
// every sweepEvery and stops once sweepSettle has passed since it last found
// one. A launch that CreateFleet accepted just before the template went is
// visible to DescribeInstances only after a few seconds (its index is
// eventually consistent), so one empty listing proves nothing.
var (
	sweepSettle = 15 * time.Second
	sweepEvery  = 3 * time.Second
)

// poolDeleteStage is called by Delete after each step with the step's name;
// tests set it to act as a provision still running would (a no-op in the
// product).
var poolDeleteStage = func(string) {}

// sweepPool terminates the pool's live instances until none has appeared
// for sweepSettle.
func (r *poolResource) sweepPool(ctx context.Context, pool string) error {
	f := fleet.New(r.c.aws.EC2(), r.c.environment)
	quiet := time.Now()
	for {
		live, err := f.List(ctx, fleet.Filter{Pool: pool})
		if err != nil {
			return fmt.Errorf("listing the pool's instances: %w", err)
		}
		if len(live) > 0 {
			ids := make([]string, len(live))
			for i, in := range live {
				ids[i] = in.ID
			}
			tflog.Info(ctx, "terminating the pool's instances", map[string]any{"pool": pool, "instances": ids})
			if _, err := f.Terminate(ctx, ids); err != nil {
				return err
			}
			quiet = time.Now()
		}
		if time.Since(quiet) >= sweepSettle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(sweepEvery):
		}
	}
}

// Delete fences the pool off, then sweeps it: the pool config goes first
// (no provision that starts now sees the pool), then the launch template (a
// provision that read the config before, and is still running, can no
// longer launch: CreateFleet refuses a template that is gone), then the
// pool's instances are terminated until a settle period passes with none
// new (sweepPool), then the bucket and the role. Terminating before the
// template was gone would leave whatever a running provision launched after
// the listing. Each step tolerates what is already gone.
func (r *poolResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st poolModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.deleteConfigItem(ctx, st); err != nil {
		resp.Diagnostics.AddError("Deleting the pool config failed", err.Error())
		return
	}
	poolDeleteStage("config deleted")
	if id := st.LaunchTemplateID.ValueString(); id != "" {
		if err := r.deleteTemplate(ctx, id); err != nil {
			resp.Diagnostics.AddError("Deleting the launch template failed", err.Error())
			return
		}
	}
	poolDeleteStage("template deleted")
	if err := r.sweepPool(ctx, st.Name.ValueString()); err != nil {
		resp.Diagnostics.AddError("Terminating the pool's instances failed", err.Error())
		return
	}
	poolDeleteStage("instances terminated")
	if b := st.AgentBucket.ValueString(); b != "" {
		if err := r.deleteBucket(ctx, b); err != nil {
			resp.Diagnostics.AddError("Deleting the agent bucket failed", err.Error())
			return
		}
	}
	// The log group last but the role: an instance ending during the sweep
	// still sends its last lines.
	if err := r.c.deleteLogGroup(ctx, poolLogGroup(r.c.environment, st.Name.ValueString())); err != nil {
		resp.Diagnostics.AddError("Deleting the pool's log group failed", err.Error())
		return
	}
	if name := st.RoleName.ValueString(); name != "" {
		if err := r.deleteInstanceRole(ctx, name); err != nil {
			resp.Diagnostics.AddError("Deleting the instance role failed", err.Error())
			return
		}
	}
}
