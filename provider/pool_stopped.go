package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The pool's stopped tier (issue 41, state/stoppedtier.go): its schema,
// its round trip through the pool config item, and its plan rule. Its own
// file so that the pool's other attributes can change beside it.

// stoppedTier is the pool's `stopped`.
type stoppedTier struct {
	Max         types.Int64 `tfsdk:"max"`
	KeepSeconds types.Int64 `tfsdk:"keep_seconds"`
}

var stoppedTierType = types.ObjectType{AttrTypes: map[string]attr.Type{"max": types.Int64Type, "keep_seconds": types.Int64Type}}

// stoppedAttribute is the schema of `stopped`.
func stoppedAttribute() schema.Attribute {
	return schema.SingleNestedAttribute{Optional: true,
		Description: "A stopped tier between warm and retired: an idle instance scale-down would retire (beyond the active idle window's count) is stopped instead, " +
			"its EBS volumes kept, while the pool has fewer than `max` stopped; a workflow that finds no warm instance starts a stopped one before it launches a new one. " +
			"A stopped instance past `keep_seconds` is terminated. Only on-demand instances are stopped: the pool's spot instances come from one-time requests, which EC2 cannot stop, " +
			"so the plan refuses the tier for `usage_class = \"spot\"` without `on_demand_fallback`. Stopped instances count against `max_instances`. Unset: idle instances are terminated.",
		Attributes: map[string]schema.Attribute{
			"max": schema.Int64Attribute{Required: true, Description: "Most instances of the pool stopped at once.",
				Validators: []validator.Int64{int64validator.Between(1, 10000)}},
			"keep_seconds": schema.Int64Attribute{Required: true, Description: "How long a stopped instance is kept before it is terminated (at least 60).",
				Validators: []validator.Int64{int64validator.AtLeast(60)}},
		}}
}

// stopped returns the stopped tier, or nil when there is none or it is unknown.
func (m poolModel) stopped(ctx context.Context) (*stoppedTier, diag.Diagnostics) {
	if m.Stopped.IsUnknown() || m.Stopped.IsNull() {
		return nil, nil
	}
	var out stoppedTier
	d := m.Stopped.As(ctx, &out, basetypes.ObjectAsOptions{})
	return &out, d
}

// stoppedConfig is the pool config item's tier of m's.
func stoppedConfig(ctx context.Context, m poolModel) (*state.StoppedTier, diag.Diagnostics) {
	st, d := m.stopped(ctx)
	if st == nil || d.HasError() {
		return nil, d
	}
	return &state.StoppedTier{Max: int(st.Max.ValueInt64()), KeepSeconds: st.KeepSeconds.ValueInt64()}, d
}

// stoppedValue is the attribute's value of the pool config item's tier.
func stoppedValue(ctx context.Context, t *state.StoppedTier) types.Object {
	if t == nil {
		return types.ObjectNull(stoppedTierType.AttrTypes)
	}
	v, _ := types.ObjectValueFrom(ctx, stoppedTierType.AttrTypes, stoppedTier{Max: types.Int64Value(int64(t.Max)), KeepSeconds: types.Int64Value(t.KeepSeconds)})
	return v
}

// validateStopped refuses a stopped tier no instance of the pool could
// enter (state.StoppedTierNeedsOnDemand).
func validateStopped(ctx context.Context, m poolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	st, d := m.stopped(ctx)
	diags.Append(d...)
	if st == nil || m.UsageClass.IsUnknown() || m.OnDemandFallback.IsUnknown() {
		return diags
	}
	// Unset, usage_class is spot and on_demand_fallback true (their
	// defaults in the schema).
	spot := m.UsageClass.IsNull() || m.UsageClass.ValueString() == state.UsageClassSpot
	if spot && !m.OnDemandFallback.IsNull() && !m.OnDemandFallback.ValueBool() {
		diags.AddAttributeError(path.Root("stopped"), "A stopped tier needs on-demand instances",
			"stopped is set but usage_class is \"spot\" and on_demand_fallback is false: "+state.StoppedTierNeedsOnDemand)
	}
	return diags
}
