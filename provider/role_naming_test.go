package provider

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// Role names carry the region (issue 15 item 2): IAM is global, so two
// regions' deployments of one environment must not share, rewrite or delete
// each other's roles; and a deployment made before moves to its new names.

// Two deployments of one environment in one region share role names; the
// second one's table is not the first one's, so it is refused, not adopted.
func TestEnsureRole_refusesTheRoleOfAnotherTable(t *testing.T) {
	ctx, svc := context.Background(), admin.IAM(env.Config(t))
	name := roleNameIn("acc", awstest.Region, "fn-", awstest.Name(t, "fn"))
	spec := roleSpec{name: name, kind: "function", service: "lambda.amazonaws.com", description: "test",
		policyName: functionPolicyName, policy: scheduleInvokePolicy("arn:aws:lambda:us-east-1:123456789012:function:f"),
		tags: map[string]string{tagEnvironment: "acc", tagTable: "ghr-first"}}
	if _, err := ensureRole(ctx, svc, "acc", spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deleteRole(ctx, svc, name, functionPolicyName) })
	spec.tags = map[string]string{tagEnvironment: "acc", tagTable: "ghr-second"}
	second, err := ensureRole(ctx, svc, "acc", spec)
	if err == nil || second.created || !strings.Contains(err.Error(), "ghr:table=ghr-second") {
		t.Fatalf("the second table's function took the first one's role: created %v, err %v", second.created, err)
	}
}

// A function whose role has the name of before (no region) moves to its
// new role on the next apply, and the old role is deleted.
func TestAccFunction_movesToItsRegionalRole(t *testing.T) {
	table, name := awstest.Name(t, "tbl"), awstest.Name(t, "fn")
	legacy := iamName("ghr-acc-fn-" + name)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             resource.ComposeAggregateTestCheckFunc(checkDestroyed, func(*terraform.State) error { return roleGone(context.Background(), env.Config(t), legacy) }),
		Steps: []resource.TestStep{
			{Config: functionConfig(table, name, "release", "")},
			{
				// What an earlier provider version left: the function on a
				// role without the region in its name.
				PreConfig: func() { useLegacyFunctionRole(t, name, legacy) },
				Config:    functionConfig(table, name, "release", ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("ghrunner_function.fn", "role_name", roleNameIn("acc", awstest.Region, "fn-", name)),
					func(*terraform.State) error { return roleGone(context.Background(), env.Config(t), legacy) },
				),
			},
		},
	})
}

// useLegacyFunctionRole puts function name on a copy of its role named
// legacy, and deletes the current one.
func useLegacyFunctionRole(t *testing.T, name, legacy string) {
	ctx, c := context.Background(), env.Config(t)
	current := roleNameIn("acc", awstest.Region, "fn-", name)
	role, err := admin.IAM(c).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(current)})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := admin.IAM(c).GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(current), PolicyName: aws.String(functionPolicyName)})
	if err != nil {
		t.Fatal(err)
	}
	document, err := url.QueryUnescape(aws.ToString(pol.PolicyDocument)) // IAM answers it URL-encoded
	if err != nil {
		t.Fatal(err)
	}
	made, err := admin.IAM(c).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(legacy), AssumeRolePolicyDocument: role.Role.AssumeRolePolicyDocument,
		Tags: iamTags(map[string]string{tagEnvironment: "acc"})})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.IAM(c).PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(legacy), PolicyName: aws.String(functionPolicyName), PolicyDocument: aws.String(document)}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Lambda(c).UpdateFunctionConfiguration(ctx, &lambda.UpdateFunctionConfigurationInput{FunctionName: aws.String(name), Role: made.Role.Arn}); err != nil {
		t.Fatal(err)
	}
	if err := deleteRole(ctx, admin.IAM(c), current, functionPolicyName); err != nil {
		t.Fatal(err)
	}
}

// A pool's role of before stays while an instance of the pool may still use
// it (deleting it would leave that instance's agent without credentials),
// goes once none is live, and is never touched when it is not the pool's.
func TestRetireLegacyRole_waitsForThePoolsInstances(t *testing.T) {
	ctx, c := context.Background(), env.Config(t)
	pool := awstest.Name(t, "pool")
	r := &poolResource{configured{c: &clients{aws: c, environment: "acc", defaultTags: map[string]string{}, rolePath: "/"}}}
	legacy := r.c.legacyRoleName("", pool)
	current := r.c.roleName("", pool)
	if legacy == current {
		t.Fatal("the legacy and current names are the same")
	}
	// As earlier versions made it: no ghr:table tag.
	legacyTags := map[string]string{tagEnvironment: "acc", tagPool: pool}
	if _, err := ensureRole(ctx, admin.IAM(c), "acc", roleSpec{name: legacy, kind: "pool", service: "ec2.amazonaws.com", policyName: agentPolicyName,
		policy: scheduleInvokePolicy("arn:aws:lambda:us-east-1:123456789012:function:f"), tags: legacyTags}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ensureInstanceProfile(ctx, legacy, legacyTags); err != nil {
		t.Fatal(err)
	}
	n := env.Network(t)
	run, err := c.EC2().RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(n.AMI), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		InstanceType: ec2types.InstanceTypeC7iLarge, TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
			Tags: []ec2types.Tag{{Key: aws.String(fleet.TagEnvironment), Value: aws.String("acc")}, {Key: aws.String(fleet.TagPool), Value: aws.String(pool)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(run.Instances[0].InstanceId)

	diags := r.retireLegacyRole(ctx, pool, current, false)
	if _, err := admin.IAM(c).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(legacy)}); err != nil || diags.WarningsCount() != 1 ||
		!strings.Contains(diags[0].Detail(), "may still use role "+legacy) {
		t.Fatalf("with a live instance: role %v, diagnostics %v; want the role kept with a warning", err, diags)
	}

	if _, err := c.EC2().TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if diags := r.retireLegacyRole(ctx, pool, current, false); diags.HasError() || diags.WarningsCount() != 0 {
		t.Fatalf("with no live instance: %v", diags)
	}
	if err := roleGone(ctx, c, legacy); err != nil {
		t.Error(err)
	}
	if _, err := admin.IAM(c).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(legacy)}); !awserr.IsNotFound(err) {
		t.Errorf("instance profile %s left behind (%v)", legacy, err)
	}

	// Another environment's role of that name (a person's, or another
	// deployment's): not the pool's, left alone even on destroy.
	if _, err := admin.IAM(c).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(legacy), AssumeRolePolicyDocument: aws.String(trustPolicy("ec2.amazonaws.com", nil)),
		Tags: iamTags(map[string]string{tagEnvironment: "someone-else", tagPool: pool})}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deleteRole(ctx, admin.IAM(c), legacy, agentPolicyName) })
	_ = r.retireLegacyRole(ctx, pool, current, true)
	if _, err := admin.IAM(c).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(legacy)}); err != nil {
		t.Errorf("another environment's role was deleted (%v)", err)
	}
}
