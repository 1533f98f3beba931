package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	tfresource "github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// A stopped tier holds on-demand instances only (issue 41): the plan
// refuses it, naming the field and the rule, for a pool whose instances
// are all spot; a spot pool with on-demand fallback, or an on-demand
// pool, may have one.
func TestAStoppedTierIsRefusedAtPlanForAPoolOfSpotInstancesOnly(t *testing.T) {
	ctx := context.Background()
	tier := tftypes.NewValue(tftypes.Object{AttributeTypes: map[string]tftypes.Type{"max": tftypes.Number, "keep_seconds": tftypes.Number}},
		map[string]tftypes.Value{"max": tftypes.NewValue(tftypes.Number, 2), "keep_seconds": tftypes.NewValue(tftypes.Number, 3600)})
	str := func(v string) tftypes.Value { return tftypes.NewValue(tftypes.String, v) }
	boolean := func(v bool) tftypes.Value { return tftypes.NewValue(tftypes.Bool, v) }
	unsetString, unsetBool := tftypes.NewValue(tftypes.String, nil), tftypes.NewValue(tftypes.Bool, nil)
	for _, c := range []struct {
		name     string
		class    tftypes.Value
		fallback tftypes.Value
		refused  bool
	}{
		{"spot without fallback", str("spot"), boolean(false), true},
		{"usage class unset (spot) without fallback", unsetString, boolean(false), true},
		{"spot with fallback", str("spot"), boolean(true), false},
		{"spot, fallback unset (on)", str("spot"), unsetBool, false},
		{"on-demand without fallback", str("on-demand"), boolean(false), false},
	} {
		var resp resource.ValidateConfigResponse
		(&poolResource{}).ValidateConfig(ctx, resource.ValidateConfigRequest{Config: poolConfigWith(t, map[string]tftypes.Value{
			"stopped": tier, "usage_class": c.class, "on_demand_fallback": c.fallback, "runner_group": str("ci")})}, &resp)
		refused := false
		for _, d := range resp.Diagnostics.Errors() {
			if wp, ok := d.(interface{ Path() path.Path }); ok && wp.Path().Equal(path.Root("stopped")) && strings.Contains(d.Detail(), "on-demand") {
				refused = true
			}
		}
		if refused != c.refused {
			t.Errorf("%s: refused %v, want %v; diagnostics %v", c.name, refused, c.refused, resp.Diagnostics)
		}
	}
}

// checkStopped asserts the pool config item's stopped tier (nil: none).
func (f poolFixture) checkStopped(want *state.StoppedTier) tfresource.TestCheckFunc {
	return func(*terraform.State) error {
		cfg, err := f.poolConfig()
		if err != nil {
			return err
		}
		switch {
		case want == nil && cfg.Stopped != nil:
			return fmt.Errorf("pool config item's stopped tier %+v, want none", *cfg.Stopped)
		case want != nil && (cfg.Stopped == nil || *cfg.Stopped != *want):
			return fmt.Errorf("pool config item's stopped tier %+v, want %+v", cfg.Stopped, *want)
		}
		return nil
	}
}
