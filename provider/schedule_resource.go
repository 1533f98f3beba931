package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones resolve the same on every machine that runs the provider

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
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
)

// ghrunner_schedule: an EventBridge Scheduler schedule that invokes one of the
// deployment's functions (refresh, scale-down), with a role of its own
// (docs/design.md). A scheduled function must neither overlap nor be retried, so
// the target never retries and the time window is always OFF.

const (
	// scheduleGroup: every schedule lives in the account's default group.
	scheduleGroup = "default"
	// schedulePolicyName is the role's one inline policy.
	schedulePolicyName = "invoke-function"
	// scheduleEventAge bounds how long Scheduler keeps an undelivered tick
	// (60 s is the least it accepts); with no retries a late tick is dropped
	// and the next one runs instead.
	scheduleEventAge = 60
)

type scheduleResource struct{ c *clients }

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

func newScheduleResource() resource.Resource { return &scheduleResource{} }

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
			"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				Description: "Tags for the schedule's IAM role, added to the provider's default_tags and ghr:environment (Scheduler schedules themselves cannot be tagged)."},
			"arn": schema.StringAttribute{Computed: true, Description: "Schedule ARN.", PlanModifiers: keep},
			"role_arn": schema.StringAttribute{Computed: true,
				Description:   "ARN of the role Scheduler assumes (ghr-<environment>-sched-<name>). When the role, its trust or its policy, or the schedule's no-retry and no-time-window settings, were changed outside Terraform the next plan shows an update that restores them.",
				PlanModifiers: []planmodifier.String{scheduleRoleModifier{}}},
		},
	}
}

func (r *scheduleResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if req.ProviderData == nil {
		return
	}
	c, ok := req.ProviderData.(*clients)
	if !ok {
		resp.Diagnostics.AddError("Unexpected provider data", fmt.Sprintf("got %T", req.ProviderData))
		return
	}
	r.c = c
}

// scheduleRoleName is the role of schedule name in environment.
func scheduleRoleName(environment, name string) string {
	return iamName("ghr-" + environment + "-sched-" + name)
}

// scheduleTrustPolicy lets EventBridge Scheduler, and nothing else, assume the role.
func scheduleTrustPolicy() string { return trustPolicy("scheduler.amazonaws.com") }

// scheduleInvokePolicy allows invoking exactly one function.
func scheduleInvokePolicy(functionARN string) string {
	return policyDocument{Version: "2012-10-17", Statement: []policyStatement{{
		Effect: "Allow", Action: []string{"lambda:InvokeFunction"}, Resource: []string{functionARN},
	}}}.String()
}

// scheduleSamePolicy reports whether an IAM document (URL-encoded, as IAM returns it)
// says the same as want, whitespace and key order aside.
func scheduleSamePolicy(encoded, want string) bool {
	doc, err := url.QueryUnescape(encoded)
	if err != nil {
		doc = encoded
	}
	return scheduleSameJSON(doc, want)
}

func scheduleSameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// tags are the role's: the deployment's, the resource's own, and ghr:schedule
// naming the schedule the role belongs to.
func (r *scheduleResource) tags(ctx context.Context, m scheduleModel) (map[string]string, error) {
	own := map[string]string{}
	if diags := m.Tags.ElementsAs(ctx, &own, false); diags.HasError() {
		return nil, errors.New("tags: must be a map of strings")
	}
	tags := r.c.tags(own)
	tags["ghr:schedule"] = m.Name.ValueString()
	return tags, nil
}

// ownsRole: the role was made by this resource, in this deployment, for schedule name.
func (r *scheduleResource) ownsRole(tags []iamtypes.Tag, name string) bool {
	return scheduleHasTag(tags, "ghr:environment", r.c.environment) && scheduleHasTag(tags, "ghr:schedule", name)
}

