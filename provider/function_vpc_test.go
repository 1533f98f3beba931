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
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// Functions in a VPC (issue 15 item 13: a private GitHub Enterprise Server):
// Lambda gets the subnets and security groups, and the execution role may
// manage the network interfaces only while the function is in one.

// checkFunctionVPC compares the function's VPC placement and its role's
// policy with want (nil: not in a VPC).
func checkFunctionVPC(name string, want []string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx, c := context.Background(), env.Config(&testing.T{})
		out, err := admin.Lambda(c).GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
		if err != nil {
			return err
		}
		var got []string
		if v := out.Configuration.VpcConfig; v != nil {
			got = append(append(got, v.SubnetIds...), v.SecurityGroupIds...)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Errorf("VPC placement %v, want %v", got, want)
		}
		pol, err := admin.IAM(c).GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(roleNameIn("acc", awstest.Region, "fn-", name)), PolicyName: aws.String(functionPolicyName)})
		if err != nil {
			return err
		}
		doc, _ := url.QueryUnescape(aws.ToString(pol.PolicyDocument))
		if has := strings.Contains(doc, "ec2:CreateNetworkInterface"); has != (want != nil) {
			return fmt.Errorf("in a VPC %v, but the role may manage network interfaces: %v", want != nil, has)
		}
		return nil
	}
}

func TestAccFunction_inAVPCAndOutAgain(t *testing.T) {
	table, name := awstest.Name(t, "tbl"), awstest.Name(t, "fn")
	n := env.Network(t)
	vpc := fmt.Sprintf("  vpc_subnet_ids = [%q]\n  vpc_security_group_ids = [%q]\n", n.Subnet, n.SecurityGroup)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{Config: functionConfig(table, name, "provision", vpc), Check: checkFunctionVPC(name, []string{n.Subnet, n.SecurityGroup})},
			{ResourceName: "ghrunner_function.fn", ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"tags", "queue_arns"}},
			{Config: functionConfig(table, name, "provision", ""), Check: checkFunctionVPC(name, nil)},
		},
	})
}

func TestFunction_refusesHalfAVPC(t *testing.T) {
	resource.UnitTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{Config: functionConfig("tbl", "f", "provision", `  vpc_subnet_ids = ["subnet-0123456789abcdef0"]`), PlanOnly: true,
			ExpectError: regexp.MustCompile(`(?s)vpc_security_group_ids.*must be specified`)}},
	})
}
