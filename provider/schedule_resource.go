package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

var (
	_ resource.Resource                = &scheduleResource{}
	_ resource.ResourceWithConfigure   = &scheduleResource{}
	_ resource.ResourceWithImportState = &scheduleResource{}
)

func newScheduleResource() resource.Resource { return &scheduleResource{} }

// scheduleResource is ghrunner_schedule: an EventBridge Scheduler schedule
// that invokes one of the deployment's functions (refresh, scale-down), with
// a role of its own (schedule_role.go, docs/design.md). A scheduled function
// must neither overlap nor be retried, so the target never retries and the
// time window is always OFF.
type scheduleResource struct{ configured }

type scheduleModel struct {
	ID                 types.String `tfsdk:"id"`
	Name               types.String `tfsdk:"name"`
	FunctionARN        types.String `tfsdk:"function_arn"`
	ScheduleExpression types.String `tfsdk:"schedule_expression"`
	Timezone           types.String `tfsdk:"timezone"`
	Payload            types.String `tfsdk:"payload"`
	Enabled            types.Bool   `tfsdk:"enabled"`
	Description        types.String `tfsdk:"description"`
	Tags               types.Map    `tfsdk:"tags"`
	ARN                types.String `tfsdk:"arn"`
	RoleARN            types.String `tfsdk:"role_arn"`
}

const (
	// scheduleGroup: every schedule lives in the account's default group.
	scheduleGroup = "default"
	// scheduleEventAge bounds how long Scheduler keeps an undelivered tick
	// (60 s is the least it accepts); with no retries a late tick is dropped
	// and the next one runs instead.
	scheduleEventAge = 60
)

