package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// monitoringConfigWith is a monitoring configuration with every attribute
// null but set.
func monitoringConfigWith(t *testing.T, set map[string]tftypes.Value) tfsdk.Config {
	t.Helper()
	ctx := context.Background()
	var sr resource.SchemaResponse
	(&monitoringResource{}).Schema(ctx, resource.SchemaRequest{}, &sr)
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

// Issue 40 item 4: alarms without a topic notify no one, and plan says so;
// a topic given, or one made in the same apply (unknown at plan), is quiet.
func TestMonitoringWithoutATopicWarnsThatTheAlarmsNotifyNoOne(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		topic tftypes.Value
		warn  bool
	}{
		{"no topic", tftypes.NewValue(tftypes.String, nil), true},
		{"a topic", tftypes.NewValue(tftypes.String, "arn:aws:sns:eu-west-1:123456789012:ci-alarms"), false},
		{"a topic made in the same apply", tftypes.NewValue(tftypes.String, tftypes.UnknownValue), false},
	} {
		var resp resource.ValidateConfigResponse
		(&monitoringResource{}).ValidateConfig(ctx, resource.ValidateConfigRequest{Config: monitoringConfigWith(t, map[string]tftypes.Value{"alarm_topic_arn": c.topic})}, &resp)
		warned := false
		for _, d := range resp.Diagnostics.Warnings() {
			warned = warned || d.Summary() == noAlarmTopicSummary
		}
		if warned != c.warn || resp.Diagnostics.HasError() {
			t.Errorf("%s: warned %v, want %v; diagnostics %v", c.name, warned, c.warn, resp.Diagnostics)
		}
	}
}

// A scale_set_pools entry must be one of pools: plan refuses another,
// naming it; unknown lists are left to apply.
func TestAScaleSetPoolMustBeAPoolOfTheMonitoring(t *testing.T) {
	ctx := context.Background()
	list := func(vals ...string) tftypes.Value {
		var vs []tftypes.Value
		for _, v := range vals {
			vs = append(vs, tftypes.NewValue(tftypes.String, v))
		}
		return tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, vs)
	}
	for _, c := range []struct {
		name        string
		pools, sets tftypes.Value
		refused     bool
	}{
		{"a pool of pools", list("linux", "gpu"), list("gpu"), false},
		{"a pool not in pools", list("linux"), list("linux", "linx"), true},
		{"pools not known yet", tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, tftypes.UnknownValue), list("gpu"), false},
	} {
		var resp resource.ValidateConfigResponse
		(&monitoringResource{}).ValidateConfig(ctx, resource.ValidateConfigRequest{Config: monitoringConfigWith(t, map[string]tftypes.Value{
			"alarm_topic_arn": tftypes.NewValue(tftypes.String, "arn:aws:sns:eu-west-1:123456789012:ci-alarms"), "pools": c.pools, "scale_set_pools": c.sets})}, &resp)
		refused := false
		for _, d := range resp.Diagnostics.Errors() {
			refused = refused || strings.Contains(d.Detail(), `"linx"`) && strings.Contains(d.Detail(), "not in pools")
		}
		if refused != c.refused || (resp.Diagnostics.HasError() && !c.refused) {
			t.Errorf("%s: refused %v, want %v; diagnostics %v", c.name, refused, c.refused, resp.Diagnostics)
		}
	}
}

// Issue 41 item 2: the dashboard charts what cost comes from: each pool's
// stopped instances beside its warm ones, and the usage ledger's spans
// recorded and lost by every function that writes them.
func TestTheDashboardChartsStoppedInstancesAndTheUsageLedger(t *testing.T) {
	body := monitoringSpec{Name: "ci", Environment: "acc", Region: "us-east-1", Pools: []string{"linux"}}.dashboard()
	for _, want := range []string{
		`"InstancesByState","environment","acc","function","refresh","pool","linux","state","stopped"`,
		`"UsageSpansLost","environment","acc","function","release"`,
		`"UsageSpansRecorded","environment","acc","function","scale-down"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks the series %s: %s", want, body)
		}
	}
	listener := `"UsageSpansLost","environment","acc","function","listener"`
	if strings.Contains(body, listener) {
		t.Errorf("a deployment without scale sets charts the listener's spans: %s", body)
	}
	withSets := monitoringSpec{Name: "ci", Environment: "acc", Region: "us-east-1", Pools: []string{"linux"}, ScaleSetPools: []string{"linux"}}.dashboard()
	if !strings.Contains(withSets, listener) {
		t.Errorf("a deployment with a scale set does not chart its listener's spans: %s", withSets)
	}
}
