package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

func alarmTopicConfig(name string, emails ...string) string {
	list := ""
	if len(emails) > 0 {
		list = `  email_addresses = ["` + strings.Join(emails, `", "`) + "\"]\n"
	}
	return providerConfig() + fmt.Sprintf("resource \"ghrunner_alarm_topic\" \"alarms\" {\n  name = %q\n%s}\n", name, list)
}

// topicEmails reads the topic's e-mail subscriptions from SNS.
func topicEmails(arn string) ([]string, error) {
	out, err := admin.SNS(env.Config(&testing.T{})).ListSubscriptionsByTopic(context.Background(), &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(arn)})
	if err != nil {
		return nil, err
	}
	var emails []string
	for _, s := range out.Subscriptions {
		if aws.ToString(s.Protocol) == "email" {
			emails = append(emails, aws.ToString(s.Endpoint))
		}
	}
	return emails, nil
}

func checkTopicEmails(want ...string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		got, err := topicEmails(s.RootModule().Resources["ghrunner_alarm_topic.alarms"].Primary.ID)
		if err != nil {
			return err
		}
		if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
			return fmt.Errorf("subscriptions %v, want %v", got, want)
		}
		return nil
	}
}

func checkTopicGone(s *terraform.State) error {
	for _, rs := range s.RootModule().Resources {
		if rs.Type != "ghrunner_alarm_topic" {
			continue
		}
		if _, err := admin.SNS(env.Config(&testing.T{})).GetTopicAttributes(context.Background(), &sns.GetTopicAttributesInput{TopicArn: aws.String(rs.Primary.ID)}); err == nil {
			return fmt.Errorf("topic %s left behind", rs.Primary.ID)
		}
	}
	return nil
}

func TestAccAlarmTopic_basic_update_import(t *testing.T) {
	name := awstest.Name(t, "ghr-alarms")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkTopicGone,
		Steps: []resource.TestStep{
			{
				Config: alarmTopicConfig(name, "oncall@example.com"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestMatchResourceAttr("ghrunner_alarm_topic.alarms", "arn", regexp.MustCompile(`^arn:aws:sns:us-east-1:[0-9]{12}:`+name+`$`)),
					checkTopicEmails("oncall@example.com"),
				),
			},
			{
				Config: alarmTopicConfig(name, "ci-team@example.com"),
				Check:  checkTopicEmails("ci-team@example.com"),
			},
			{ResourceName: "ghrunner_alarm_topic.alarms", ImportState: true, ImportStateVerify: true},
		},
	})
}

func TestAccAlarmTopic_disappears(t *testing.T) {
	name := awstest.Name(t, "ghr-alarms")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkTopicGone,
		Steps: []resource.TestStep{{
			Config: alarmTopicConfig(name),
			Check: func(s *terraform.State) error {
				_, err := admin.SNS(env.Config(&testing.T{})).DeleteTopic(context.Background(), &sns.DeleteTopicInput{TopicArn: aws.String(s.RootModule().Resources["ghrunner_alarm_topic.alarms"].Primary.ID)})
				return err
			},
			ExpectNonEmptyPlan: true,
		}},
	})
}

func TestAccAlarmTopic_badInput(t *testing.T) {
	runBadAttrs(t, []badAttr{
		{"name with a dot", alarmTopicConfig("ghr.alarms"), `must be 1-256 characters`},
		{"not an address", alarmTopicConfig("ghr-alarms", "oncall"), `must be an e-mail address`},
	})
}