var (
	scheduleNameRE = regexp.MustCompile(`^[0-9a-zA-Z_.-]{1,64}$`)
	// A function ARN, optionally qualified by a version or an alias.
	scheduleFunctionARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:lambda:[a-z]{2}(-[a-z]+)+-\d+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:(\$LATEST|[A-Za-z0-9_-]{1,128}))?$`)
)

func (r *scheduleResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_schedule"
}

func (r *scheduleResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "An EventBridge Scheduler schedule (default group) that invokes a Lambda function, with an IAM role of its own " +
			"that may only invoke that function. The target is never retried and the flexible time window is off, so runs do not pile up.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The schedule name.", PlanModifiers: keep},
			"name": schema.StringAttribute{Required: true, Description: "Schedule name, unique in the region's default group.",
				Validators:    []validator.String{stringvalidator.RegexMatches(scheduleNameRE, "must be 1-64 characters of A-Z a-z 0-9 - _ .")},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"function_arn": schema.StringAttribute{Required: true, Description: "ARN of the Lambda function to invoke (a version or alias suffix is allowed).",
				Validators: []validator.String{stringvalidator.RegexMatches(scheduleFunctionARNRE,
					"must be a Lambda function ARN such as arn:aws:lambda:us-east-1:123456789012:function:ghrunner-refresh")}},
			"schedule_expression": schema.StringAttribute{Required: true,
				Description: "When to run, in EventBridge Scheduler syntax: rate(5 minutes), cron(0/5 * * * ? *) (six fields, one of day-of-month and day-of-week is ?) or at(2030-01-31T09:00:00).",
				Validators:  []validator.String{scheduleExpressionValidator{}}},
			"timezone": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("UTC"),
				Description: "IANA time zone the cron and at expressions are read in (rate ignores it).",
				Validators:  []validator.String{scheduleTimezoneValidator{}}},
			"payload": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("{}"),
				Description: "JSON object the function receives as its event.",
				Validators:  []validator.String{schedulePayloadValidator{}}},
			"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				Description: "Whether the schedule runs (state ENABLED or DISABLED)."},
			"description": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(""),
				Description: "Description of the schedule.",
				Validators:  []validator.String{stringvalidator.LengthAtMost(512)}},
			"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: tagValidators(),
				Description: "Tags for the schedule's IAM role, added to the provider's default_tags and ghr:environment (Scheduler schedules themselves cannot be tagged)."},
			"arn": schema.StringAttribute{Computed: true, Description: "Schedule ARN.", PlanModifiers: keep},
			"role_arn": schema.StringAttribute{Computed: true,
				Description:   "ARN of the role Scheduler assumes (ghr-<environment>-<region>-sched-<name>). When the role, its trust or its policy, or the schedule's no-retry and no-time-window settings, were changed outside Terraform the next plan shows an update that restores them.",
				PlanModifiers: []planmodifier.String{scheduleRoleModifier{}}},
		},
	}
}

func (r *scheduleResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan scheduleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	tags, diags := r.tags(ctx, plan)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := plan.Name.ValueString()
	roleName := r.c.roleName("sched-", name)
	roleARN, created, err := r.ensureRole(ctx, roleName, plan.FunctionARN.ValueString(), tags, nil)
	if err != nil {
		if created {
			_ = r.deleteRole(ctx, roleName)
		}
		resp.Diagnostics.AddError("Creating the schedule's role failed", err.Error())
		return
	}
	err = scheduleRetryRoleNotReady(ctx, 2*time.Second, 2*time.Minute, func() error {
		_, err := admin.Scheduler(r.c.aws).CreateSchedule(ctx, &scheduler.CreateScheduleInput{
			Name:                       aws.String(name),
			GroupName:                  aws.String(scheduleGroup),
			ScheduleExpression:         aws.String(plan.ScheduleExpression.ValueString()),
			ScheduleExpressionTimezone: aws.String(plan.Timezone.ValueString()),
			FlexibleTimeWindow:         &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
			Target:                     scheduleTarget(plan, roleARN),
			State:                      scheduleState(plan),
			Description:                scheduleOptional(plan.Description),
		})
		return err
	})
	if err != nil {
		if created {
			_ = r.deleteRole(ctx, roleName) // no schedule uses it
		}
		resp.Diagnostics.AddError("Creating the schedule failed", err.Error())
		return
	}
	found, err := r.read(ctx, name, &plan)
	if err != nil || !found {
		resp.Diagnostics.AddError("Reading the new schedule failed", fmt.Sprint(err))
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *scheduleResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st scheduleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	found, err := r.read(ctx, st.ID.ValueString(), &st)
	if err != nil {
		resp.Diagnostics.AddError("Reading the schedule failed", err.Error())
		return
	}
	if !found {
		resp.State.RemoveResource(ctx) // deleted outside Terraform: plan recreates it
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *scheduleResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, st scheduleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	tags, diags := r.tags(ctx, plan)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	old, _ := r.tags(ctx, st)
	drop := droppedTags(old, tags)
	name := st.ID.ValueString()
	cur, err := r.getSchedule(ctx, name)
	if err != nil {
		resp.Diagnostics.AddError("Reading the schedule failed", err.Error())
		return
	}
	if cur == nil {
		resp.Diagnostics.AddError("Updating the schedule failed", "schedule "+name+" no longer exists; refresh and apply again to recreate it")
		return
	}
	var prevRole string
	if cur.Target != nil {
		prevRole = roleNameOf(aws.ToString(cur.Target.RoleArn))
	}
	// The role may invoke the new function before the schedule points at it.
	roleName := r.c.roleName("sched-", name)
	roleARN, _, err := r.ensureRole(ctx, roleName, plan.FunctionARN.ValueString(), tags, drop)
	if err != nil {
		resp.Diagnostics.AddError("Updating the schedule's role failed", err.Error())
		return
	}
	err = scheduleRetryRoleNotReady(ctx, 2*time.Second, 2*time.Minute, func() error {
		// UpdateSchedule replaces the whole definition: send all of it.
		_, err := admin.Scheduler(r.c.aws).UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
			Name:                       aws.String(name),
			GroupName:                  aws.String(scheduleGroup),
			ScheduleExpression:         aws.String(plan.ScheduleExpression.ValueString()),
			ScheduleExpressionTimezone: aws.String(plan.Timezone.ValueString()),
			FlexibleTimeWindow:         &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
			Target:                     scheduleTarget(plan, roleARN),
			State:                      scheduleState(plan),
			Description:                scheduleOptional(plan.Description),
		})
		return err
	})
	if err != nil {
		resp.Diagnostics.AddError("Updating the schedule failed", err.Error())
		return
	}
	// After a change of environment the schedule moved to a role of the new
	// name: remove the old one if it was this schedule's own.
	if prevRole != "" && prevRole != roleName {
		if err := r.dropOldRole(ctx, prevRole, name); err != nil {
			resp.Diagnostics.AddWarning("Removing the schedule's previous role failed", err.Error())
		}
	}
	found, err := r.read(ctx, name, &plan)
	if err != nil || !found {
		resp.Diagnostics.AddError("Reading the updated schedule failed", fmt.Sprint(err))
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *scheduleResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st scheduleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := st.ID.ValueString()
	_, err := admin.Scheduler(r.c.aws).DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(name), GroupName: aws.String(scheduleGroup)})
	if awserr.IgnoreNotFound(err) != nil {
		resp.Diagnostics.AddError("Deleting the schedule failed", err.Error())
		return
	}
	// The role is the one of the current environment's name; state may still
	// name one from before a rename of the environment.
	roleName := r.c.roleName("sched-", name)
	if err := r.deleteRole(ctx, roleName); err != nil {
		resp.Diagnostics.AddError("Deleting the schedule's role failed", err.Error())
	}
	if prev := roleNameOf(st.RoleARN.ValueString()); prev != "" && prev != roleName {
		if err := r.dropOldRole(ctx, prev, name); err != nil {
			resp.Diagnostics.AddError("Deleting the schedule's previous role failed", err.Error())
		}
	}
}

// ImportState takes the schedule name (default group).
func (r *scheduleResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if !scheduleNameRE.MatchString(req.ID) {
		resp.Diagnostics.AddError("Invalid import ID", "give the schedule name (1-64 characters of A-Z a-z 0-9 - _ .), got "+strconv.Quote(req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}

// getSchedule returns the schedule, or nil when it does not exist.
func (r *scheduleResource) getSchedule(ctx context.Context, name string) (*scheduler.GetScheduleOutput, error) {
	out, err := admin.Scheduler(r.c.aws).GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(scheduleGroup)})
	if awserr.IsNotFound(err) {
		return nil, nil
	}
	return out, err
}

// read fills m from AWS; found is false when the schedule is gone. role_arn is
// left null when the role, its trust or its invoke policy is not what this
// resource puts there, or the target retries, or the time window is not OFF:
// the next plan then updates the schedule, which re-sends the whole definition
// and repairs the role (scheduleRoleModifier). moto 5.2 returns the target
// (RoleArn, Input, RetryPolicy), the time zone and the window as sent, so
// nothing here falls back to the planned value.
func (r *scheduleResource) read(ctx context.Context, name string, m *scheduleModel) (bool, error) {
	out, err := r.getSchedule(ctx, name)
	if err != nil || out == nil {
		return false, err
	}
	m.ID, m.Name, m.ARN = types.StringValue(name), types.StringValue(name), types.StringValue(aws.ToString(out.Arn))
	m.ScheduleExpression = types.StringValue(aws.ToString(out.ScheduleExpression))
	tz := aws.ToString(out.ScheduleExpressionTimezone)
	if tz == "" {
		tz = "UTC" // what Scheduler uses when none is set
	}
	m.Timezone = types.StringValue(tz)
	m.Enabled = types.BoolValue(out.State != schedtypes.ScheduleStateDisabled)
	m.Description = types.StringValue(aws.ToString(out.Description))
	m.FunctionARN, m.RoleARN = types.StringNull(), types.StringNull()
	if out.Target == nil {
		m.Payload = types.StringValue("")
		return true, nil
	}
	fn := aws.ToString(out.Target.Arn)
	m.FunctionARN = types.StringValue(fn)
	// Keep the configured spelling of a payload that means the same.
	input := aws.ToString(out.Target.Input)
	if !sameJSON(m.Payload.ValueString(), input) {
		m.Payload = types.StringValue(input)
	}
	if !scheduleNoRetryNoWindow(out) {
		return true, nil
	}
	roleARN := aws.ToString(out.Target.RoleArn)
	ok, err := r.roleIntact(ctx, roleARN, r.c.roleName("sched-", name), fn)
	if err != nil {
		return false, err
	}
	if ok {
		m.RoleARN = types.StringValue(roleARN)
	}
	return true, nil
}

// scheduleNoRetryNoWindow: the target is never retried and runs exactly on time.
func scheduleNoRetryNoWindow(out *scheduler.GetScheduleOutput) bool {
	return out.FlexibleTimeWindow != nil && out.FlexibleTimeWindow.Mode == schedtypes.FlexibleTimeWindowModeOff &&
		out.Target.RetryPolicy != nil && aws.ToInt32(out.Target.RetryPolicy.MaximumRetryAttempts) == 0
}

// tags are the role's: the deployment's, the resource's own, and ghr:schedule
// naming the schedule the role belongs to.
func (r *scheduleResource) tags(ctx context.Context, m scheduleModel) (map[string]string, diag.Diagnostics) {
	tags, diags := r.c.resourceTags(ctx, m.Tags)
	tags[tagSchedule] = m.Name.ValueString()
	return tags, diags
}

// target is what the schedule invokes: the function, through the role, with
// the payload, and never a retry.
func scheduleTarget(m scheduleModel, roleARN string) *schedtypes.Target {
	return &schedtypes.Target{
		Arn:     aws.String(m.FunctionARN.ValueString()),
		RoleArn: aws.String(roleARN),
		Input:   aws.String(m.Payload.ValueString()),
		RetryPolicy: &schedtypes.RetryPolicy{
			MaximumRetryAttempts:     aws.Int32(0),
			MaximumEventAgeInSeconds: aws.Int32(scheduleEventAge),
		},
	}
}

func scheduleState(m scheduleModel) schedtypes.ScheduleState {
	if m.Enabled.ValueBool() {
		return schedtypes.ScheduleStateEnabled
	}
	return schedtypes.ScheduleStateDisabled
}

func scheduleOptional(s types.String) *string {
	if s.ValueString() == "" {
		return nil
	}
	return aws.String(s.ValueString())
}

// schedulePayloadValidator checks the event the function receives.
type schedulePayloadValidator struct{}

func (schedulePayloadValidator) Description(context.Context) string { return "must be a JSON object" }

func (v schedulePayloadValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (schedulePayloadValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(req.ConfigValue.ValueString()), &obj); err != nil || obj == nil {
		msg := "the payload must be a JSON object"
		if err != nil {
			msg += " (" + err.Error() + ")"
		}
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid payload", msg+`; for example jsonencode({ mode = "refresh" }) or "{}"`)
	}
}
