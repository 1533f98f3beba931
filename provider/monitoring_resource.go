package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/float64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/float64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

var (
	_ resource.Resource                = &monitoringResource{}
	_ resource.ResourceWithConfigure   = &monitoringResource{}
	_ resource.ResourceWithImportState = &monitoringResource{}
)

func newMonitoringResource() resource.Resource { return &monitoringResource{} }

// monitoringResource is ghrunner_monitoring: a CloudWatch dashboard of the
// functions' metrics and the alarms a platform team pages on
// (monitoring_spec.go says which), for the provider's environment.
type monitoringResource struct{ configured }

type monitoringModel struct {
	ID           types.String  `tfsdk:"id"`
	Name         types.String  `tfsdk:"name"`
	Pools        types.List    `tfsdk:"pools"`
	TopicARN     types.String  `tfsdk:"alarm_topic_arn"`
	MissRatio    types.Float64 `tfsdk:"pool_miss_ratio_threshold"`
	RateLimitLow types.Int64   `tfsdk:"github_rate_limit_threshold"`
	ScaleSets    types.List    `tfsdk:"scale_set_pools"`
	Functions    types.Map     `tfsdk:"functions"`
	AlarmNames   types.List    `tfsdk:"alarm_names"`
}

var (
	monitoringNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,200}$`)
	snsTopicARNRE    = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$`)
)

func (r *monitoringResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_monitoring"
}

func (r *monitoringResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A CloudWatch dashboard of the functions' metrics (time to runners, pool hits and misses, each instance's way to ready, release, terminations by reason, instances by state, the usage ledger the cost report reads, errors, GitHub's rate limit) " +
			"and alarms: per pool, a failed provision, a stuck run (a run held an instance past its lease) and a high pool-miss ratio; for the deployment, refresh repairs, failing refresh or scale-down runs, a low GitHub rate limit, with `functions` each function's invocations that died before writing their outcome, and, with `listener`, a scale-set listener that stopped polling. " +
			"Metrics of the provider's environment only. Missing data never alarms, but for the listener's polls.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The dashboard name.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, Description: "The dashboard's name and the alarms' prefix (`<name>-provision-failures-<pool>`, …).",
				Validators:    []validator.String{stringvalidator.RegexMatches(monitoringNameRE, "must be 1-200 characters of A-Z a-z 0-9 _ -")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"pools": schema.ListAttribute{Required: true, ElementType: types.StringType, Description: "The pools to chart and alarm on (the ghrunner_pool names).",
				Validators: []validator.List{listvalidator.SizeAtLeast(1), listvalidator.UniqueValues(),
					listvalidator.ValueStringsAre(stringvalidator.RegexMatches(poolNameRE, "must be a pool name (1-64 letters, digits, '-' or '_', as ghrunner_pool's name)"))}},
			"alarm_topic_arn": schema.StringAttribute{Optional: true, Description: "SNS topic the alarms notify when they fire and when they clear. Without it the alarms only change state, and plan warns that they notify no one.",
				Validators: []validator.String{stringvalidator.RegexMatches(snsTopicARNRE, "must be the ARN of an SNS topic (arn:aws:sns:REGION:ACCOUNT:NAME)")}},
			"pool_miss_ratio_threshold": schema.Float64Attribute{Optional: true, Computed: true, Default: float64default.StaticFloat64(0.5),
				Description: "A pool alarms when more than this share of the runners it gave in an hour were launched rather than reused (0-1). Default 0.5.",
				Validators:  []validator.Float64{float64validator.Between(0, 1)}},
			"github_rate_limit_threshold": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(500),
				Description: "The deployment alarms when GitHub's API rate limit left falls below this. Default 500.",
				Validators:  []validator.Int64{int64validator.AtLeast(1)}},
			"scale_set_pools": schema.ListAttribute{Optional: true, Computed: true, ElementType: types.StringType,
				Default: listdefault.StaticValue(types.ListValueMust(types.StringType, []attr.Value{})),
				Description: "The pools of `pools` that serve a scale set (the listener polls their sessions): per pool an alarm `<name>-listener-polls-<pool>` fires when no poll of its scale set's session answered for 2 minutes in a row, " +
					"missing data breaching (a listener that died writes nothing), and the dashboard charts the listener's polls and those scale sets' jobs. One per scale set: a listener that serves one scale set while GitHub refuses another's session still alarms. Default none.",
				Validators: []validator.List{listvalidator.UniqueValues(), listvalidator.ValueStringsAre(stringvalidator.RegexMatches(poolNameRE, "must be a pool name (1-64 letters, digits, '-' or '_', as ghrunner_pool's name)"))}},
			"functions": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				Description: "The deployment's Lambda functions by handler (`provision`, `jit`, `release`, `refresh`, `scale-down` → `ghrunner_function.name`): an alarm `<name>-lambda-errors-<handler>` per function on the failed invocations Lambda's own `Errors` metric counts (`AWS/Lambda`, dimension `FunctionName`) and ghrunner's `Errors` does not, " +
					"a metric math alarm: an invocation that died before writing ghrunner's metrics (an init that exits, a timeout, out of memory), never a failure the function wrote down (a refused payload, which any workflow can send, pages no one). " +
					"It fires on one within 5 minutes; for `refresh` and `scale-down`, when three 10-minute periods in a row each had one. Missing data (no invocation) does not alarm.",
				Validators: []validator.Map{mapvalidator.KeysAre(stringvalidator.OneOf(handlers...)),
					mapvalidator.ValueStringsAre(stringvalidator.RegexMatches(functionNameRE, "must be a function name (1-64 letters, digits, '-' or '_', as ghrunner_function's name)"))}},
			"alarm_names": schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: "The alarms made."},
		},
	}
}

