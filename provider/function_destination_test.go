package provider

import (
	"context"
	"fmt"
	"net/url"
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

// checkOnFailure asserts the function's on-failure destination and that its
// role may publish there (and only when there is one).
func checkOnFailure(name, topic string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx, c := context.Background(), env.Config(&testing.T{})
		async, err := admin.Lambda(c).GetFunctionEventInvokeConfig(ctx, &lambda.GetFunctionEventInvokeConfigInput{FunctionName: aws.String(name)})
		if err != nil {
			return err
		}
		got := ""
		if d := async.DestinationConfig; d != nil && d.OnFailure != nil {
			got = aws.ToString(d.OnFailure.Destination)
		}
		if got != topic || aws.ToInt32(async.MaximumRetryAttempts) != 0 {
			return fmt.Errorf("on-failure destination %q (retries %d), want %q and no retry", got, aws.ToInt32(async.MaximumRetryAttempts), topic)
		}
		pol, err := admin.IAM(c).GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(roleNameIn("acc", awstest.Region, "fn-", name)), PolicyName: aws.String(functionPolicyName)})
		if err != nil {
			return err
		}
		doc, _ := url.QueryUnescape(aws.ToString(pol.PolicyDocument))
		if may := strings.Contains(doc, "sns:Publish"); may != (topic != "") || topic != "" && !strings.Contains(doc, topic) {
			return fmt.Errorf("role may publish: %v, want only to %q:\n%s", may, topic, doc)
		}
		return nil
	}
}

// A scheduled function's failed invocations go to a topic, and no longer
// once it is removed.
func TestAccFunction_onFailureDestination(t *testing.T) {
	table, name := awstest.Name(t, "tbl"), awstest.Name(t, "fn")
	topic := "arn:aws:sns:us-east-1:123456789012:ci-pages"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{Config: functionConfig(table, name, "refresh", fmt.Sprintf("  on_failure_topic_arn = %q\n", topic)), Check: checkOnFailure(name, topic)},
			{ResourceName: "ghrunner_function.fn", ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"tags", "queue_arns"}},
			{Config: functionConfig(table, name, "refresh", ""), Check: checkOnFailure(name, "")},
		},
	})
}
