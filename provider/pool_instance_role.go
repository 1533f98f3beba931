package provider

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
)

// The instance role of a pool and its instance profile, both named like the
// pool's launch template: instances assume the role through the profile,
// and its one policy (agentPolicy, policy.go) lets the agent do its work
// and nothing else.

// agentPolicyName is the instance role's one inline policy.
const agentPolicyName = "ghrunner-agent"

// ensureInstanceRole makes the pool's role (ensureRole in iam.go says when an
// existing role is taken over) and its instance profile, and returns the
// profile's ARN, the role's id (the first half of its instances' record
// keys) and whether the role was created.
func (r *poolResource) ensureInstanceRole(ctx context.Context, name, policy, table string, tags map[string]string, drop []string) (profileARN, roleID string, created bool, err error) {
	role, err := r.c.ensureRole(ctx, table, roleSpec{
		name: name, kind: "pool", service: "ec2.amazonaws.com",
		description: "ghrunner agent on instances of pool " + name,
		policyName:  agentPolicyName, policy: policy, tags: tags, drop: drop,
	})
	if err != nil {
		return "", "", role.created, err
	}
	profileARN, err = r.ensureInstanceProfile(ctx, name, tags)
	return profileARN, role.id, role.created, err
}

// ensureInstanceProfile makes the instance profile name holding the role
// name, or puts the role back into a profile that lost it.
func (r *poolResource) ensureInstanceProfile(ctx context.Context, name string, tags map[string]string) (string, error) {
	client := admin.IAM(r.c.aws)
	prof, err := client.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if awserr.IsNotFound(err) {
		created, err := client.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Path: aws.String(r.c.rolePath), Tags: iamTags(tags)})
		if err != nil {
			return "", err
		}
		if err := addRoleToProfile(ctx, client, name); err != nil {
			return "", err
		}
		return aws.ToString(created.InstanceProfile.Arn), nil
	}
	if err != nil {
		return "", err
	}
	if len(prof.InstanceProfile.Roles) == 0 {
		if err := addRoleToProfile(ctx, client, name); err != nil {
			return "", err
		}
	}
	return aws.ToString(prof.InstanceProfile.Arn), nil
}

// addRoleToProfile puts the role name into the instance profile name, again
// for up to two minutes while IAM does not see the role or the profile (both
// made or read moments before: IAM is eventually consistent even with
// itself, "NoSuchEntity: The role with name … cannot be found", or
// "InvalidParameterValue: … Invalid IAM Instance Profile name").
func addRoleToProfile(ctx context.Context, client *iam.Client, name string) error {
	return retryWhile(ctx, 2*time.Second, 2*time.Minute, profileNotReady, func() error {
		_, err := client.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)})
		return err
	})
}

// profileNotReady says whether AddRoleToInstanceProfile failed only because
// IAM does not see the role or the profile yet.
func profileNotReady(err error) bool {
	return awserr.IsNotFound(err) || fleet.IsProfilePropagation(awserr.Code(err), awserr.Message(err))
}

// deleteInstanceRole removes the instance profile and the role; any of it may
// already be gone.
func (r *poolResource) deleteInstanceRole(ctx context.Context, name string) error {
	client := admin.IAM(r.c.aws)
	if _, err := client.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)}); awserr.IgnoreNotFound(err) != nil {
		return err
	}
	if _, err := client.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); awserr.IgnoreNotFound(err) != nil {
		return err
	}
	return deleteRole(ctx, client, name, agentPolicyName)
}
