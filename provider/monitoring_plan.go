package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var _ resource.ResourceWithValidateConfig = &monitoringResource{}

// noAlarmTopicSummary is the warning's summary when the alarms notify no one.
const noAlarmTopicSummary = "The alarms notify no one"

// ValidateConfig warns when no topic is given: the alarms then change
// state in CloudWatch, where no one looks until something else has gone
// wrong. A topic that is not known yet (made in the same apply, as the
// runner-pool module's from monitoring.alarm_emails) is a topic.
func (r *monitoringResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	validateScaleSetPools(ctx, req, resp)
	var topic types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("alarm_topic_arn"), &topic)...)
	if resp.Diagnostics.HasError() || !topic.IsNull() {
		return
	}
	resp.Diagnostics.AddAttributeWarning(path.Root("alarm_topic_arn"), noAlarmTopicSummary,
		"alarm_topic_arn is not set, so the alarms (failed provisions, stuck runs, failing refresh or scale-down, "+
			"GitHub's rate limit, a runner version GitHub will refuse, a listener that stopped polling) only change state in CloudWatch: no one is told "+
			"when they fire. Set alarm_topic_arn to an SNS topic someone reads (with the runner-pool module: "+
			"monitoring.alarm_topic_arn, or monitoring.alarm_emails for a topic the module makes), or set the "+
			"module's monitoring to null for no alarms at all.")
}

// validateScaleSetPools refuses a scale_set_pools entry that is not among
// pools: its alarm would watch a pool the dashboard and the other alarms
// know nothing of (a typo, or a pool since removed). Unknown values (from
// other resources) are left to apply.
func validateScaleSetPools(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var pools, sets types.List
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("pools"), &pools)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("scale_set_pools"), &sets)...)
	if resp.Diagnostics.HasError() || pools.IsUnknown() || pools.IsNull() || sets.IsUnknown() || sets.IsNull() {
		return
	}
	known := map[string]bool{}
	for _, v := range pools.Elements() {
		if s, ok := v.(types.String); ok && !s.IsUnknown() {
			known[s.ValueString()] = true
		} else {
			return
		}
	}
	for i, v := range sets.Elements() {
		s, ok := v.(types.String)
		if !ok || s.IsUnknown() || s.IsNull() || known[s.ValueString()] {
			continue
		}
		resp.Diagnostics.AddAttributeError(path.Root("scale_set_pools").AtListIndex(i), "Not a pool of this monitoring",
			fmt.Sprintf("scale_set_pools lists %q, which is not in pools: each must be one of the pools given in pools (a pool with a scale_set).", s.ValueString()))
	}
}