func (r *monitoringResource) spec(ctx context.Context, m monitoringModel) (monitoringSpec, error) {
	var pools []string
	if d := m.Pools.ElementsAs(ctx, &pools, false); d.HasError() {
		return monitoringSpec{}, fmt.Errorf("pools: %v", d)
	}
	var functions map[string]string
	if d := m.Functions.ElementsAs(ctx, &functions, false); d.HasError() {
		return monitoringSpec{}, fmt.Errorf("functions: %v", d)
	}
	var scaleSets []string
	if d := m.ScaleSets.ElementsAs(ctx, &scaleSets, false); d.HasError() {
		return monitoringSpec{}, fmt.Errorf("scale_set_pools: %v", d)
	}
	return monitoringSpec{Name: m.Name.ValueString(), Environment: r.c.environment, Region: r.c.aws.AWS.Region, Pools: pools,
		TopicARN: m.TopicARN.ValueString(), MissRatio: m.MissRatio.ValueFloat64(), RateLimitLow: m.RateLimitLow.ValueInt64(), ScaleSetPools: scaleSets,
		Functions: functions}, nil
}

// put writes the dashboard and every alarm (both are upserts) and removes
// alarms of pools no longer listed (prior: the state before an update).
func (r *monitoringResource) put(ctx context.Context, plan *monitoringModel, prior *monitoringModel) error {
	s, err := r.spec(ctx, *plan)
	if err != nil {
		return err
	}
	cw := admin.CloudWatch(r.c.aws)
	if _, err := cw.PutDashboard(ctx, &cloudwatch.PutDashboardInput{DashboardName: aws.String(s.Name), DashboardBody: aws.String(s.dashboard())}); err != nil {
		return fmt.Errorf("put dashboard %s: %w", s.Name, err)
	}
	for _, a := range s.alarms() {
		if _, err := cw.PutMetricAlarm(ctx, &a); err != nil {
			return fmt.Errorf("put alarm %s: %w", aws.ToString(a.AlarmName), err)
		}
	}
	names := s.alarmNames()
	if prior != nil {
		var old []string
		prior.AlarmNames.ElementsAs(ctx, &old, false)
		var gone []string
		for _, n := range old {
			if !slices.Contains(names, n) {
				gone = append(gone, n)
			}
		}
		if len(gone) > 0 {
			if _, err := cw.DeleteAlarms(ctx, &cloudwatch.DeleteAlarmsInput{AlarmNames: gone}); err != nil {
				return fmt.Errorf("delete alarms %v: %w", gone, err)
			}
		}
	}
	plan.ID = plan.Name
	plan.AlarmNames, _ = types.ListValueFrom(ctx, types.StringType, names)
	return nil
}

