package provider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// The CloudWatch Logs groups the provider makes: a function's
// (/aws/lambda/<name>, where Lambda writes) and a pool's
// (/ghrunner/<environment>/<pool>, where its agents write). Each has a
// retention, so logs never pile up unbounded.

// ensureLogGroup makes log group name, or takes the one that exists, and
// sets its retention.
func (c *clients) ensureLogGroup(ctx context.Context, name string, retentionDays int64, tags map[string]string) error {
	logs := admin.Logs(c.aws)
	_, err := logs.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(name), Tags: tags})
	if err != nil && !awserr.IsAlreadyExists(err) {
		return err
	}
	_, err = logs.PutRetentionPolicy(ctx, &cloudwatchlogs.PutRetentionPolicyInput{LogGroupName: aws.String(name), RetentionInDays: aws.Int32(int32(retentionDays))})
	return err
}

// logRetention reads a log group's retention in days; found is false when
// the group is gone.
func (c *clients) logRetention(ctx context.Context, name string) (days int64, found bool, err error) {
	groups, err := admin.Logs(c.aws).DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{LogGroupNamePrefix: aws.String(name)})
	if err != nil {
		return 0, false, err
	}
	for _, g := range groups.LogGroups {
		if aws.ToString(g.LogGroupName) == name {
			return int64(aws.ToInt32(g.RetentionInDays)), true, nil
		}
	}
	return 0, false, nil
}

// deleteLogGroup deletes a log group; one already gone is no error.
func (c *clients) deleteLogGroup(ctx context.Context, name string) error {
	_, err := admin.Logs(c.aws).DeleteLogGroup(ctx, &cloudwatchlogs.DeleteLogGroupInput{LogGroupName: aws.String(name)})
	return awserr.IgnoreNotFound(err)
}

// poolLogGroup is the log group the agents of a pool write to.
func poolLogGroup(environment, pool string) string {
	return "/ghrunner/" + environment + "/" + pool
}
