package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awstest"
)

func queueConfig(name string, visibility int) string {
	return providerConfig() + fmt.Sprintf(`
resource "ghrunner_queue" "linux" {
  name                       = %q
  visibility_timeout_seconds = %d
}
`, name, visibility)
}

func queueAttr(name, attr, want string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		c := env.Config(&testing.T{}).SQS()
		url, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			return err
		}
		out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"All"}})
		if err != nil {
			return err
		}
		if got := out.Attributes[attr]; got != want {
			return fmt.Errorf("%s = %q, want %q", attr, got, want)
		}
		return nil
	}
}

func TestAccQueue_basic_update_import(t *testing.T) {
	name := awstest.Name(t, "pool")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config: queueConfig(name, 30),
				Check: resource.ComposeAggregateTestCheckFunc(
					queueAttr(name, "VisibilityTimeout", "30"),
					queueAttr(name, "SqsManagedSseEnabled", "true"),
					resource.TestCheckResourceAttr("ghrunner_queue.linux", "message_retention_seconds", "86400"),
					resource.TestMatchResourceAttr("ghrunner_queue.linux", "arn", regexp.MustCompile(name+`$`)),
				),
			},
			{Config: queueConfig(name, 45), Check: queueAttr(name, "VisibilityTimeout", "45")},
			{ResourceName: "ghrunner_queue.linux", ImportState: true, ImportStateId: name, ImportStateVerify: true, ImportStateVerifyIgnore: []string{"tags"}},
		},
	})
}

func TestAccQueue_disappears(t *testing.T) {
	name := awstest.Name(t, "pool")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{
			Config: queueConfig(name, 30),
			Check: func(s *terraform.State) error {
				url := s.RootModule().Resources["ghrunner_queue.linux"].Primary.ID
				_, err := env.Config(&testing.T{}).SQS().DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
				return err
			},
			ExpectNonEmptyPlan: true,
		}},
	})
}

func TestAccQueue_validation(t *testing.T) {
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: queueConfig("has space", 30), ExpectError: regexp.MustCompile(`must be 1-80 characters`), PlanOnly: true},
			{Config: queueConfig("ok", 50000), ExpectError: regexp.MustCompile(`between 0 and 43200`), PlanOnly: true},
		},
	})
}
