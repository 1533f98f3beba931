package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
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
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
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
			{ResourceName: "ghrunner_queue.linux", ImportState: true, ImportStateId: name, ImportStateVerify: true},
		},
	})
}

func TestAccQueue_disappears(t *testing.T) {
	name := awstest.Name(t, "pool")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
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
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{Config: queueConfig("has space", 30), ExpectError: regexp.MustCompile(`must be 1-80 characters`), PlanOnly: true},
			{Config: queueConfig("ok", 50000), ExpectError: regexp.MustCompile(`between 0 and 43200`), PlanOnly: true},
		},
	})
}

func queueTagsConfig(name, tags string) string {
	return providerConfig() + fmt.Sprintf(`
resource "ghrunner_queue" "linux" {
  name = %q
  tags = %s
}
`, name, tags)
}

// queueTags lists the tags of the named queue through the SDK.
func queueTags(name string) (map[string]string, error) {
	c := env.Config(&testing.T{}).SQS()
	url, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	out, err := c.ListQueueTags(context.Background(), &sqs.ListQueueTagsInput{QueueUrl: url.QueueUrl})
	if err != nil {
		return nil, err
	}
	return out.Tags, nil
}

// checkTagsEqual compares the tags list returns with want, exactly.
func checkTagsEqual(list func() (map[string]string, error), want map[string]string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		got, err := list()
		if err != nil {
			return err
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("tags = %v, want %v", got, want)
		}
		return nil
	}
}

func TestAccQueue_tagsDrift(t *testing.T) {
	name := awstest.Name(t, "pool")
	list := func() (map[string]string, error) { return queueTags(name) }
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{
				// A tag changed outside Terraform shows in the plan.
				Config: queueTagsConfig(name, `{ purpose = "pool", owner = "platform" }`),
				Check: resource.ComposeTestCheckFunc(
					checkTagsEqual(list, map[string]string{"ghr:environment": "acc", "team": "ci", "purpose": "pool", "owner": "platform"}),
					func(s *terraform.State) error {
						url := s.RootModule().Resources["ghrunner_queue.linux"].Primary.ID
						_, err := env.Config(&testing.T{}).SQS().TagQueue(context.Background(), &sqs.TagQueueInput{QueueUrl: aws.String(url), Tags: map[string]string{"purpose": "changed"}})
						return err
					},
				),
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ghrunner_queue.linux", plancheck.ResourceActionUpdate),
				}},
			},
			{
				// Dropping an own tag removes it; the provider's tags stay.
				Config: queueTagsConfig(name, `{ owner = "platform" }`),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkTagsEqual(list, map[string]string{"ghr:environment": "acc", "team": "ci", "owner": "platform"}),
					resource.TestCheckResourceAttr("ghrunner_queue.linux", "tags.%", "1"),
				),
			},
			{
				// A default tag overridden with another value is the queue's own.
				Config: queueTagsConfig(name, `{ owner = "platform", team = "infra" }`),
				Check:  checkTagsEqual(list, map[string]string{"ghr:environment": "acc", "team": "infra", "owner": "platform"}),
			},
			{ResourceName: "ghrunner_queue.linux", ImportState: true, ImportStateId: name, ImportStateVerify: true},
			{
				// Back to no tags: the attribute is null again and only the provider's tags are left.
				Config: queueConfig(name, 30),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkTagsEqual(list, map[string]string{"ghr:environment": "acc", "team": "ci"}),
					resource.TestCheckNoResourceAttr("ghrunner_queue.linux", "tags.%"),
				),
			},
		},
	})
}

// queueDLQConfig is a pool queue and its dead letter queue; count < 0
// leaves max_receive_count unset, dlq false leaves the redrive out.
func queueDLQConfig(name string, dlq bool, count int) string {
	redrive := ""
	if dlq {
		redrive = "  dead_letter_queue_arn = ghrunner_queue.dlq.arn\n"
		if count >= 0 {
			redrive += fmt.Sprintf("  max_receive_count     = %d\n", count)
		}
	}
	return providerConfig() + fmt.Sprintf(`
resource "ghrunner_queue" "dlq" {
  name                      = "%[1]s-dlq"
  message_retention_seconds = 1209600
}

resource "ghrunner_queue" "linux" {
  name = %[1]q
%[2]s}
`, name, redrive)
}

