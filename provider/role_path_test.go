package provider

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// Organizations that allow creating roles only under a path and with a
// permissions boundary (issue 15 item 13): the provider's iam_role_path and
// iam_permissions_boundary reach every role it makes, and the policy that
// passes pool roles follows the path.

// withIAMSettings adds iam_role_path and iam_permissions_boundary to the
// provider block of config.
func withIAMSettings(config, path, boundary string) string {
	return strings.Replace(config, `environment = "acc"`, fmt.Sprintf("environment = \"acc\"\n  iam_role_path = %q\n  iam_permissions_boundary = %q", path, boundary), 1)
}

func TestAccFunction_roleUnderPathWithBoundary(t *testing.T) {
	table, name := awstest.Name(t, "tbl"), awstest.Name(t, "fn")
	pol, err := admin.IAM(env.Config(t)).CreatePolicy(context.Background(), &iam.CreatePolicyInput{PolicyName: aws.String(awstest.Name(t, "boundary")),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	boundary := aws.ToString(pol.Policy.Arn)
	role := roleNameIn("acc", awstest.Region, "fn-", name)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{{
			Config: withIAMSettings(functionConfig(table, name, "provision", ""), "/ghrunner/ci/", boundary),
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttr("ghrunner_function.fn", "role_name", role),
				func(*terraform.State) error {
					ctx, c := context.Background(), env.Config(t)
					got, err := admin.IAM(c).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
					if err != nil {
						return err
					}
					if p := aws.ToString(got.Role.Path); p != "/ghrunner/ci/" {
						return fmt.Errorf("role path %q, want /ghrunner/ci/", p)
					}
					if got.Role.PermissionsBoundary == nil || aws.ToString(got.Role.PermissionsBoundary.PermissionsBoundaryArn) != boundary {
						return fmt.Errorf("permissions boundary %+v, want %s", got.Role.PermissionsBoundary, boundary)
					}
					doc, err := admin.IAM(c).GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(functionPolicyName)})
					if err != nil {
						return err
					}
					text, _ := url.QueryUnescape(aws.ToString(doc.PolicyDocument))
					if !regexp.MustCompile(`:role/ghrunner/ci/ghr-acc-\*`).MatchString(text) {
						return fmt.Errorf("provision may not pass the pool roles under the path: %s", text)
					}
					return nil
				},
			),
		}},
	})
}

// A role's path cannot change: a deployment whose iam_role_path changed
// fails with what to do, and its role is left as it was.
func TestEnsureRole_refusesToMoveARoleToAnotherPath(t *testing.T) {
	ctx, svc := context.Background(), admin.IAM(env.Config(t))
	spec := roleSpec{name: roleNameIn("acc", awstest.Region, "fn-", awstest.Name(t, "fn")), kind: "function", service: "lambda.amazonaws.com",
		policyName: functionPolicyName, policy: scheduleInvokePolicy("arn:aws:lambda:us-east-1:123456789012:function:f"),
		tags: map[string]string{tagEnvironment: "acc"}, path: "/old/"}
	if _, err := ensureRole(ctx, svc, "acc", spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deleteRole(ctx, svc, spec.name, functionPolicyName) })
	spec.path = "/new/"
	_, err := ensureRole(ctx, svc, "acc", spec)
	if err == nil || !strings.Contains(err.Error(), "has path /old/, and iam_role_path is /new/") || !strings.Contains(err.Error(), "Set iam_role_path back to /old/") {
		t.Fatalf("moved to another path: %v", err)
	}
}

func TestProvider_refusesABadRolePathOrBoundary(t *testing.T) {
	for _, c := range []struct{ path, boundary, want string }{
		{"ghrunner", "arn:aws:iam::aws:policy/PowerUserAccess", `iam_role_path.*must be / or /segment/`},
		{"/a*/", "arn:aws:iam::aws:policy/PowerUserAccess", `iam_role_path.*must be / or /segment/`},
		{"/", "PowerUserAccess", `iam_permissions_boundary.*must be the ARN of a managed policy`},
	} {
		t.Run(c.path+" "+c.boundary, func(t *testing.T) {
			resource.UnitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				Steps: []resource.TestStep{{Config: withIAMSettings(functionConfig("tbl", "f", "provision", ""), c.path, c.boundary),
					PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)` + c.want)}},
			})
		})
	}
}
