package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

func tableConfig(name string, pitr bool, tags string) string {
	return providerConfig() + fmt.Sprintf(`
resource "ghrunner_table" "state" {
  name                   = %q
  point_in_time_recovery = %t
  tags                   = %s
}
`, name, pitr, tags)
}

func checkTable(name string, pitr bool) resource.TestCheckFunc {
	return func(*terraform.State) error {
		db := env.Config(&testing.T{}).DynamoDB()
		out, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			return err
		}
		if len(out.Table.GlobalSecondaryIndexes) != 2 {
			return fmt.Errorf("table has %d indexes, want by-run and by-pool-state", len(out.Table.GlobalSecondaryIndexes))
		}
		ttl, err := db.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
		if err != nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != state.AttrExpiresAt {
			return fmt.Errorf("TTL not on expiresAt: %v", err)
		}
		backups, err := db.DescribeContinuousBackups(context.Background(), &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(name)})
		if err != nil {
			return err
		}
		got := backups.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == "ENABLED"
		if got != pitr {
			return fmt.Errorf("point-in-time recovery %v, want %v", got, pitr)
		}
		// Without kms_key_arn: the AWS owned key, which DynamoDB reports as
		// no SSE description (an AWS managed key would be billed by KMS).
		if sse := out.Table.SSEDescription; sse != nil && sse.SSEType == "KMS" && sse.Status == "ENABLED" {
			return fmt.Errorf("encryption %+v: want the AWS owned key", *sse)
		}
		return nil
	}
}

// TestAccTable_recoveryRightAfterCreate: DynamoDB refuses point-in-time
// recovery for a while after CreateTable (moto never does). A proxy refuses
// the first request; the apply waits it out, recovery ends up enabled.
func TestAccTable_recoveryRightAfterCreate(t *testing.T) {
	name := awstest.Name(t, "tf")
	p := refuseFirst(t, "DynamoDB_20120810.UpdateContinuousBackups", "",
		`{"__type":"com.amazonaws.dynamodb.v20120810#ContinuousBackupsUnavailableException","message":"Backups are being enabled for the table: `+name+`. Please retry later"}`)
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{{
			Config: p.config("dynamodb", tableConfig(name, true, `{}`)),
			Check:  resource.ComposeAggregateTestCheckFunc(checkTable(name, true), p.retried),
		}},
	})
}

func TestAccTable_basic(t *testing.T) {
	name := awstest.Name(t, "tf")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: tableConfig(name, false, `{ purpose = "state" }`),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkTable(name, false),
					resource.TestCheckResourceAttr("ghrunner_table.state", "id", name),
					resource.TestMatchResourceAttr("ghrunner_table.state", "arn", regexp.MustCompile(`^arn:aws:dynamodb:us-east-1:\d+:table/`+name+`$`)),
				),
			},
			{
				ResourceName:      "ghrunner_table.state",
				ImportState:       true,
				ImportStateId:     name,
				ImportStateVerify: true,
			},
		},
	})
}

func TestAccTable_update(t *testing.T) {
	name := awstest.Name(t, "tf")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{Config: tableConfig(name, false, `{}`), Check: checkTable(name, false)},
			{
				Config: tableConfig(name, true, `{ owner = "platform" }`),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkTable(name, true),
					resource.TestCheckResourceAttr("ghrunner_table.state", "point_in_time_recovery", "true"),
					resource.TestCheckResourceAttr("ghrunner_table.state", "tags.owner", "platform"),
				),
			},
		},
	})
}

func TestAccTable_disappears(t *testing.T) {
	name := awstest.Name(t, "tf")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: tableConfig(name, false, `{}`),
				Check: func(*terraform.State) error {
					_, err := env.Config(&testing.T{}).DynamoDB().DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
					return err
				},
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

func TestAccTable_validation(t *testing.T) {
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{Config: tableConfig("ab", false, `{}`), ExpectError: regexp.MustCompile(`must be 3-255 characters`), PlanOnly: true},
			{Config: providerConfig() + `
resource "ghrunner_table" "state" {
  name        = "good-name"
  kms_key_arn = "alias/mine"
}`, ExpectError: regexp.MustCompile(`must be a KMS key ARN`), PlanOnly: true},
			{Config: `
provider "ghrunner" {
  region      = "us-east-1"
  environment = "Prod_1"
}
resource "ghrunner_table" "state" { name = "good-name" }`, ExpectError: regexp.MustCompile(`environment`), PlanOnly: true},
		},
	})
}

