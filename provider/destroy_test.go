package provider

import (
	"context"
	"errors"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// checkDestroyed is every acceptance test's CheckDestroy: terraform-plugin-
// testing calls it after destroy with the state from before, and it asks
// moto, for each ghrunner resource in that state, whether every AWS object
// the resource made is gone.
func checkDestroyed(s *terraform.State) error {
	ctx, c := context.Background(), env.Config(&testing.T{})
	var errs []error
	addrs := make([]string, 0, len(s.RootModule().Resources))
	for addr := range s.RootModule().Resources {
		addrs = append(addrs, addr)
	}
	sort.Strings(addrs)
	for _, addr := range addrs {
		rs := s.RootModule().Resources[addr]
		gone, ok := objectsGone[rs.Type]
		if !ok || rs.Primary == nil {
			continue // a data source, or another provider's resource
		}
		if err := gone(ctx, c, rs.Primary.ID, rs.Primary.Attributes); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		}
	}
	return errors.Join(errs...)
}

// objectsGone checks, per resource type, the objects one resource of the
// type made, given its id and attributes.
var objectsGone = map[string]func(ctx context.Context, c awsconf.Config, id string, attrs map[string]string) error{
	"ghrunner_table": func(ctx context.Context, c awsconf.Config, id string, _ map[string]string) error {
		_, err := c.DynamoDB().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(id)})
		return gone("table "+id, err)
	},
	"ghrunner_queue": func(ctx context.Context, c awsconf.Config, id string, _ map[string]string) error {
		_, err := c.SQS().GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(id)})
		return gone("queue "+id, err)
	},
	"ghrunner_function": functionGone,
	"ghrunner_monitoring": func(ctx context.Context, c awsconf.Config, id string, attrs map[string]string) error {
		_, err := admin.CloudWatch(c).GetDashboard(ctx, &cloudwatch.GetDashboardInput{DashboardName: aws.String(id)})
		alarms, aerr := admin.CloudWatch(c).DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{AlarmNamePrefix: aws.String(id + "-")})
		if aerr == nil && len(alarms.MetricAlarms) > 0 {
			aerr = fmt.Errorf("%d alarms of %s left", len(alarms.MetricAlarms), id)
		}
		return errors.Join(gone("dashboard "+id, err), aerr)
	},
	"ghrunner_pool": poolGone,
	"ghrunner_schedule": func(ctx context.Context, c awsconf.Config, id string, attrs map[string]string) error {
		_, err := admin.Scheduler(c).GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(id)})
		return errors.Join(gone("schedule "+id, err), roleGone(ctx, c, roleNameOf(attrs["role_arn"])))
	},
}

// functionGone: the function, its role and its log group.
func functionGone(ctx context.Context, c awsconf.Config, id string, attrs map[string]string) error {
	_, err := admin.Lambda(c).GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(id)})
	errs := []error{gone("function "+id, err), roleGone(ctx, c, attrs["role_name"])}
	groups, err := admin.Logs(c).DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{LogGroupNamePrefix: aws.String(attrs["log_group"])})
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("log group %s: %w", attrs["log_group"], err))
	case attrs["log_group"] != "" && len(groups.LogGroups) > 0:
		errs = append(errs, fmt.Errorf("log group %s left behind", attrs["log_group"]))
	}
	return errors.Join(errs...)
}

// poolGone: the pool config item, the launch template, the role and its
// instance profile, the agent bucket and every instance of the pool.
func poolGone(ctx context.Context, c awsconf.Config, id string, attrs map[string]string) error {
	var errs []error
	// The item is gone with its table, or alone (the store's own not-found).
	_, err := state.New(c.DynamoDB(), attrs["table"]).GetPoolConfig(ctx, attrs["name"])
	if !state.IsNotFound(err) {
		errs = append(errs, gone("pool config item "+id, err))
	}
	if lt := attrs["launch_template_id"]; lt != "" {
		// AWS answers NotFound for an unknown id; moto leaves it out.
		out, err := c.EC2().DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{lt}})
		if err != nil || len(out.LaunchTemplates) > 0 {
			errs = append(errs, gone("launch template "+lt, err))
		}
	}
	if role := attrs["role_name"]; role != "" {
		_, err := admin.IAM(c).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(role)})
		errs = append(errs, gone("instance profile "+role, err), roleGone(ctx, c, role))
	}
	if b := attrs["agent_bucket"]; b != "" {
		_, err := admin.S3(c).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(b)})
		errs = append(errs, gone("bucket "+b, err))
	}
	live, err := c.EC2().DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + tagEnvironment), Values: []string{"acc"}},
		{Name: aws.String("tag:" + tagPool), Values: []string{attrs["name"]}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, r := range live.Reservations {
		for _, in := range r.Instances {
			errs = append(errs, fmt.Errorf("instance %s of the pool still %s", aws.ToString(in.InstanceId), in.State.Name))
		}
	}
	return errors.Join(errs...)
}

// roleGone: the role of that name does not exist ("" names none).
func roleGone(ctx context.Context, c awsconf.Config, name string) error {
	if name == "" {
		return nil
	}
	_, err := admin.IAM(c).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	return gone("role "+name, err)
}

// gone turns the answer to a read of what into nil when AWS says it does
// not exist, and an error otherwise.
func gone(what string, err error) error {
	switch {
	case err == nil:
		return fmt.Errorf("%s left behind", what)
	case awserr.IsNotFound(err):
		return nil
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
}
