package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Plan-time work of ghrunner_pool: the checks single-attribute validators
// cannot make, and the plan of what a provider release changes.

// ValidateConfig checks what single-attribute validators cannot: scripts,
// cross-field timings and idle windows, with the same rules the functions
// apply when they read the pool config.
func (r *poolResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m poolModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	windows, _ := m.windows(ctx) // unknown elements are checked at apply
	for i, w := range windows {
		p := path.Root("idle_windows").AtListIndex(i)
		iw := state.IdleWindow{Cron: w.Cron.ValueString(), TimeZone: w.TimeZone.ValueString(), IdleCount: int(w.IdleCount.ValueInt64()), EvictionStrategy: w.EvictionStrategy.ValueString()}
		if iw.TimeZone == "" {
			iw.TimeZone = "UTC"
		}
		if iw.EvictionStrategy == "" {
			iw.EvictionStrategy = "oldest_first"
		}
		if w.Cron.IsUnknown() || w.TimeZone.IsUnknown() {
			continue
		}
		if err := iw.Validate(); err != nil {
			field := map[string]string{"cron": "cron", "timeZone": "time_zone", "idleCount": "idle_count", "evictionStrategy": "eviction_strategy"}[strings.SplitN(err.Error(), ":", 2)[0]]
			resp.Diagnostics.AddAttributeError(p.AtName(field), "Invalid idle window", err.Error())
		}
	}
	if m.SecurityGroupIDs.IsNull() || (!m.SecurityGroupIDs.IsUnknown() && len(m.SecurityGroupIDs.Elements()) == 0) {
		resp.Diagnostics.AddAttributeWarning(path.Root("security_group_ids"), "Instances get the VPC's default security group",
			"security_group_ids is not set, so EC2 gives the pool's instances the default security group of the subnets' VPC, "+
				"which usually admits traffic from everything else in that group. Set a group that allows egress only "+
				"(to GitHub and AWS); the runners need no inbound traffic.")
	}
	// The heartbeat and stale-after are derived with stale-after at least
	// twice the heartbeat (state.DeriveTimings); the cap is the user's.
	if l, ok := m.lifecycle(); ok {
		t := state.DeriveTimings(l)
		if t.RuntimeCap < t.MaxRuntime {
			resp.Diagnostics.AddAttributeError(path.Root("timings").AtName("runtime_cap_seconds"), "Runtime cap below the running lease",
				fmt.Sprintf("timings.runtime_cap_seconds (%d) must be at least timings.max_runtime_seconds (%d): the agent extends the running lease up to the cap", t.RuntimeCap, t.MaxRuntime))
		}
	}
	if owner := m.Owner.ValueString(); owner != "" && !m.Owner.IsUnknown() && !m.RunnerGroup.IsUnknown() {
		switch {
		case strings.Contains(owner, "/") && !m.RunnerGroup.IsNull():
			resp.Diagnostics.AddAttributeError(path.Root("runner_group"), "Runner groups belong to organizations",
				fmt.Sprintf("owner %q is a repository, whose runners are its own: remove runner_group, or make the pool an organization's", owner))
		case !strings.Contains(owner, "/") && m.RunnerGroup.IsNull():
			resp.Diagnostics.AddAttributeWarning(path.Root("runner_group"), "Runners join the organization's default group",
				fmt.Sprintf("Every repository of %s allowed to use the default runner group can send jobs to this pool's runners. "+
					"Create a runner group that lists only this pool's repositories and set runner_group to its name. "+
					"Which repositories a group admits is GitHub's to say, not checkable at plan time: "+
					"preflight with {\"preflight\": true, \"repositories\": [...]} reads the group and says whether it admits yours "+
					"(the default group admits no public repository unless told to).", owner))
		}
	}
	if prov, queued := m.MaxProvisionsPR, m.MaxQueuedPR; !prov.IsNull() && !prov.IsUnknown() && !queued.IsNull() && !queued.IsUnknown() && queued.ValueInt64() > prov.ValueInt64() {
		resp.Diagnostics.AddAttributeError(path.Root("max_queued_per_repository"), "More queue places than provisions in flight",
			fmt.Sprintf("max_queued_per_repository (%d) must be at most max_provisions_per_repository (%d): a waiting provision is in flight", queued.ValueInt64(), prov.ValueInt64()))
	}
	resp.Diagnostics.Append(validateRootVolume(m)...)
	resp.Diagnostics.Append(validateStopped(ctx, m)...)
	if ss, _ := m.scaleSet(ctx); ss != nil {
		// A scale set's jobs come with no provision to mint a runner: the
		// listener asks GitHub for a just-in-time runner per job.
		if reg := m.Registration; !reg.IsUnknown() && reg.ValueString() == state.RegistrationToken {
			resp.Diagnostics.AddAttributeError(path.Root("registration"), "A scale set needs just-in-time runners",
				`scale_set is set and registration is "token": a scale set's runners are just-in-time runners; set registration = "jit" (the default) or remove scale_set`)
		}
		if mr, mi := ss.MaxRunners, m.MaxInstances; !mr.IsNull() && !mr.IsUnknown() && !mi.IsUnknown() {
			if limit := effective(mi, defaultMaxInstances); mr.ValueInt64() > limit {
				resp.Diagnostics.AddAttributeError(path.Root("scale_set").AtName("max_runners"), "More scale set runners than the pool's instances",
					fmt.Sprintf("scale_set.max_runners (%d) must be at most max_instances (%d): each runner of the scale set is an instance of the pool", mr.ValueInt64(), limit))
			}
		}
	}
	if m.RunnerTarballURL.IsNull() != m.RunnerTarballSHA.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("runner_tarball_sha256"), "Runner tarball needs its checksum",
			"set runner_tarball_url and runner_tarball_sha256 together")
	}
	// Render with a stand-in checksum so size limits and script rules fail at
	// plan time, not at apply.
	if m.PreRunnerScript.IsUnknown() || m.CleanupScript.IsUnknown() || m.AgentPath.IsUnknown() || m.AgentEndpoint.IsUnknown() || m.proxyUnrenderable() {
		return
	}
	if v := m.RunnerVersion; !v.IsUnknown() && !v.IsNull() && !m.RunnerTarballURL.IsUnknown() {
		mirrored := !m.RunnerTarballURL.IsNull()
		if err := runnerrelease.ValidateSpec(v.ValueString(), mirrored); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("runner_version"), "Runner release not usable", err.Error())
			return
		}
		if mirrored && v.ValueString() == runnerrelease.Latest {
			resp.Diagnostics.AddAttributeWarning(path.Root("runner_version"), "A mirrored runner without its version",
				"runner_tarball_url is set and runner_version is \"latest\": instances install the mirror's tarball and keep it, and the control plane cannot tell when GitHub stops serving it. Set runner_version to the mirrored release (x.y.z) so the pool's instances move to it and its deadline is watched.")
		}
	}
	if _, err := r.userData(m, "amd64", "table-placeholder", "us-east-1", strings.Repeat("0", 64), "https://bucket.s3.us-east-1.amazonaws.com/agent/x/ghrunner-agent"); err != nil {
		resp.Diagnostics.AddError("Invalid user data settings", err.Error())
	}
}

