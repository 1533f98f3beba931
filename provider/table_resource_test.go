package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
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
		return nil
	}
}

func TestAccTable_basic(t *testing.T) {
	name := awstest.Name(t, "tf")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
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
				ResourceName:            "ghrunner_table.state",
				ImportState:             true,
				ImportStateId:           name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"tags"},
			},
		},
	})
}

func TestAccTable_update(t *testing.T) {
	name := awstest.Name(t, "tf")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
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
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
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
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
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
