package provider

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// A pool's timings: the five its user decides (state.Lifecycle), nested
// as the runner-pool module nests them. The control loop's own timings
// (heartbeat, stale-after, boot time, minimum running time, the leases of
// new and claimed instances, release's wait) are derived from them by
// state.DeriveTimings when the config item is written, and never set here.

var poolTimingsType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"max_runtime_seconds": types.Int64Type, "runtime_cap_seconds": types.Int64Type, "idle_ttl_seconds": types.Int64Type,
	"max_age_seconds": types.Int64Type, "max_uses": types.Int64Type}}

// timingsObject is l as the timings attribute.
func timingsObject(l state.Lifecycle) types.Object {
	return types.ObjectValueMust(poolTimingsType.AttrTypes, map[string]attr.Value{
		"max_runtime_seconds": types.Int64Value(l.MaxRuntime), "runtime_cap_seconds": types.Int64Value(l.RuntimeCap),
		"idle_ttl_seconds": types.Int64Value(l.IdleTTL), "max_age_seconds": types.Int64Value(l.MaxAge), "max_uses": types.Int64Value(int64(l.MaxUses))})
}

func poolTimingsAttribute() schema.SingleNestedAttribute {
	d := state.DefaultLifecycle()
	seconds := func(desc string, def int64, min int64) schema.Int64Attribute {
		return schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(def),
			Description: fmt.Sprintf("%s Default %d.", desc, def), Validators: []validator.Int64{int64validator.AtLeast(min)}}
	}
	return schema.SingleNestedAttribute{Optional: true, Computed: true, Default: objectdefault.StaticValue(timingsObject(d)),
		Description: "How long the pool's instances live and serve. The control loop's own timings follow from these (docs/design.md, Timings): " +
			"at the default one-hour `max_runtime_seconds` or longer they are the production values (15 s agent heartbeats, an agent silent for 60 s is stale, " +
			"10 minutes for a new instance to register, 5 for a claimed one, 5 minutes of boot time and of minimum running time, 2 minutes of release wait); " +
			"a shorter `max_runtime_seconds` shortens each in proportion, down to a floor (1 s heartbeats at 60 s). " +
			"They are not settable: Terraform drops, without an error, an attribute of `timings` not listed here.",
		Attributes: map[string]schema.Attribute{
			"max_runtime_seconds": seconds("Lease of a running instance; the agent renews it while its runner is alive, up to runtime_cap_seconds.", d.MaxRuntime, 60),
			"runtime_cap_seconds": seconds("Longest one run may hold an instance, however long its jobs run (≥ max_runtime_seconds; 6 h is GitHub's limit for one job).", d.RuntimeCap, 60),
			"idle_ttl_seconds":    seconds("Lease of an idle instance in the pool (scale-down renews the kept ones).", d.IdleTTL, 60),
			"max_age_seconds":     seconds("Instances older than this are not reused.", d.MaxAge, 60),
			"max_uses":            seconds("Runs an instance serves before it is retired.", int64(d.MaxUses), 1),
		}}
}

// lifecycle is the pool's user-set timings; ok is false while a part is not
// known yet. A null or unset part is the default.
func (m poolModel) lifecycle() (l state.Lifecycle, ok bool) {
	if m.Timings.IsUnknown() {
		return l, false
	}
	get := func(name string) (int64, bool) {
		v, _ := m.Timings.Attributes()[name].(types.Int64)
		return v.ValueInt64(), !v.IsUnknown()
	}
	var ok1, ok2, ok3, ok4, ok5 bool
	l.MaxRuntime, ok1 = get("max_runtime_seconds")
	l.RuntimeCap, ok2 = get("runtime_cap_seconds")
	l.IdleTTL, ok3 = get("idle_ttl_seconds")
	l.MaxAge, ok4 = get("max_age_seconds")
	var uses int64
	uses, ok5 = get("max_uses")
	l.MaxUses = int(uses)
	return l, ok1 && ok2 && ok3 && ok4 && ok5
}

// timings is the pool's full Timings, the derived ones included.
func (m poolModel) timings() state.Timings {
	l, _ := m.lifecycle()
	return state.DeriveTimings(l)
}

// setTimings refreshes the timings attribute from the config item's.
func (m *poolModel) setTimings(t state.Timings) {
	m.Timings = timingsObject(state.LifecycleOf(t.WithDefaults()))
}
