// Package cwlogs builds the CloudWatch Logs client with awsconf's endpoint
// overrides. It is a package of its own so that the agent, which sends its
// logs, links CloudWatch Logs without the deployment-only services of
// package admin.
package cwlogs

import (
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
)

// Client returns a CloudWatch Logs client honouring the overrides.
func Client(c awsconf.Config) *cloudwatchlogs.Client {
	return cloudwatchlogs.NewFromConfig(c.AWS, func(o *cloudwatchlogs.Options) { o.BaseEndpoint = c.Endpoint("logs") })
}
