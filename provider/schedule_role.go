package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// The role of a schedule: Scheduler assumes it to invoke the function, and it
// may do nothing else. ensureRole (iam.go) makes and adopts it.

// schedulePolicyName is the role's one inline policy.
const schedulePolicyName = "invoke-function"

// scheduleTrustPolicy lets EventBridge Scheduler, and nothing else, assume
// the role, and only for schedules of the function's own account and of the
// group ghrunner's schedules live in: Scheduler acting for another account
// (the confused deputy) is refused.
func scheduleTrustPolicy(functionARN string) string {
	a, err := parseARN(functionARN)
	if err != nil {
		return trustPolicy("scheduler.amazonaws.com", nil) // validated at plan time; never reached
	}
	return trustPolicy("scheduler.amazonaws.com", map[string]map[string]any{
		"StringEquals": {"aws:SourceAccount": a.account},
		"ArnEquals":    {"aws:SourceArn": fmt.Sprintf("arn:%s:scheduler:%s:%s:schedule-group/%s", a.partition, a.region, a.account, scheduleGroup)},
	})
}

// ensureRole makes the schedule's role roleName, allowed to invoke
// functionARN only, with tags (dropping the keys in drop); see ensureRole in
// iam.go for when an existing role is taken over.
func (r *scheduleResource) ensureRole(ctx context.Context, roleName, functionARN string, tags map[string]string, drop []string) (arn string, created bool, err error) {
	role, err := r.c.ensureRole(ctx, "", roleSpec{
		name: roleName, kind: "schedule", trust: scheduleTrustPolicy(functionARN),
		description: "EventBridge Scheduler role of ghrunner schedule " + roleName,
		policyName:  schedulePolicyName, policy: scheduleInvokePolicy(functionARN),
		tags: tags, drop: drop,
	})
	return role.arn, role.created, err
}

// deleteRole removes the inline policy and the role; both may already be gone.
func (r *scheduleResource) deleteRole(ctx context.Context, roleName string) error {
	return deleteRole(ctx, admin.IAM(r.c.aws), roleName, schedulePolicyName)
}

// dropOldRole deletes roleName when its tags say it was made for schedule name
// (in whichever environment); another role is left alone.
func (r *scheduleResource) dropOldRole(ctx context.Context, roleName, name string) error {
	got, err := admin.IAM(r.c.aws).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
	if awserr.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get role %s: %w", roleName, err)
	}
	if !hasTag(got.Role.Tags, tagSchedule, name) {
		return nil
	}
	return r.deleteRole(ctx, roleName)
}

// roleIntact reports whether roleARN is the role named want, exists, trusts
// Scheduler and may invoke exactly functionARN.
func (r *scheduleResource) roleIntact(ctx context.Context, roleARN, want, functionARN string) (bool, error) {
	roleName := roleNameOf(roleARN)
	if roleName != want {
		return false, nil // another role, or the environment was renamed
	}
	svc := admin.IAM(r.c.aws)
	role, err := svc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
	if awserr.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get role %s: %w", roleName, err)
	}
	if aws.ToString(role.Role.Arn) != roleARN || !samePolicy(aws.ToString(role.Role.AssumeRolePolicyDocument), scheduleTrustPolicy(functionARN)) {
		return false, nil
	}
	pol, err := svc.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(roleName), PolicyName: aws.String(schedulePolicyName)})
	if awserr.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get the invoke policy of role %s: %w", roleName, err)
	}
	return samePolicy(aws.ToString(pol.PolicyDocument), scheduleInvokePolicy(functionARN)), nil
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