// tableTags lists the tags of the named table through the SDK (the last
// value of a key listed twice wins, as in the provider).
func tableTags(name string) (map[string]string, error) {
	db := env.Config(&testing.T{}).DynamoDB()
	out, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	tags, err := db.ListTagsOfResource(context.Background(), &dynamodb.ListTagsOfResourceInput{ResourceArn: out.Table.TableArn})
	if err != nil {
		return nil, err
	}
	got := map[string]string{}
	for _, t := range tags.Tags {
		got[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return got, nil
}

func TestAccTable_tagsDrift(t *testing.T) {
	name := awstest.Name(t, "tf")
	list := func() (map[string]string, error) { return tableTags(name) }
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{
				// A tag changed outside Terraform shows in the plan.
				Config: tableConfig(name, false, `{ purpose = "state", owner = "platform" }`),
				Check: resource.ComposeTestCheckFunc(
					checkTagsEqual(list, map[string]string{"ghr:environment": "acc", "team": "ci", "purpose": "state", "owner": "platform"}),
					func(s *terraform.State) error {
						arn := s.RootModule().Resources["ghrunner_table.state"].Primary.Attributes["arn"]
						_, err := env.Config(&testing.T{}).DynamoDB().TagResource(context.Background(), &dynamodb.TagResourceInput{
							ResourceArn: aws.String(arn), Tags: []ddbtypes.Tag{{Key: aws.String("purpose"), Value: aws.String("changed")}}})
						return err
					},
				),
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ghrunner_table.state", plancheck.ResourceActionUpdate),
				}},
			},
			{
				// Dropping an own tag removes it; the provider's tags stay.
				Config: tableConfig(name, false, `{ owner = "platform" }`),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkTagsEqual(list, map[string]string{"ghr:environment": "acc", "team": "ci", "owner": "platform"}),
					resource.TestCheckResourceAttr("ghrunner_table.state", "tags.%", "1"),
				),
			},
			{
				// A default tag overridden with another value is the table's own.
				Config: tableConfig(name, false, `{ owner = "platform", team = "infra" }`),
				Check:  checkTagsEqual(list, map[string]string{"ghr:environment": "acc", "team": "infra", "owner": "platform"}),
			},
			{ResourceName: "ghrunner_table.state", ImportState: true, ImportStateId: name, ImportStateVerify: true},
			{
				// A tag repeating a default with its value stays the table's own.
				Config: tableConfig(name, false, `{ team = "ci" }`),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkTagsEqual(list, map[string]string{"ghr:environment": "acc", "team": "ci"}),
					resource.TestCheckResourceAttr("ghrunner_table.state", "tags.team", "ci"),
				),
			},
		},
	})
}

// TestAccTable_stream turns the stream of new images on for an existing
// table and off again; pools with just-in-time runners need it. (DynamoDB lets a table
// enable a new stream after one was disabled; moto 5.2 refuses, "Cannot
// enable stream", so that step is not played here.)
func TestAccTable_stream(t *testing.T) {
	name := awstest.Name(t, "tf")
	config := func(on bool) string {
		return providerConfig() + fmt.Sprintf("resource \"ghrunner_table\" \"state\" {\n  name   = %q\n  stream = %t\n}\n", name, on)
	}
	streamIs := func(on bool) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			out, err := env.Config(&testing.T{}).DynamoDB().DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(name)})
			if err != nil {
				return err
			}
			spec := out.Table.StreamSpecification
			got := spec != nil && aws.ToBool(spec.StreamEnabled)
			if got != on || on && spec.StreamViewType != ddbtypes.StreamViewTypeNewImage {
				return fmt.Errorf("stream %+v, want enabled=%v with new images", spec, on)
			}
			if arn := s.RootModule().Resources["ghrunner_table.state"].Primary.Attributes["stream_arn"]; on && arn != aws.ToString(out.Table.LatestStreamArn) {
				return fmt.Errorf("stream_arn %q, the table's stream is %q", arn, aws.ToString(out.Table.LatestStreamArn))
			}
			return nil
		}
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{Config: config(false), Check: resource.ComposeAggregateTestCheckFunc(streamIs(false), checkTable(name, false),
				resource.TestCheckNoResourceAttr("ghrunner_table.state", "stream_arn"))},
			// An existing deployment moving to just-in-time runners.
			{Config: config(true), Check: resource.ComposeAggregateTestCheckFunc(streamIs(true),
				resource.TestMatchResourceAttr("ghrunner_table.state", "stream_arn", regexp.MustCompile(`/stream/`)))},
			{Config: config(false), Check: resource.ComposeAggregateTestCheckFunc(streamIs(false),
				resource.TestCheckNoResourceAttr("ghrunner_table.state", "stream_arn"))},
			{ResourceName: "ghrunner_table.state", ImportState: true, ImportStateId: name, ImportStateVerify: true},
		},
	})
}
