package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// A part of a pool deleted outside Terraform (pool_drift.go): the refresh
// shows it gone in the attribute that names it (also with
// terraform plan -refresh-only), the plan is not empty, and the apply makes
// the part again without replacing the pool (its bucket stays, unless the
// bucket was the part).
//
// Controls, run once each: with Read and ModifyPlan as they were before
// (commit 7355c97, which read the config item, the template and the log
// group only, and the role's id in ModifyPlan) every test here fails but
// logGroup: configItem and launchTemplate drop the pool from state and the
// re-created pool leaves the old parts behind (CheckDestroy), instanceRole
// refreshes with the deleted role's id, instanceProfile and the agent ones
// get an empty plan. logGroup fails with the log group's read taken out of
// Read (an empty plan).

// The whole pool gone (its config item and its launch template: nothing
// names it to the control plane): the refresh drops it from the state and
// the plan makes it again. A part gone is pool_drift_test.go's.
func TestAccPool_disappears(t *testing.T) {
	f := newPoolFixture(t)
	var attrs map[string]string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             resource.ComposeAggregateTestCheckFunc(checkDestroyed, f.checkNothingLeft),
		Steps: []resource.TestStep{
			{
				Config: f.config(""),
				Check: func(s *terraform.State) error {
					ctx, c := context.Background(), env.Config(&testing.T{})
					attrs = s.RootModule().Resources["ghrunner_pool.linux"].Primary.Attributes
					id := attrs["launch_template_id"]
					if err := state.New(c.DynamoDB(), f.table).DeletePoolConfig(ctx, "linux"); err != nil {
						return err
					}
					_, err := c.EC2().DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
					return err
				},
				ExpectNonEmptyPlan: true,
			},
			{
				RefreshState: true,
				Check: func(s *terraform.State) error {
					if _, ok := s.RootModule().Resources["ghrunner_pool.linux"]; ok {
						return fmt.Errorf("the pool is still in the state after its config item and template were deleted")
					}
					// What is left of it is no longer Terraform's: the
					// operator deletes it (here, so that destroy leaves
					// nothing and the next test's pool can take the role
					// name).
					ctx, r := context.Background(), &poolResource{configured{c: &clients{aws: env.Config(&testing.T{})}}}
					return errors.Join(r.deleteInstanceRole(ctx, attrs["role_name"]), r.deleteBucket(ctx, attrs["agent_bucket"]), r.c.deleteLogGroup(ctx, attrs["log_group"]))
				},
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// poolPart is what a _disappears test removes, and how the refresh shows it.
type poolPart struct {
	remove func(ctx context.Context, attrs map[string]string) error
	// attr reads want after the refresh.
	attr, want string
	// newBucket: the apply makes a new agent bucket (the part was the bucket).
	newBucket bool
}

func (f poolFixture) testDisappears(t *testing.T, part poolPart) {
	var bucket string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             resource.ComposeAggregateTestCheckFunc(checkDestroyed, f.checkNothingLeft),
		Steps: []resource.TestStep{
			{
				Config: f.config(""),
				Check: func(s *terraform.State) error {
					attrs := s.RootModule().Resources["ghrunner_pool.linux"].Primary.Attributes
					bucket = attrs["agent_bucket"]
					return part.remove(context.Background(), attrs)
				},
				ExpectNonEmptyPlan: true,
			},
			{
				RefreshState:       true,
				Check:              resource.TestCheckResourceAttr("ghrunner_pool.linux", part.attr, part.want),
				ExpectNonEmptyPlan: true,
			},
			{
				Config: f.config(""),
				Check: resource.ComposeAggregateTestCheckFunc(f.checkKeysAndLogs(30), f.checkPartsThere,
					func(s *terraform.State) error {
						got := s.RootModule().Resources["ghrunner_pool.linux"].Primary.Attributes["agent_bucket"]
						if (got != bucket) != part.newBucket {
							return fmt.Errorf("agent bucket %s, before %s (a new one expected: %v)", got, bucket, part.newBucket)
						}
						return nil
					}),
			},
		},
	})
}

// checkPartsThere: the template, the profile holding the role, and the
// agent object the state names exist.
func (f poolFixture) checkPartsThere(s *terraform.State) error {
	ctx, c := context.Background(), env.Config(&testing.T{})
	attrs := s.RootModule().Resources["ghrunner_pool.linux"].Primary.Attributes
	if _, err := c.EC2().DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{attrs["launch_template_id"]}}); err != nil {
		return fmt.Errorf("launch template %q: %v", attrs["launch_template_id"], err)
	}
	prof, err := admin.IAM(c).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(attrs["role_name"])})
	if err != nil || len(prof.InstanceProfile.Roles) != 1 || aws.ToString(prof.InstanceProfile.Arn) != attrs["instance_profile_arn"] {
		return fmt.Errorf("instance profile of %s: %+v, %v; want it holding the role, ARN %s", attrs["role_name"], prof, err, attrs["instance_profile_arn"])
	}
	obj, err := admin.S3(c).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(attrs["agent_bucket"]), Key: aws.String(agentKey(attrs["agent_sha256"]))})
	if want, _ := agentAsset("amd64"); err != nil || aws.ToInt64(obj.ContentLength) != int64(len(want.data)) {
		return fmt.Errorf("agent object in %s: %v", attrs["agent_bucket"], err)
	}
	return nil
}