// ensureRole makes roleName exist with the Scheduler trust, the invoke policy
// for functionARN and tags (dropping the keys in drop). An existing role is
// taken over only when its tags say it was made for this schedule in this
// deployment (e.g. left behind by a schedule deleted outside Terraform).
func (r *scheduleResource) ensureRole(ctx context.Context, roleName, functionARN string, tags map[string]string, drop []string) (arn string, created bool, err error) {
	svc := r.c.aws.IAM()
	roleTags := iamTags(tags)
	got, err := svc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
	var nf *iamtypes.NoSuchEntityException
	switch {
	case errors.As(err, &nf):
		out, err := svc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(roleName), AssumeRolePolicyDocument: aws.String(scheduleTrustPolicy()),
			Description: aws.String("EventBridge Scheduler role of ghrunner schedule " + roleName), Tags: roleTags})
		if err != nil {
			return "", false, fmt.Errorf("create role %s: %w", roleName, err)
		}
		arn, created = aws.ToString(out.Role.Arn), true
	case err != nil:
		return "", false, fmt.Errorf("get role %s: %w", roleName, err)
	default:
		if !r.ownsRole(got.Role.Tags, tags["ghr:schedule"]) {
			return "", false, fmt.Errorf("role %s already exists but is not tagged ghr:environment=%s and ghr:schedule=%s, so it is not this schedule's: delete or rename it",
				roleName, r.c.environment, tags["ghr:schedule"])
		}
		arn = aws.ToString(got.Role.Arn)
		if !scheduleSamePolicy(aws.ToString(got.Role.AssumeRolePolicyDocument), scheduleTrustPolicy()) {
			if _, err := svc.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(roleName), PolicyDocument: aws.String(scheduleTrustPolicy())}); err != nil {
				return "", false, fmt.Errorf("restore the trust policy of role %s: %w", roleName, err)
			}
		}
		if len(drop) > 0 {
			if _, err := svc.UntagRole(ctx, &iam.UntagRoleInput{RoleName: aws.String(roleName), TagKeys: drop}); err != nil {
				return "", false, fmt.Errorf("untag role %s: %w", roleName, err)
			}
		}
		if len(roleTags) > 0 {
			if _, err := svc.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String(roleName), Tags: roleTags}); err != nil {
				return "", false, fmt.Errorf("tag role %s: %w", roleName, err)
			}
		}
	}
	if _, err := svc.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(roleName), PolicyName: aws.String(schedulePolicyName),
		PolicyDocument: aws.String(scheduleInvokePolicy(functionARN))}); err != nil {
		return arn, created, fmt.Errorf("put the invoke policy on role %s: %w", roleName, err)
	}
	return arn, created, nil
}

// scheduleRoleNameOf takes the name out of a role ARN (the part after the path).
func scheduleRoleNameOf(arn string) string {
	if !strings.HasPrefix(arn, "arn:") {
		return ""
	}
	return arn[strings.LastIndex(arn, "/")+1:]
}

func scheduleHasTag(tags []iamtypes.Tag, key, value string) bool {
	for _, t := range tags {
		if aws.ToString(t.Key) == key && aws.ToString(t.Value) == value {
			return true
		}
	}
	return false
}