func (r *monitoringResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan monitoringModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.put(ctx, &plan, nil); err != nil {
		resp.Diagnostics.AddError("Creating the monitoring failed", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Read removes the resource when the dashboard or any alarm is gone: the
// next apply writes them all again.
func (r *monitoringResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st monitoringModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	found, err := r.read(ctx, &st)
	if err != nil {
		resp.Diagnostics.AddError("Reading the monitoring failed", err.Error())
		return
	}
	if !found {
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *monitoringResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, st monitoringModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.put(ctx, &plan, &st); err != nil {
		resp.Diagnostics.AddError("Updating the monitoring failed", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *monitoringResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st monitoringModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	cw := admin.CloudWatch(r.c.aws)
	var names []string
	st.AlarmNames.ElementsAs(ctx, &names, false)
	if len(names) > 0 {
		if _, err := cw.DeleteAlarms(ctx, &cloudwatch.DeleteAlarmsInput{AlarmNames: names}); awserr.IgnoreNotFound(err) != nil {
			resp.Diagnostics.AddError("Deleting the alarms failed", err.Error())
			return
		}
	}
	_, err := cw.DeleteDashboards(ctx, &cloudwatch.DeleteDashboardsInput{DashboardNames: []string{st.ID.ValueString()}})
	if awserr.IgnoreNotFound(err) != nil {
		resp.Diagnostics.AddError("Deleting the dashboard failed", err.Error())
	}
}

// ImportState takes the dashboard name; Read finds the pools and the
// settings from the alarms.
func (r *monitoringResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}

// read fills m from the dashboard and its alarms; found is false when the
// dashboard or an alarm it should have is gone.
func (r *monitoringResource) read(ctx context.Context, m *monitoringModel) (bool, error) {
	cw := admin.CloudWatch(r.c.aws)
	name := m.ID.ValueString()
	if _, err := cw.GetDashboard(ctx, &cloudwatch.GetDashboardInput{DashboardName: aws.String(name)}); awserr.IsNotFound(err) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	found := map[string]cloudwatchAlarm{}
	p := cloudwatch.NewDescribeAlarmsPaginator(cw, &cloudwatch.DescribeAlarmsInput{AlarmNamePrefix: aws.String(name + "-")})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return false, err
		}
		for _, a := range out.MetricAlarms {
			dims := a.Dimensions
			for _, q := range a.Metrics { // a metric math alarm's metrics
				if q.MetricStat != nil && q.MetricStat.Metric != nil {
					dims = append(dims, q.MetricStat.Metric.Dimensions...)
				}
			}
			found[aws.ToString(a.AlarmName)] = cloudwatchAlarm{actions: a.AlarmActions, threshold: aws.ToFloat64(a.Threshold), dimensions: dims}
		}
	}
	// The pools are the ones with a provision-failure alarm (an import
	// knows nothing else); the settings come back from their alarms.
	var pools []string
	prefix := name + "-provision-failures-"
	for n := range found {
		if pool, ok := strings.CutPrefix(n, prefix); ok {
			pools = append(pools, pool)
		}
	}
	if len(pools) == 0 {
		return false, nil
	}
	if !m.Pools.IsNull() && !m.Pools.IsUnknown() {
		var want []string
		m.Pools.ElementsAs(ctx, &want, false)
		slices.Sort(pools)
		if slices.Equal(slices.Sorted(slices.Values(want)), pools) {
			pools = want // keep the configuration's order
		}
	} else {
		slices.Sort(pools)
	}
	m.Name = types.StringValue(name)
	m.Pools, _ = types.ListValueFrom(ctx, types.StringType, pools)
	rate := found[name+"-github-rate-limit"]
	miss := found[name+"-pool-misses-"+pools[0]]
	m.MissRatio, m.RateLimitLow = types.Float64Value(miss.threshold), types.Int64Value(int64(rate.threshold))
	scaleSets := []string{} // an empty list, as the default, never null
	for n := range found {
		if pool, ok := strings.CutPrefix(n, name+"-listener-polls-"); ok {
			scaleSets = append(scaleSets, pool)
		}
	}
	slices.Sort(scaleSets)
	m.ScaleSets, _ = types.ListValueFrom(ctx, types.StringType, scaleSets)
	// The state's functions, whose alarms must all be there; on import,
	// the ones with a Lambda errors alarm, by its handler and FunctionName.
	if m.Functions.IsNull() || m.Functions.IsUnknown() {
		functions := map[string]string{}
		for n, a := range found {
			handler, ok := strings.CutPrefix(n, name+lambdaErrorsAlarmPrefix)
			for _, d := range a.dimensions {
				if ok && aws.ToString(d.Name) == "FunctionName" {
					functions[handler] = aws.ToString(d.Value)
				}
			}
		}
		m.Functions = types.MapNull(types.StringType)
		if len(functions) > 0 {
			m.Functions, _ = types.MapValueFrom(ctx, types.StringType, functions)
		}
	}
	m.TopicARN = types.StringNull()
	if len(rate.actions) > 0 {
		m.TopicARN = types.StringValue(rate.actions[0])
	}
	s, err := r.spec(ctx, *m)
	if err != nil {
		return false, err
	}
	for _, n := range s.alarmNames() {
		if _, ok := found[n]; !ok {
			return false, nil // an alarm was deleted outside Terraform
		}
	}
	m.AlarmNames, _ = types.ListValueFrom(ctx, types.StringType, s.alarmNames())
	return true, nil
}

type cloudwatchAlarm struct {
	actions    []string
	threshold  float64
	dimensions []cwtypes.Dimension
}
