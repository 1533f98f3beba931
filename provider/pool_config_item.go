package provider

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The pool config item: the pool's settings in the state table, which the
// functions read at run time, so a change applies without redeploying them.
// It is written last on apply and deleted first on destroy: a function only
// ever sees a pool whose launch template exists.

// idleWindow is one of the item's idle windows (scale-down reads them).
type idleWindow struct {
	Cron             types.String `tfsdk:"cron"`
	TimeZone         types.String `tfsdk:"time_zone"`
	IdleCount        types.Int64  `tfsdk:"idle_count"`
	EvictionStrategy types.String `tfsdk:"eviction_strategy"`
}

var idleWindowType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"cron": types.StringType, "time_zone": types.StringType, "idle_count": types.Int64Type, "eviction_strategy": types.StringType}}

// windows returns the idle windows, or nil while they are unknown.
func (m poolModel) windows(ctx context.Context) ([]idleWindow, diag.Diagnostics) {
	if m.IdleWindows.IsUnknown() || m.IdleWindows.IsNull() {
		return nil, nil
	}
	var out []idleWindow
	d := m.IdleWindows.ElementsAs(ctx, &out, false)
	return out, d
}

// scaleSet is the pool's scale_set.
type scaleSet struct {
	Name       types.String `tfsdk:"name"`
	MaxRunners types.Int64  `tfsdk:"max_runners"`
}

var scaleSetType = types.ObjectType{AttrTypes: map[string]attr.Type{"name": types.StringType, "max_runners": types.Int64Type}}

// scaleSet returns the scale set, or nil when there is none or it is unknown.
func (m poolModel) scaleSet(ctx context.Context) (*scaleSet, diag.Diagnostics) {
	if m.ScaleSet.IsUnknown() || m.ScaleSet.IsNull() {
		return nil, nil
	}
	var out scaleSet
	d := m.ScaleSet.As(ctx, &out, basetypes.ObjectAsOptions{})
	return &out, d
}

// putConfigItem writes the pool config item of m.
func (r *poolResource) putConfigItem(ctx context.Context, m poolModel) diag.Diagnostics {
	cfg, diags := poolConfigOf(ctx, m)
	tags, d := r.tags(ctx, m)
	diags.Append(d...)
	if diags.HasError() {
		return diags
	}
	zones, err := r.subnetZones(ctx, cfg.SubnetIDs)
	if err != nil {
		diags.AddAttributeError(path.Root("subnet_ids"), "Subnets not usable", err.Error())
		return diags
	}
	cfg.SubnetZones = zones
	for k, v := range tags {
		if !strings.HasPrefix(k, "ghr:") { // a launch adds its own
			if cfg.Tags == nil {
				cfg.Tags = map[string]string{}
			}
			cfg.Tags[k] = v
		}
	}
	// A drain is the operator's (ghrunner drain), not the configuration's:
	// an apply keeps it.
	old, err := r.getConfigItem(ctx, m.Table.ValueString(), cfg.Name)
	if err != nil {
		diags.AddError("Reading the pool config failed", err.Error())
		return diags
	}
	if old != nil {
		cfg.Draining = old.Draining
	}
	if diags.Append(r.scaleSetFree(ctx, m.Table.ValueString(), cfg)...); diags.HasError() {
		return diags
	}
	if err := state.New(r.c.aws.DynamoDB(), m.Table.ValueString()).PutPoolConfig(ctx, cfg); err != nil {
		diags.AddError("Writing the pool config failed", err.Error())
	}
	return diags
}

// scaleSetFree refuses a scale set another pool of the table already
// serves for the same owner: runs-on is case-insensitive, so two pools
// naming one scale set would take each other's jobs. The plan cannot
// check it (a pool sees no other pool's configuration, and pools created
// in one apply are written side by side): two pools created in the same
// apply can both pass this check; that case is left to the listener.
func (r *poolResource) scaleSetFree(ctx context.Context, table string, cfg state.PoolConfig) diag.Diagnostics {
	var diags diag.Diagnostics
	if cfg.ScaleSet == nil {
		return diags
	}
	pools, err := state.New(r.c.aws.DynamoDB(), table).ListPoolConfigs(ctx)
	if err != nil {
		diags.AddError("Reading the pools failed", err.Error())
		return diags
	}
	for _, p := range pools {
		if p.Name != cfg.Name && p.ScaleSet != nil && strings.EqualFold(p.Owner, cfg.Owner) && strings.EqualFold(p.ScaleSet.Name, cfg.ScaleSet.Name) {
			diags.AddAttributeError(path.Root("scale_set").AtName("name"), "Scale set already served by another pool",
				fmt.Sprintf("pool %q already serves scale set %q of %s (names are compared case-insensitively, as runs-on compares labels): give each pool of one owner its own scale set name", p.Name, p.ScaleSet.Name, p.Owner))
		}
	}
	return diags
}

