package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

// checkKeysAndLogs: the pool's instance role id is its role's, and reaches
// both halves of the record key (the config item the control plane keys
// records with, the user data the agent keys its reads with); the log group
// exists with the retention, and the user data names it.
func (f poolFixture) checkKeysAndLogs(retention int32) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		ctx := context.Background()
		c := env.Config(&testing.T{})
		attrs := s.RootModule().Resources["ghrunner_pool.linux"].Primary.Attributes
		role, err := admin.IAM(c).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(attrs["role_name"])})
		if err != nil {
			return err
		}
		id := aws.ToString(role.Role.RoleId)
		cfg, err := f.poolConfig()
		if err != nil {
			return err
		}
		if attrs["instance_role_id"] != id || cfg.InstanceRoleID != id {
			return fmt.Errorf("instance_role_id %q, config item %q; the role's id is %s", attrs["instance_role_id"], cfg.InstanceRoleID, id)
		}
		lt, err := c.EC2().DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(cfg.LaunchTemplateID), Versions: []string{"$Default"}})
		if err != nil {
			return err
		}
		raw, _ := base64.StdEncoding.DecodeString(aws.ToString(lt.LaunchTemplateVersions[0].LaunchTemplateData.UserData))
		u, err := templates.Parse(raw)
		if err != nil {
			return err
		}
		if u.Agent.RoleID != id || u.Agent.LogGroup != "/ghrunner/acc/linux" || attrs["log_group"] != "/ghrunner/acc/linux" {
			return fmt.Errorf("user data role %q log group %q, attribute log_group %q", u.Agent.RoleID, u.Agent.LogGroup, attrs["log_group"])
		}
		groups, err := admin.Logs(c).DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{LogGroupNamePrefix: aws.String("/ghrunner/acc/linux")})
		if err != nil || len(groups.LogGroups) != 1 || aws.ToInt32(groups.LogGroups[0].RetentionInDays) != retention {
			return fmt.Errorf("log group: %+v, %v; want one with %d days", groups, err, retention)
		}
		return nil
	}
}

// A log group deleted and a role replaced outside Terraform: the plan shows
// both, and the apply makes the group again and moves the user data and
// the config item to the new role's id (a new template version).
func TestAccPool_logGroupAndInstanceRoleReplacedOutside(t *testing.T) {
	f := newPoolFixture(t)
	var version string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             resource.ComposeAggregateTestCheckFunc(checkDestroyed, f.checkNothingLeft),
		Steps: []resource.TestStep{
			{
				Config: f.config(""),
				Check: resource.ComposeAggregateTestCheckFunc(f.checkKeysAndLogs(30),
					resource.TestCheckResourceAttr("ghrunner_pool.linux", "log_retention_days", "30"),
					func(s *terraform.State) error {
						version = s.RootModule().Resources["ghrunner_pool.linux"].Primary.Attributes["launch_template_version"]
						return nil
					}),
			},
			{
				Config: f.config("  log_retention_days = 7\n"),
				Check:  f.checkKeysAndLogs(7),
			},
			{
				PreConfig: func() {
					ctx := context.Background()
					c := env.Config(t)
					if _, err := admin.Logs(c).DeleteLogGroup(ctx, &cloudwatchlogs.DeleteLogGroupInput{LogGroupName: aws.String("/ghrunner/acc/linux")}); err != nil {
						t.Fatal(err)
					}
					// The role replaced by hand: same name, new id.
					svc, name := admin.IAM(c), "ghr-acc-us-east-1-pool-linux"
					got, err := svc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := svc.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)}); err != nil {
						t.Fatal(err)
					}
					if _, err := svc.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(agentPolicyName)}); err != nil {
						t.Fatal(err)
					}
					if _, err := svc.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(name)}); err != nil {
						t.Fatal(err)
					}
					if _, err := svc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), Path: got.Role.Path, AssumeRolePolicyDocument: got.Role.AssumeRolePolicyDocument, Tags: got.Role.Tags}); err != nil {
						t.Fatal(err)
					}
				},
				Config: f.config("  log_retention_days = 7\n"),
				Check: resource.ComposeAggregateTestCheckFunc(f.checkKeysAndLogs(7),
					func(s *terraform.State) error {
						if v := s.RootModule().Resources["ghrunner_pool.linux"].Primary.Attributes["launch_template_version"]; v == version {
							return fmt.Errorf("template version still %s after the role's id changed", v)
						}
						return nil
					}),
			},
		},
	})
}
