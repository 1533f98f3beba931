package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The pool's apply: the steps that make AWS match the plan on create and
// update, in order (image, agent, role, log group, template, config item),
// and the names and tags they give the pool's objects.

// apply makes AWS match plan; prior is nil on create. Every step is
// idempotent, so an interrupted apply can simply be run again.
func (r *poolResource) apply(ctx context.Context, plan, prior *poolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	tableARN, tableKey, err := stateTableARN(ctx, r.c, plan.Table.ValueString())
	if err != nil {
		diags.AddAttributeError(path.Root("table"), "State table not found", err.Error())
		return diags
	}
	if plan.Registration.ValueString() == state.RegistrationJIT {
		if err := tableHasStream(ctx, r.c, plan.Table.ValueString()); err != nil {
			diags.AddAttributeError(path.Root("registration"), "Just-in-time runners need the table's stream", err.Error())
			return diags
		}
	}
	if diags.Append(r.resolveImage(ctx, plan)...); diags.HasError() {
		return diags
	}
	image, err := r.image(ctx, plan.ImageID.ValueString())
	if err != nil {
		diags.AddAttributeError(path.Root("image_id"), "AMI not usable", err.Error())
		return diags
	}
	if diags.Append(r.sameArchitecture(ctx, *plan, image.arch)...); diags.HasError() {
		return diags
	}
	if diags.Append(rootVolumeFits(*plan, image)...); diags.HasError() {
		return diags // an image found at apply (image_family): the plan could not check it
	}
	plan.Architecture = types.StringValue(image.arch)
	tags, d := r.tags(ctx, *plan)
	diags.Append(d...)

	agent, d := r.ensureAgent(ctx, plan, prior, image.arch, tags)
	if diags.Append(d...); diags.HasError() {
		return diags
	}

	// The role, its policy and the instance profile.
	policy, err := agentPolicy(tableARN, tableKey, r.c.environment, plan.Name.ValueString(), plan.AgentBucket.ValueString())
	if err != nil {
		diags.AddError("Building the agent policy failed", err.Error())
		return diags
	}
	var drop []string
	if prior != nil {
		old, _ := r.tags(ctx, *prior)
		drop = droppedTags(old, tags)
	}
	role := r.roleName(*plan)
	profileARN, roleID, created, err := r.ensureInstanceRole(ctx, role, policy, plan.Table.ValueString(), tags, drop)
	if err == nil || created {
		plan.RoleName = types.StringValue(role) // a role not this pool's is never recorded, so never deleted
	}
	if err != nil {
		diags.AddError("Creating the instance role failed", err.Error())
		return diags
	}
	if !plan.InstanceRoleID.IsUnknown() && plan.InstanceRoleID.ValueString() != roleID {
		// The plan read the role's id (ModifyPlan); it changed since.
		diags.AddError("The instance role changed during the apply",
			fmt.Sprintf("role %s has the id %s, the plan read %s: someone replaced it meanwhile. Run terraform apply again: the plan then shows a new template version for the new id.", role, roleID, plan.InstanceRoleID.ValueString()))
		return diags
	}
	plan.InstanceProfileARN, plan.InstanceRoleID = types.StringValue(profileARN), types.StringValue(roleID)

	plan.LogGroup = types.StringValue(poolLogGroup(r.c.environment, plan.Name.ValueString()))
	if err := r.c.ensureLogGroup(ctx, plan.LogGroup.ValueString(), plan.LogRetentionDays.ValueInt64(), tags); err != nil {
		diags.AddAttributeError(path.Root("log_retention_days"), "Creating the pool's log group failed", err.Error())
		return diags
	}

	if diags.Append(r.ensureTemplate(ctx, plan, prior, image, profileARN, agent, tags)...); diags.HasError() {
		return diags
	}

	// The pool config item last: functions only see a pool whose template exists.
	if diags.Append(r.putConfigItem(ctx, *plan)...); diags.HasError() {
		return diags
	}
	// An older agent object stays until the pool is destroyed: instances of
	// the previous template version may still be booting and downloading it.
	return diags
}

// roleName is the pool's role and instance profile name. Its kind, "pool-",
// keeps it apart from the deployment's other roles: without one a pool
// named "listener-task" or "fn-provision" had the listener's or a
// function's role name, and its apply failed on the ownership check.
func (r *poolResource) roleName(m poolModel) string {
	return r.c.roleName("pool-", m.Name.ValueString())
}

// name is the pool's launch template name (regional, so without the
// region; the role's and profile's is clients.roleName).
func (r *poolResource) name(m poolModel) string {
	return iamName("ghr-" + r.c.environment + "-" + m.Name.ValueString())
}

// tags are what the pool's objects carry: the deployment's, the pool's own,
// and ghr:pool naming the pool.
func (r *poolResource) tags(ctx context.Context, m poolModel) (map[string]string, diag.Diagnostics) {
	tags, diags := r.c.resourceTags(ctx, m.Tags)
	tags[tagPool] = m.Name.ValueString()
	return tags, diags
}