// subnetZones is the Availability Zone of each subnet: a launch names one
// subnet per AZ in each CreateFleet request (internal/fleet/subnets.go),
// since EC2 refuses a request with two subnets of one AZ.
func (r *poolResource) subnetZones(ctx context.Context, subnets []string) (map[string]string, error) {
	out, err := r.c.aws.EC2().DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: subnets})
	if err != nil {
		return nil, fmt.Errorf("subnet_ids %v: not found in this region, or not readable (%w)", subnets, err)
	}
	zones := make(map[string]string, len(subnets))
	for _, sn := range out.Subnets {
		zones[aws.ToString(sn.SubnetId)] = aws.ToString(sn.AvailabilityZone)
	}
	for _, s := range subnets {
		if zones[s] == "" {
			return nil, fmt.Errorf("subnet_ids: %s not found in this region", s)
		}
	}
	return zones, nil
}

// poolConfigOf is the pool config item of m.
func poolConfigOf(ctx context.Context, m poolModel) (state.PoolConfig, diag.Diagnostics) {
	var diags diag.Diagnostics
	var types_, subnets []string
	diags.Append(m.InstanceTypes.ElementsAs(ctx, &types_, false)...)
	diags.Append(m.SubnetIDs.ElementsAs(ctx, &subnets, false)...)
	cfg := state.PoolConfig{
		Name: m.Name.ValueString(), Owner: m.Owner.ValueString(), QueueURL: m.QueueURL.ValueString(),
		LaunchTemplateID: m.LaunchTemplateID.ValueString(), LaunchTemplateVersion: m.LaunchTemplateVersion.ValueString(),
		InstanceTypes: types_, SubnetIDs: subnets, UsageClass: m.UsageClass.ValueString(), OnDemandFallback: m.OnDemandFallback.ValueBool(),
		MaxInstances: int(m.MaxInstances.ValueInt64()), UpdatedAt: time.Now().Unix(),
		RunnerGroup: m.RunnerGroup.ValueString(), Registration: m.Registration.ValueString(),
		InstanceRoleID:             m.InstanceRoleID.ValueString(),
		MaxProvisionsPerRepository: int(m.MaxProvisionsPR.ValueInt64()), MaxQueuedPerRepository: int(m.MaxQueuedPR.ValueInt64()),
		Timings: m.timings(),
	}
	cfg.Runner = runnerSpecOf(m)
	if !m.RootVolumeSize.IsNull() && !m.RootVolumeSize.IsUnknown() {
		cfg.RootVolume = &state.RootVolume{GiB: int(m.RootVolumeSize.ValueInt64()), Type: cmp.Or(m.RootVolumeType.ValueString(), "gp3")}
	}
	windows, d := m.windows(ctx)
	diags.Append(d...)
	for _, w := range windows {
		cfg.IdleWindows = append(cfg.IdleWindows, state.IdleWindow{Cron: w.Cron.ValueString(), TimeZone: w.TimeZone.ValueString(),
			IdleCount: int(w.IdleCount.ValueInt64()), EvictionStrategy: w.EvictionStrategy.ValueString()})
	}
	ss, d := m.scaleSet(ctx)
	diags.Append(d...)
	if ss != nil {
		cfg.ScaleSet = &state.ScaleSetConfig{Name: ss.Name.ValueString(), MaxRunners: int(ss.MaxRunners.ValueInt64())}
	}
	cfg.Stopped, d = stoppedConfig(ctx, m)
	diags.Append(d...)
	return cfg, diags
}

