package provider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// Reading a schedule back from EventBridge Scheduler into the model, and
// the check that it is still the never-retried, on-time schedule this
// resource makes.

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
