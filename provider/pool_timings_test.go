package provider

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

// timingsPool is a pool model with the given user timings and what the
// user data needs.
func timingsPool(timings types.Object) poolModel {
	return poolModel{Timings: timings, Proxy: types.ObjectNull(poolProxyType.AttrTypes), AgentEndpoints: types.MapNull(types.StringType),
		AgentEndpoint: types.StringNull(), AgentPath: types.StringNull(), RunnerUser: types.StringValue("ghrunner"),
		PreRunnerScript: types.StringNull(), CleanupScript: types.StringNull(), RunnerVersion: types.StringNull(), RunnerTarballURL: types.StringNull(),
		RunnerTarballSHA: types.StringNull(), InstanceRoleID: types.StringValue("AROAPOOLTIMINGS000001"), LogGroup: types.StringValue("/ghrunner/prod/linux"),
		InstanceTypes: types.ListNull(types.StringType), SubnetIDs: types.ListNull(types.StringType), IdleWindows: types.ListNull(idleWindowType),
		ScaleSet: types.ObjectNull(scaleSetType.AttrTypes)}
}

// Issue 39 item 10: the pool config item and the agent's heartbeat in the
// user data carry state.DeriveTimings of the pool's five user timings, and
// the item reads back as those five, so a refresh shows no change.
func TestAPoolsConfigItemAndUserDataCarryTheTimingsDerivedFromItsUserTimings(t *testing.T) {
	for _, l := range []state.Lifecycle{state.DefaultLifecycle(), {MaxRuntime: 60, RuntimeCap: 120, IdleTTL: 600, MaxAge: 3600, MaxUses: 1}} {
		m := timingsPool(timingsObject(l))
		cfg, diags := poolConfigOf(t.Context(), m)
		if diags.HasError() {
			t.Fatal(diags)
		}
		if want := state.DeriveTimings(l); cfg.Timings != want {
			t.Fatalf("config item timings %+v, want %+v", cfg.Timings, want)
		}
		r := &poolResource{configured{c: &clients{}}}
		raw, err := r.userData(m, "amd64", "ghr-state", "eu-west-1", strings.Repeat("0", 64), r.objectURL(m, "ghr-prod-agent-1", "agent/abc/ghrunner-agent"))
		if err != nil {
			t.Fatal(err)
		}
		u, err := templates.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := u.Agent.HeartbeatInterval.Duration, time.Duration(cfg.Timings.HeartbeatInterval)*time.Second; got != want {
			t.Errorf("the agent's heartbeat %s, want the derived %s", got, want)
		}
		var back poolModel
		back.setTimings(cfg.Timings)
		if !back.Timings.Equal(m.Timings) {
			t.Errorf("read back %s, set %s", back.Timings, m.Timings)
		}
	}
}

// A pool whose user timings are unset (null) gets the production values.
func TestAPoolWithoutTimingsGetsTheProductionValues(t *testing.T) {
	cfg, diags := poolConfigOf(t.Context(), timingsPool(types.ObjectNull(poolTimingsType.AttrTypes)))
	if diags.HasError() {
		t.Fatal(diags)
	}
	if cfg.Timings != state.DefaultTimings() {
		t.Fatalf("config item timings %+v, want %+v", cfg.Timings, state.DefaultTimings())
	}
}
