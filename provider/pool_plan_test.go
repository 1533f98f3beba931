package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// poolConfigWith is a pool configuration with every attribute null but set.
func poolConfigWith(t *testing.T, set map[string]tftypes.Value) tfsdk.Config {
	t.Helper()
	ctx := context.Background()
	r := &poolResource{}
	var sr resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sr)
	typ := sr.Schema.Type().TerraformType(ctx).(tftypes.Object)
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		vals[name] = tftypes.NewValue(at, nil)
	}
	for name, v := range set {
		vals[name] = v
	}
	return tfsdk.Config{Schema: sr.Schema, Raw: tftypes.NewValue(typ, vals)}
}

func TestAPoolWithoutSecurityGroupsIsWarnedOfTheVPCDefault(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		sgs  tftypes.Value
		warn bool
	}{
		{"unset", tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, nil), true},
		{"empty", tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, []tftypes.Value{}), true},
		{"set", tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, []tftypes.Value{tftypes.NewValue(tftypes.String, "sg-0123456789abcdef0")}), false},
	} {
		var resp resource.ValidateConfigResponse
		(&poolResource{}).ValidateConfig(ctx, resource.ValidateConfigRequest{Config: poolConfigWith(t, map[string]tftypes.Value{"security_group_ids": c.sgs})}, &resp)
		warned := false
		for _, d := range resp.Diagnostics.Warnings() {
			warned = warned || strings.Contains(d.Summary(), "default security group")
		}
		if warned != c.warn || resp.Diagnostics.HasError() {
			t.Errorf("%s: warned %v, want %v; diagnostics %v", c.name, warned, c.warn, resp.Diagnostics)
		}
	}
}

// An organization pool without a runner group is open to every repository
// the default group admits (issue 16): plan says so; a repository pool has
// no groups, and naming one is an error.
func TestAnOrganizationPoolWithoutARunnerGroupIsWarned(t *testing.T) {
	ctx := context.Background()
	str := func(v string) tftypes.Value { return tftypes.NewValue(tftypes.String, v) }
	null := tftypes.NewValue(tftypes.String, nil)
	for _, c := range []struct {
		name         string
		owner, group tftypes.Value
		warn, err    bool
	}{
		{"organization, no group", str("acme"), null, true, false},
		{"organization, a group", str("acme"), str("ci"), false, false},
		{"repository, no group", str("acme/api"), null, false, false},
		{"repository, a group", str("acme/api"), str("ci"), false, true},
	} {
		var resp resource.ValidateConfigResponse
		(&poolResource{}).ValidateConfig(ctx, resource.ValidateConfigRequest{Config: poolConfigWith(t, map[string]tftypes.Value{
			"owner": c.owner, "runner_group": c.group,
			"security_group_ids": tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, []tftypes.Value{str("sg-0123456789abcdef0")}),
		})}, &resp)
		warned := false
		for _, d := range resp.Diagnostics.Warnings() {
			warned = warned || strings.Contains(d.Summary(), "default group")
		}
		if warned != c.warn || resp.Diagnostics.HasError() != c.err {
			t.Errorf("%s: warned %v (want %v), error %v (want %v): %v", c.name, warned, c.warn, resp.Diagnostics.HasError(), c.err, resp.Diagnostics)
		}
	}
}