// deleteRole removes the inline policy and the role; both may already be gone.
func (r *scheduleResource) deleteRole(ctx context.Context, roleName string) error {
	return deleteRole(ctx, r.c.aws.IAM(), roleName, schedulePolicyName)
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

// scheduleRoleNotReady: a role created moments ago is not yet visible to Scheduler
// (IAM propagation; moto has no such delay).
func scheduleRoleNotReady(err error) bool {
	var ve *schedtypes.ValidationException
	return errors.As(err, &ve) && strings.Contains(strings.ToLower(ve.ErrorMessage()), "role")
}

// scheduleRetryRoleNotReady calls call until it succeeds, fails otherwise than with
// scheduleRoleNotReady, or limit has passed.
func scheduleRetryRoleNotReady(ctx context.Context, every, limit time.Duration, call func() error) error {
	return retryWhile(ctx, every, limit, scheduleRoleNotReady, call)
}

func (r *scheduleResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan scheduleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	tags, err := r.tags(ctx, plan)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("tags"), "Invalid tags", err.Error())
		return
	}
	name := plan.Name.ValueString()
	roleName := scheduleRoleName(r.c.environment, name)
	roleARN, created, err := r.ensureRole(ctx, roleName, plan.FunctionARN.ValueString(), tags, nil)
	if err != nil {
		if created {
			_ = r.deleteRole(ctx, roleName)
		}
		resp.Diagnostics.AddError("Creating the schedule's role failed", err.Error())
		return
	}
	err = scheduleRetryRoleNotReady(ctx, 2*time.Second, 2*time.Minute, func() error {
		_, err := r.c.aws.Scheduler().CreateSchedule(ctx, &scheduler.CreateScheduleInput{
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

// getSchedule returns the schedule, or nil when it does not exist.
func (r *scheduleResource) getSchedule(ctx context.Context, name string) (*scheduler.GetScheduleOutput, error) {
	out, err := r.c.aws.Scheduler().GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(scheduleGroup)})
	var nf *schedtypes.ResourceNotFoundException
	if errors.As(err, &nf) {
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
	if !scheduleSameJSON(m.Payload.ValueString(), input) {
		m.Payload = types.StringValue(input)
	}
	if !scheduleNoRetryNoWindow(out) {
		return true, nil
	}
	roleARN := aws.ToString(out.Target.RoleArn)
	ok, err := r.roleIntact(ctx, roleARN, scheduleRoleName(r.c.environment, name), fn)
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

// roleIntact reports whether roleARN is the role named want, exists, trusts
// Scheduler and may invoke exactly functionARN.
func (r *scheduleResource) roleIntact(ctx context.Context, roleARN, want, functionARN string) (bool, error) {
	roleName := scheduleRoleNameOf(roleARN)
	if roleName != want {
		return false, nil // another role, or the environment was renamed
	}
	svc := r.c.aws.IAM()
	var nf *iamtypes.NoSuchEntityException
	role, err := svc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get role %s: %w", roleName, err)
	}
	if aws.ToString(role.Role.Arn) != roleARN || !scheduleSamePolicy(aws.ToString(role.Role.AssumeRolePolicyDocument), scheduleTrustPolicy()) {
		return false, nil
	}
	pol, err := svc.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(roleName), PolicyName: aws.String(schedulePolicyName)})
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get the invoke policy of role %s: %w", roleName, err)
	}
	return scheduleSamePolicy(aws.ToString(pol.PolicyDocument), scheduleInvokePolicy(functionARN)), nil
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
	tags, err := r.tags(ctx, plan)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("tags"), "Invalid tags", err.Error())
		return
	}
	old, err := r.tags(ctx, st)
	if err != nil {
		old = nil
	}
	var drop []string
	for k := range old {
		if _, ok := tags[k]; !ok {
			drop = append(drop, k)
		}
	}
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
		prevRole = scheduleRoleNameOf(aws.ToString(cur.Target.RoleArn))
	}
	// The role may invoke the new function before the schedule points at it.
	roleName := scheduleRoleName(r.c.environment, name)
	roleARN, _, err := r.ensureRole(ctx, roleName, plan.FunctionARN.ValueString(), tags, drop)
	if err != nil {
		resp.Diagnostics.AddError("Updating the schedule's role failed", err.Error())
		return
	}
	err = scheduleRetryRoleNotReady(ctx, 2*time.Second, 2*time.Minute, func() error {
		// UpdateSchedule replaces the whole definition: send all of it.
		_, err := r.c.aws.Scheduler().UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
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

// dropOldRole deletes roleName when its tags say it was made for schedule name
// (in whichever environment); another role is left alone.
func (r *scheduleResource) dropOldRole(ctx context.Context, roleName, name string) error {
	got, err := r.c.aws.IAM().GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
	var nf *iamtypes.NoSuchEntityException
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get role %s: %w", roleName, err)
	}
	if !scheduleHasTag(got.Role.Tags, "ghr:schedule", name) {
		return nil
	}
	return r.deleteRole(ctx, roleName)
}

func (r *scheduleResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st scheduleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := st.ID.ValueString()
	_, err := r.c.aws.Scheduler().DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(name), GroupName: aws.String(scheduleGroup)})
	var nf *schedtypes.ResourceNotFoundException
	if err != nil && !errors.As(err, &nf) {
		resp.Diagnostics.AddError("Deleting the schedule failed", err.Error())
		return
	}
	// The role is the one of the current environment's name; state may still
	// name one from before a rename of the environment.
	roleName := scheduleRoleName(r.c.environment, name)
	if err := r.deleteRole(ctx, roleName); err != nil {
		resp.Diagnostics.AddError("Deleting the schedule's role failed", err.Error())
	}
	if prev := scheduleRoleNameOf(st.RoleARN.ValueString()); prev != "" && prev != roleName {
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

// scheduleRoleModifier keeps role_arn from state, except when Read left it null
// on an existing schedule (role damaged outside Terraform): then it becomes
// unknown, which plans an update that restores the role.
type scheduleRoleModifier struct{}

func (scheduleRoleModifier) Description(context.Context) string {
	return "Keeps the role ARN; plans a repair when the role was changed outside Terraform."
}

func (m scheduleRoleModifier) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (scheduleRoleModifier) PlanModifyString(_ context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return // create or destroy
	}
	if req.StateValue.IsNull() {
		resp.PlanValue = types.StringUnknown()
		return
	}
	if req.PlanValue.IsUnknown() {
		resp.PlanValue = req.StateValue
	}
}

