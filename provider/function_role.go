package provider

import (
	"context"
	"errors"
	"strings"

	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

// The execution role of a function: Lambda assumes it to run the handler,
// whose policy (functionPolicy, policy.go) grants what its code calls.

// functionPolicyName is the execution role's one inline policy.
const functionPolicyName = "ghrunner-function"

// roleName is the execution role of function name.
func (r *functionResource) roleName(name string) string {
	return r.c.roleName("fn-", name)
}

// ensureRole makes the function's execution role, with the policy its
// handler needs (ensureRole in iam.go says when an existing role is taken
// over), and returns its ARN.
func (r *functionResource) ensureRole(ctx context.Context, m functionModel, tags map[string]string, drop []string) (string, diag.Diagnostics) {
	var diags diag.Diagnostics
	tableARN, tableKey, err := stateTableARN(ctx, r.c, m.Table.ValueString())
	if err != nil {
		diags.AddAttributeError(path.Root("table"), "State table not found", err.Error())
		return "", diags
	}
	var queues []string
	diags.Append(m.QueueARNs.ElementsAs(ctx, &queues, false)...)
	policy, err := functionPolicy(m.Handler.ValueString(), tableARN, tableKey, queues, m.GitHubParameter.ValueString(), m.Name.ValueString(), r.c.environment, r.c.rolePath, m.inVPC())
	if err == nil && m.OnFailureTopic.ValueString() != "" {
		// Lambda sends a failed asynchronous invocation to the
		// destination with the function's role.
		policy, err = withStatement(policy, policyStatement{Sid: "OnFailureDestination", Effect: "Allow",
			Action: []string{"sns:Publish"}, Resource: []string{m.OnFailureTopic.ValueString()}})
	}
	var keys []string
	diags.Append(m.VolumeKMSKeyARNs.ElementsAs(ctx, &keys, false)...)
	if err == nil && len(keys) > 0 && (m.Handler.ValueString() == bundle.HandlerProvision || m.Handler.ValueString() == bundle.HandlerRefresh) {
		for _, st := range volumeKeyStatements(keys, r.c.aws.AWS.Region) {
			if policy, err = withStatement(policy, st); err != nil {
				break
			}
		}
	}
	if err != nil {
		diags.AddError("Building the function policy failed", err.Error())
		return "", diags
	}
	role, err := r.c.ensureRole(ctx, m.Table.ValueString(), roleSpec{
		name: r.roleName(m.Name.ValueString()), kind: "function", service: "lambda.amazonaws.com",
		description: "ghrunner function " + m.Name.ValueString(),
		policyName:  functionPolicyName, policy: policy, tags: tags, drop: drop,
	})
	if err != nil {
		diags.AddError("Creating the function role failed", err.Error())
	}
	return role.arn, diags
}

// lambdaRoleNotReady: Lambda refuses a role created moments ago until IAM
// has propagated it ("The role defined for the function cannot be assumed
// by Lambda."; moto has no such delay).
func lambdaRoleNotReady(err error) bool {
	var invalid *lambdatypes.InvalidParameterValueException
	return errors.As(err, &invalid) && (strings.Contains(invalid.ErrorMessage(), "cannot be assumed") ||
		// A function in a VPC: Lambda checks the role may make its
		// network interfaces, and may not see the policy that says so yet.
		strings.Contains(invalid.ErrorMessage(), "does not have permissions to call CreateNetworkInterface"))
}

// lambdaGrantNotSeen says whether Lambda refused a call because it does not
// see yet the role policy that allows it (IAM is eventually consistent):
// an event source mapping on the table's stream ("Cannot access stream …
// Please ensure the role can perform …") or an on-failure destination ("…
// does not have permissions to call Publish on …"), right after the
// provider put that policy. terraform-provider-aws retries both.
func lambdaGrantNotSeen(err error) bool {
	var invalid *lambdatypes.InvalidParameterValueException
	return errors.As(err, &invalid) && (strings.Contains(invalid.ErrorMessage(), "Please ensure the role can perform") ||
		strings.Contains(invalid.ErrorMessage(), "does not have permissions to call"))
}
