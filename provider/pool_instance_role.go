package provider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// The instance role of a pool and its instance profile, both named like the
// pool's launch template: instances assume the role through the profile,
// and its one policy (agentPolicy, policy.go) lets the agent do its work
// and nothing else.

// agentPolicyName is the instance role's one inline policy.
const agentPolicyName = "ghrunner-agent"

// ensureInstanceRole makes the pool's role (ensureRole in iam.go says when an
// existing role is taken over) and its instance profile, and returns the
// profile's ARN and whether the role was created.
func (r *poolResource) ensureInstanceRole(ctx context.Context, name, policy string, tags map[string]string, drop []string) (string, bool, error) {
	_, created, err := ensureRole(ctx, r.c.aws.IAM(), r.c.environment, roleSpec{
		name: name, kind: "pool", service: "ec2.amazonaws.com",
		description: "ghrunner agent on instances of pool " + name,
		policyName:  agentPolicyName, policy: policy, tags: tags, drop: drop,
	})
	if err != nil {
		return "", created, err
	}
	arn, err := r.ensureInstanceProfile(ctx, name, tags)
	return arn, created, err
}

// ensureInstanceProfile makes the instance profile name holding the role
// name, or puts the role back into a profile that lost it.
func (r *poolResource) ensureInstanceProfile(ctx context.Context, name string, tags map[string]string) (string, error) {
	client := r.c.aws.IAM()
	prof, err := client.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if awserr.IsNotFound(err) {
		created, err := client.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: iamTags(tags)})
		if err != nil {
			return "", err
		}
		if _, err := client.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)}); err != nil {
			return "", err
		}
		return aws.ToString(created.InstanceProfile.Arn), nil
	}
	if err != nil {
		return "", err
	}
	if len(prof.InstanceProfile.Roles) == 0 {
		if _, err := client.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)}); err != nil {
			return "", err
		}
	}
	return aws.ToString(prof.InstanceProfile.Arn), nil
}

// deleteInstanceRole removes the instance profile and the role; any of it may
// already be gone.
func (r *poolResource) deleteInstanceRole(ctx context.Context, name string) error {
	client := r.c.aws.IAM()
	if _, err := client.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)}); awserr.IgnoreNotFound(err) != nil {
		return err
	}
	if _, err := client.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); awserr.IgnoreNotFound(err) != nil {
		return err
	}
	return deleteRole(ctx, client, name, agentPolicyName)
}