// Schedule expressions (EventBridge Scheduler accepts rate, cron and at).

const scheduleExamples = "for example rate(5 minutes), cron(0/5 * * * ? *) or at(2030-01-31T09:00:00)"

// checkScheduleExpression says what is wrong with expr, or nil.
func checkScheduleExpression(expr string) error {
	inner := func(prefix string) (string, bool) {
		if strings.HasPrefix(expr, prefix+"(") && strings.HasSuffix(expr, ")") {
			return expr[len(prefix)+1 : len(expr)-1], true
		}
		return "", false
	}
	if s, ok := inner("rate"); ok {
		return scheduleCheckRate(s)
	}
	if s, ok := inner("cron"); ok {
		return scheduleCheckCron(s)
	}
	if s, ok := inner("at"); ok {
		if _, err := time.Parse("2006-01-02T15:04:05", strings.TrimSpace(s)); err != nil {
			return fmt.Errorf("at() takes a date and time yyyy-mm-ddThh:mm:ss (read in timezone), got %q; for example at(2030-01-31T09:00:00)", s)
		}
		return nil
	}
	return fmt.Errorf("%q is not a rate(), cron() or at() expression; %s", expr, scheduleExamples)
}

func scheduleCheckRate(s string) error {
	f := strings.Fields(s)
	if len(f) != 2 {
		return fmt.Errorf("rate() takes a number and a unit, got %q; for example rate(5 minutes) or rate(1 hour)", s)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 || strings.HasPrefix(f[0], "+") {
		return fmt.Errorf("rate() needs a whole number of at least 1, got %q; for example rate(5 minutes)", f[0])
	}
	unit := f[1]
	switch unit {
	case "minute", "hour", "day":
		if n != 1 {
			return fmt.Errorf("rate(%d %s): a value other than 1 takes the plural unit, e.g. rate(%d %ss)", n, unit, n, unit)
		}
	case "minutes", "hours", "days":
		if n == 1 {
			return fmt.Errorf("rate(1 %s): the value 1 takes the singular unit, e.g. rate(1 %s)", unit, strings.TrimSuffix(unit, "s"))
		}
	default:
		return fmt.Errorf("rate() unit %q is not one of minute, minutes, hour, hours, day, days; for example rate(5 minutes) or rate(1 day)", unit)
	}
	return nil
}

type scheduleCronField struct {
	name     string
	min, max int
	names    []string // names of min, min+1, … (months, weekdays)
	question bool     // day fields: ? allowed
	dom, dow bool
}

var (
	scheduleCronFields = []scheduleCronField{
		{name: "minutes", min: 0, max: 59},
		{name: "hours", min: 0, max: 23},
		{name: "day-of-month", min: 1, max: 31, question: true, dom: true},
		{name: "month", min: 1, max: 12, names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}},
		{name: "day-of-week", min: 1, max: 7, names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}, question: true, dow: true},
		{name: "year", min: 1970, max: 2199},
	}
	scheduleCronWeekdayRE = regexp.MustCompile(`^(\d+)W$`)
	scheduleCronLastRE    = regexp.MustCompile(`^(\w+)L$`)
	scheduleCronNthRE     = regexp.MustCompile(`^(\w+)#(\d+)$`)
)