// checkRedrive checks the queue's RedrivePolicy through the SDK; count 0
// means there must be none.
func checkRedrive(name string, count int) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		c := env.Config(&testing.T{}).SQS()
		url, err := c.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			return err
		}
		out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"All"}})
		if err != nil {
			return err
		}
		raw := out.Attributes["RedrivePolicy"]
		if count == 0 {
			if raw != "" {
				return fmt.Errorf("RedrivePolicy = %s, want none", raw)
			}
			return nil
		}
		var p struct {
			Target string `json:"deadLetterTargetArn"`
			Count  int    `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(raw), &p); err != nil {
			return fmt.Errorf("RedrivePolicy %q: %v", raw, err)
		}
		want := s.RootModule().Resources["ghrunner_queue.dlq"].Primary.Attributes["arn"]
		if p.Target != want || p.Count != count {
			return fmt.Errorf("RedrivePolicy = %s, want target %s and count %d", raw, want, count)
		}
		return nil
	}
}

func TestAccQueue_deadLetter(t *testing.T) {
	name := awstest.Name(t, "pool")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: queueDLQConfig(name, true, -1),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkRedrive(name, 1000),
					resource.TestCheckResourceAttr("ghrunner_queue.linux", "max_receive_count", "1000"),
					resource.TestCheckResourceAttrPair("ghrunner_queue.linux", "dead_letter_queue_arn", "ghrunner_queue.dlq", "arn"),
					resource.TestCheckNoResourceAttr("ghrunner_queue.dlq", "dead_letter_queue_arn"),
				),
			},
			{
				Config: queueDLQConfig(name, true, 50),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkRedrive(name, 50),
					resource.TestCheckResourceAttr("ghrunner_queue.linux", "max_receive_count", "50"),
				),
			},
			{ResourceName: "ghrunner_queue.linux", ImportState: true, ImportStateId: name, ImportStateVerify: true},
			{
				// No dead letter queue: the policy goes; one put back outside
				// Terraform then shows in the plan.
				Config: queueDLQConfig(name, false, -1),
				Check: resource.ComposeTestCheckFunc(
					checkRedrive(name, 0),
					resource.TestCheckNoResourceAttr("ghrunner_queue.linux", "dead_letter_queue_arn"),
					resource.TestCheckResourceAttr("ghrunner_queue.linux", "max_receive_count", "1000"),
					func(s *terraform.State) error {
						url := s.RootModule().Resources["ghrunner_queue.linux"].Primary.ID
						dlq := s.RootModule().Resources["ghrunner_queue.dlq"].Primary.Attributes["arn"]
						policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":3}`, dlq)
						_, err := env.Config(&testing.T{}).SQS().SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{
							QueueUrl: aws.String(url), Attributes: map[string]string{"RedrivePolicy": policy}})
						return err
					},
				),
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ghrunner_queue.linux", plancheck.ResourceActionUpdate),
				}},
			},
		},
	})
}

func TestAccQueue_deadLetterValidation(t *testing.T) {
	withDLQ := func(arn string, count string) string {
		return providerConfig() + fmt.Sprintf(`
resource "ghrunner_queue" "linux" {
  name                  = "ok"
  dead_letter_queue_arn = %s
  max_receive_count     = %s
}
`, arn, count)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{Config: withDLQ(`"arn:aws:sns:us-east-1:123456789012:topic"`, "10"), ExpectError: regexp.MustCompile(`must be the ARN of a standard SQS queue`), PlanOnly: true},
			{Config: withDLQ(`"arn:aws:sqs:us-east-1:123456789012:dlq.fifo"`, "10"), ExpectError: regexp.MustCompile(`must be the ARN of a standard SQS queue`), PlanOnly: true},
			{Config: withDLQ(`"arn:aws:sqs:us-east-1:123456789012:dlq"`, "0"), ExpectError: regexp.MustCompile(`between 1 and 1000`), PlanOnly: true},
			{Config: withDLQ(`"arn:aws:sqs:us-east-1:123456789012:dlq"`, "1001"), ExpectError: regexp.MustCompile(`between 1 and 1000`), PlanOnly: true},
			{Config: withDLQ("null", "10"), ExpectError: regexp.MustCompile(`dead_letter_queue_arn`), PlanOnly: true},
		},
	})
}

// TestAccQueue_recreatedWithinAMinute: SQS refuses a queue name deleted less
// than 60 s ago (QueueDeletedRecently; moto never does). In front of moto, a
// proxy answers the first CreateQueue so; the apply waits it out and succeeds.
func TestAccQueue_recreatedWithinAMinute(t *testing.T) {
	name := awstest.Name(t, "pool")
	p := refuseFirst(t, "AmazonSQS.CreateQueue", "AWS.SimpleQueueService.QueueDeletedRecently;Sender",
		`{"__type":"com.amazonaws.sqs#QueueDeletedRecently","message":"You must wait 60 seconds after deleting a queue before you can create another with the same name."}`)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{{
			Config: p.config("sqs", queueConfig(name, 30)),
			Check:  resource.ComposeAggregateTestCheckFunc(queueAttr(name, "VisibilityTimeout", "30"), p.retried),
		}},
	})
}