// ModifyPlan shows a new embedded agent as a change, marks the launch
// template version as changing with its inputs, and refuses to plan a pool
// with a provider built without its agent.
func (r *poolResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan poolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var prior *poolModel
	if !req.State.Raw.IsNull() {
		prior = &poolModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, prior)...)
	}
	if plan.AgentPath.IsNull() {
		arch := "arm64"
		if prior != nil && prior.Architecture.ValueString() != "" {
			arch = prior.Architecture.ValueString()
		}
		a, err := agentAsset(arch)
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("agent_path"), "The provider has no agent to upload", err.Error()+"; or set agent_path to an agent preinstalled in the AMI")
			return
		}
		if prior != nil {
			plan.AgentSHA256 = types.StringValue(a.sha256Hex)
		} else {
			plan.AgentSHA256 = types.StringUnknown() // the AMI's architecture decides
		}
	} else {
		plan.AgentSHA256 = types.StringValue("")
	}
	if prior != nil && !prior.ImageFamily.Equal(plan.ImageFamily) {
		var configured types.String
		resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("image_id"), &configured)...)
		if configured.IsNull() {
			plan.ImageID = types.StringUnknown() // the new family's latest image, found at apply
		}
	}
	if prior != nil && r.c != nil {
		if prior.InstanceRoleID.ValueString() == "" {
			// Read found the role deleted or replaced outside Terraform (a
			// new id): the user data and the pool config must carry the id
			// the apply reads, so the template gets a version.
			plan.InstanceRoleID = types.StringUnknown()
		}
		// Parts Read found gone (pool_drift.go): the apply makes them again.
		if prior.InstanceProfileARN.ValueString() == "" {
			plan.InstanceProfileARN = types.StringUnknown()
		}
		if prior.LaunchTemplateID.ValueString() == "" {
			plan.LaunchTemplateID = types.StringUnknown()
		}
		if plan.AgentPath.IsNull() && prior.AgentBucket.ValueString() == "" {
			plan.AgentBucket = types.StringUnknown()
		}
	}
	if resp.Diagnostics.Append(r.checkRootVolumeAtPlan(ctx, plan)...); resp.Diagnostics.HasError() {
		return
	}
	if prior != nil && prior.LaunchTemplateID.ValueString() != "" && launchTemplateInputs(plan) == launchTemplateInputs(*prior) && plan.AgentSHA256.Equal(prior.AgentSHA256) {
		plan.LaunchTemplateVersion, plan.UserDataSize = prior.LaunchTemplateVersion, prior.UserDataSize
	} else {
		plan.LaunchTemplateVersion, plan.UserDataSize = types.StringUnknown(), types.Int64Unknown()
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// effective is a number attribute's value, or def when it is not set.
func effective(v types.Int64, def int64) int64 {
	if v.IsNull() || v.IsUnknown() {
		return def
	}
	return v.ValueInt64()
}