func scheduleCheckCron(s string) error {
	f := strings.Fields(s)
	if len(f) != 6 {
		return fmt.Errorf("cron() takes 6 fields (minutes hours day-of-month month day-of-week year), got %d in %q; "+
			"unlike Unix cron it has a year and needs ? in day-of-month or day-of-week, for example cron(0/5 * * * ? *) or cron(0 8 ? * MON-FRI *)", len(f), s)
	}
	for i, cf := range scheduleCronFields {
		if err := cf.check(f[i]); err != nil {
			return fmt.Errorf("cron(%s): %w", s, err)
		}
	}
	dom, dow := f[2] == "?", f[4] == "?"
	switch {
	case dom && dow:
		return fmt.Errorf("cron(%s): day-of-month and day-of-week are both ?; set one of them, for example cron(0 12 * * ? *) (every day) or cron(0 12 ? * MON *) (Mondays)", s)
	case !dom && !dow:
		return fmt.Errorf("cron(%s): exactly one of day-of-month (3rd field) and day-of-week (5th field) must be ?, for example cron(0 12 * * ? *) (every day) or cron(0 12 ? * MON *) (Mondays)", s)
	}
	return nil
}

func (cf scheduleCronField) check(s string) error {
	if s == "?" {
		if !cf.question {
			return fmt.Errorf("? is allowed only in day-of-month or day-of-week, not in %s", cf.name)
		}
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		if err := cf.checkPart(part); err != nil {
			return fmt.Errorf("%s field %q: %w", cf.name, s, err)
		}
	}
	return nil
}

func (cf scheduleCronField) checkPart(p string) error {
	switch {
	case p == "":
		return errors.New("empty list entry")
	case p == "?":
		return errors.New("? must stand alone")
	case cf.dom && (p == "L" || p == "LW"):
		return nil
	case cf.dom && scheduleCronWeekdayRE.MatchString(p):
		return cf.checkValue(scheduleCronWeekdayRE.FindStringSubmatch(p)[1])
	case cf.dow && p == "L":
		return nil
	case cf.dow && scheduleCronLastRE.MatchString(p):
		return cf.checkValue(scheduleCronLastRE.FindStringSubmatch(p)[1])
	case cf.dow && scheduleCronNthRE.MatchString(p):
		m := scheduleCronNthRE.FindStringSubmatch(p)
		if k, _ := strconv.Atoi(m[2]); k < 1 || k > 5 {
			return fmt.Errorf("the week number after # must be 1-5, got %s", m[2])
		}
		return cf.checkValue(m[1])
	}
	base, step, hasStep := strings.Cut(p, "/")
	if hasStep {
		if n, err := strconv.Atoi(step); err != nil || n < 1 {
			return fmt.Errorf("the increment after / must be a whole number of at least 1, got %q", step)
		}
	}
	if base == "*" {
		return nil
	}
	lo, hi, isRange := strings.Cut(base, "-")
	if err := cf.checkValue(lo); err != nil {
		return err
	}
	if isRange {
		return cf.checkValue(hi)
	}
	return nil
}

func (cf scheduleCronField) checkValue(v string) error {
	for _, n := range cf.names {
		if strings.EqualFold(v, n) {
			return nil
		}
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < cf.min || n > cf.max || strings.HasPrefix(v, "+") {
		allowed := fmt.Sprintf("%d-%d", cf.min, cf.max)
		if cf.names != nil {
			allowed += " or " + cf.names[0] + "-" + cf.names[len(cf.names)-1]
		}
		return fmt.Errorf("%q is not a valid %s value (%s)", v, cf.name, allowed)
	}
	return nil
}

type scheduleExpressionValidator struct{}

func (scheduleExpressionValidator) Description(context.Context) string {
	return "must be an EventBridge Scheduler rate(), cron() or at() expression"
}

func (v scheduleExpressionValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (scheduleExpressionValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := checkScheduleExpression(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid schedule expression", err.Error())
	}
}

type scheduleTimezoneValidator struct{}

func (scheduleTimezoneValidator) Description(context.Context) string {
	return "must be an IANA time zone name such as Europe/Berlin"
}

func (v scheduleTimezoneValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (scheduleTimezoneValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	tz := req.ConfigValue.ValueString()
	// LoadLocation also takes "" and "Local", which mean nothing to AWS.
	if _, err := time.LoadLocation(tz); err != nil || tz == "" || tz == "Local" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid time zone",
			fmt.Sprintf("%q is not an IANA time zone name; for example UTC, Europe/Berlin or America/New_York", tz))
	}
}

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