// getConfigItem returns the pool config item, or nil when it (or its table)
// is gone.
func (r *poolResource) getConfigItem(ctx context.Context, table, name string) (*state.PoolConfig, error) {
	cfg, err := state.New(r.c.aws.DynamoDB(), table).GetPoolConfig(ctx, name)
	if awserr.IsNotFound(err) || state.IsNotFound(err) {
		return nil, nil
	}
	return cfg, err
}

// setFromConfigItem refreshes m from the pool config item.
func (m *poolModel) setFromConfigItem(ctx context.Context, table string, cfg *state.PoolConfig) {
	m.ID = types.StringValue(table + ":" + cfg.Name)
	m.Owner, m.QueueURL = types.StringValue(cfg.Owner), types.StringValue(cfg.QueueURL)
	m.LaunchTemplateID, m.LaunchTemplateVersion = types.StringValue(cfg.LaunchTemplateID), types.StringValue(cfg.LaunchTemplateVersion)
	m.InstanceTypes, _ = types.ListValueFrom(ctx, types.StringType, cfg.InstanceTypes)
	m.SubnetIDs, _ = types.ListValueFrom(ctx, types.StringType, cfg.SubnetIDs)
	m.UsageClass, m.OnDemandFallback = types.StringValue(cfg.UsageClass), types.BoolValue(cfg.OnDemandFallback)
	m.MaxInstances = types.Int64Value(int64(cfg.MaxInstances))
	m.MaxProvisionsPR, m.MaxQueuedPR = optionalInt(cfg.MaxProvisionsPerRepository), optionalInt(cfg.MaxQueuedPerRepository)
	m.RunnerGroup = optional(cfg.RunnerGroup)
	m.Registration = types.StringValue(cmp.Or(cfg.Registration, state.RegistrationToken))
	m.setTimings(cfg.Timings)
	// An empty list in the configuration stays empty, an unset one null.
	if !m.IdleWindows.IsNull() || len(cfg.IdleWindows) > 0 {
		windows := []idleWindow{}
		for _, w := range cfg.IdleWindows {
			windows = append(windows, idleWindow{Cron: types.StringValue(w.Cron), TimeZone: types.StringValue(w.TimeZone),
				IdleCount: types.Int64Value(int64(w.IdleCount)), EvictionStrategy: types.StringValue(w.EvictionStrategy)})
		}
		m.IdleWindows, _ = types.ListValueFrom(ctx, idleWindowType, windows)
	}
	m.ScaleSet = types.ObjectNull(scaleSetType.AttrTypes)
	if ss := cfg.ScaleSet; ss != nil {
		m.ScaleSet, _ = types.ObjectValueFrom(ctx, scaleSetType.AttrTypes, scaleSet{Name: types.StringValue(ss.Name), MaxRunners: optionalInt(ss.MaxRunners)})
	}
	m.Stopped = stoppedValue(ctx, cfg.Stopped)
}

// deleteConfigItem deletes the pool config item; one already gone, or in a
// table already gone, is fine.
func (r *poolResource) deleteConfigItem(ctx context.Context, m poolModel) error {
	err := state.New(r.c.aws.DynamoDB(), m.Table.ValueString()).DeletePoolConfig(ctx, m.Name.ValueString())
	return awserr.IgnoreNotFound(err)
}

// runnerSpecOf is the pool's runner release for the control plane:
// runner_version ("latest" or a pin) with the pool's architecture, and a
// mirror's tarball with a pinned version. A tarball without a pinned
// version (runner_version left at "latest") names no release the control
// plane can judge: such a pool keeps what its user data installs, as before
// pools had a target.
func runnerSpecOf(m poolModel) state.RunnerSpec {
	v, url := m.RunnerVersion.ValueString(), m.RunnerTarballURL.ValueString()
	if v == "" || url != "" && v == runnerrelease.Latest {
		return state.RunnerSpec{}
	}
	return state.RunnerSpec{Version: v, TarballURL: url, TarballSHA256: m.RunnerTarballSHA.ValueString(), Arch: m.Architecture.ValueString()}
}

// optionalInt is an optional number attribute whose 0 means unset.
func optionalInt(v int) types.Int64 {
	if v == 0 {
		return types.Int64Null()
	}
	return types.Int64Value(int64(v))
}
