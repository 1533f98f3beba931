package provider

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
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

// The ghrunner_schedule resource: its schema, then create, read, update,
// delete and import. The model and its conversion to Scheduler's types are
// in schedule_model.go, reading a schedule back in schedule_read.go, the
// checks of its attributes in schedule_validators.go and schedule_expression.go,
// and its role in schedule_role.go.

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

const (
	// scheduleGroup: every schedule lives in the account's default group.
	scheduleGroup = "default"
	// scheduleEventAge bounds how long Scheduler keeps an undelivered tick
	// (60 s is the least it accepts); with no retries a late tick is dropped
	// and the next one runs instead.
	scheduleEventAge = 60
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
