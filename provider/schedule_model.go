package provider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The schedule's Terraform model and its conversion to what EventBridge
// Scheduler takes: the target, the state, optional strings, and the tags of
// the schedule's role.

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