func TestAccPool_disappears_configItem(t *testing.T) {
	f := newPoolFixture(t)
	f.testDisappears(t, poolPart{attr: "queue_url", want: "", remove: func(ctx context.Context, _ map[string]string) error {
		return state.New(env.Config(t).DynamoDB(), f.table).DeletePoolConfig(ctx, "linux")
	}})
}

func TestAccPool_disappears_launchTemplate(t *testing.T) {
	f := newPoolFixture(t)
	f.testDisappears(t, poolPart{attr: "launch_template_id", want: "", remove: func(ctx context.Context, attrs map[string]string) error {
		_, err := env.Config(t).EC2().DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(attrs["launch_template_id"])})
		return err
	}})
}

func TestAccPool_disappears_instanceRole(t *testing.T) {
	f := newPoolFixture(t)
	f.testDisappears(t, poolPart{attr: "instance_role_id", want: "", remove: func(ctx context.Context, attrs map[string]string) error {
		svc, name := admin.IAM(env.Config(t)), attrs["role_name"]
		if _, err := svc.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)}); err != nil {
			return err
		}
		if _, err := svc.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(agentPolicyName)}); err != nil {
			return err
		}
		_, err := svc.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(name)})
		return err
	}})
}

func TestAccPool_disappears_instanceProfile(t *testing.T) {
	f := newPoolFixture(t)
	f.testDisappears(t, poolPart{attr: "instance_profile_arn", want: "", remove: func(ctx context.Context, attrs map[string]string) error {
		svc, name := admin.IAM(env.Config(t)), attrs["role_name"]
		if _, err := svc.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)}); err != nil {
			return err
		}
		_, err := svc.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)})
		return err
	}})
}

func TestAccPool_disappears_agentObject(t *testing.T) {
	f := newPoolFixture(t)
	f.testDisappears(t, poolPart{attr: "agent_sha256", want: "", remove: func(ctx context.Context, attrs map[string]string) error {
		_, err := admin.S3(env.Config(t)).DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(attrs["agent_bucket"]), Key: aws.String(agentKey(attrs["agent_sha256"]))})
		return err
	}})
}

// The agent overwritten with other bytes under its key: its ETag tells.
func TestAccPool_disappears_agentObjectContent(t *testing.T) {
	f := newPoolFixture(t)
	f.testDisappears(t, poolPart{attr: "agent_sha256", want: "", remove: func(ctx context.Context, attrs map[string]string) error {
		_, err := admin.S3(env.Config(t)).PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(attrs["agent_bucket"]), Key: aws.String(agentKey(attrs["agent_sha256"])),
			Body: strings.NewReader("#!/bin/sh\necho not the agent\n")})
		return err
	}})
}

func TestAccPool_disappears_agentBucket(t *testing.T) {
	f := newPoolFixture(t)
	f.testDisappears(t, poolPart{attr: "agent_bucket", want: "", newBucket: true, remove: func(ctx context.Context, attrs map[string]string) error {
		return (&poolResource{configured{c: &clients{aws: env.Config(t)}}}).deleteBucket(ctx, attrs["agent_bucket"])
	}})
}

func TestAccPool_disappears_logGroup(t *testing.T) {
	f := newPoolFixture(t)
	f.testDisappears(t, poolPart{attr: "log_retention_days", want: "0", remove: func(ctx context.Context, attrs map[string]string) error {
		_, err := admin.Logs(env.Config(t)).DeleteLogGroup(ctx, &cloudwatchlogs.DeleteLogGroupInput{LogGroupName: aws.String(attrs["log_group"])})
		return err
	}})
}

// The warning beside a drifted pool's plan names each part read found gone
// or changed, and a pool read whole names none.
func TestDriftedPartsNamesEachPartReadFoundGone(t *testing.T) {
	whole := poolModel{Table: types.StringValue("ghr"), Name: types.StringValue("linux"), QueueURL: types.StringValue("https://q"), Owner: types.StringValue("acme"),
		LaunchTemplateID: types.StringValue("lt-1"), RoleName: types.StringValue("r"), InstanceRoleID: types.StringValue("AROA1"), InstanceProfileARN: types.StringValue("arn:p"),
		AgentPath: types.StringNull(), AgentBucket: types.StringValue("b"), AgentSHA256: types.StringValue("ab"), LogRetentionDays: types.Int64Value(30)}
	if got := driftedParts(whole, "/ghrunner/acc/linux"); len(got) != 0 {
		t.Fatalf("a whole pool: %q", got)
	}
	gone := whole
	gone.QueueURL, gone.Owner, gone.LaunchTemplateID, gone.InstanceRoleID, gone.InstanceProfileARN = types.StringValue(""), types.StringValue(""), types.StringValue(""), types.StringValue(""), types.StringValue("")
	gone.AgentSHA256, gone.LogRetentionDays = types.StringValue(""), types.Int64Value(0)
	got := strings.Join(driftedParts(gone, "/ghrunner/acc/linux"), "\n")
	for _, want := range []string{"config item", "launch template", "instance role r", "instance profile r", "agent object in bucket b", "log group /ghrunner/acc/linux"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q not named in:\n%s", want, got)
		}
	}
	gone.AgentBucket = types.StringValue("")
	if got := strings.Join(driftedParts(gone, "x"), "\n"); !strings.Contains(got, "the agent bucket") || strings.Contains(got, "agent object") {
		t.Errorf("bucket gone:\n%s", got)
	}
}
