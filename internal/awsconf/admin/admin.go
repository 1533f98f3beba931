// Package admin builds the clients of the services only deployment and the
// test world call (IAM, S3, Lambda, CloudWatch, CloudWatch Logs, SNS,
// EventBridge Scheduler, STS, ECR, ECS), with awsconf's endpoint overrides.
//
// They live apart from awsconf because importing an SDK service package
// runs its initialisation and maps its code into every binary that links
// it: the agent and the Lambda bundle, which never call these services,
// were 6 MB of resident memory heavier while awsconf held them (measured
// with a program that loads a configuration and sleeps: 18.0 MB against
// 11.6 MB).
package admin

import (
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/cwlogs"
)

// IAM returns an IAM client honouring the overrides.
func IAM(c awsconf.Config) *iam.Client {
	return iam.NewFromConfig(c.AWS, func(o *iam.Options) { o.BaseEndpoint = c.Endpoint("iam") })
}

// S3 returns an S3 client honouring the overrides. Path-style addressing is
// used whenever the endpoint is overridden: emulators and VPC endpoints do not
// resolve bucket subdomains.
func S3(c awsconf.Config) *s3.Client {
	return s3.NewFromConfig(c.AWS, func(o *s3.Options) {
		o.BaseEndpoint = c.Endpoint("s3")
		o.UsePathStyle = o.BaseEndpoint != nil
	})
}

// Lambda returns a Lambda client honouring the overrides.
func Lambda(c awsconf.Config) *lambda.Client {
	return lambda.NewFromConfig(c.AWS, func(o *lambda.Options) { o.BaseEndpoint = c.Endpoint("lambda") })
}

// CloudWatch returns a CloudWatch (metrics, dashboards, alarms) client
// honouring the overrides. The module is held at v1.52, the last release
// that speaks CloudWatch's query protocol: later ones speak Smithy RPC v2
// CBOR, which AWS accepts too but moto 5.2, the test world's CloudWatch,
// answers with a 404. Nothing ghrunner calls changed between them.
func CloudWatch(c awsconf.Config) *cloudwatch.Client {
	return cloudwatch.NewFromConfig(c.AWS, func(o *cloudwatch.Options) { o.BaseEndpoint = c.Endpoint("cloudwatch") })
}

// Logs returns a CloudWatch Logs client honouring the overrides.
func Logs(c awsconf.Config) *cloudwatchlogs.Client { return cwlogs.Client(c) }

// SNS returns an SNS client honouring the overrides.
func SNS(c awsconf.Config) *sns.Client {
	return sns.NewFromConfig(c.AWS, func(o *sns.Options) { o.BaseEndpoint = c.Endpoint("sns") })
}

// Scheduler returns an EventBridge Scheduler client honouring the overrides.
func Scheduler(c awsconf.Config) *scheduler.Client {
	return scheduler.NewFromConfig(c.AWS, func(o *scheduler.Options) { o.BaseEndpoint = c.Endpoint("scheduler") })
}

// STS returns an STS client honouring the overrides.
func STS(c awsconf.Config) *sts.Client {
	return sts.NewFromConfig(c.AWS, func(o *sts.Options) { o.BaseEndpoint = c.Endpoint("sts") })
}

// ECR returns an ECR (repositories, registry login) client honouring the overrides.
func ECR(c awsconf.Config) *ecr.Client {
	return ecr.NewFromConfig(c.AWS, func(o *ecr.Options) { o.BaseEndpoint = c.Endpoint("ecr") })
}

// ECS returns an ECS client honouring the overrides.
func ECS(c awsconf.Config) *ecs.Client {
	return ecs.NewFromConfig(c.AWS, func(o *ecs.Options) { o.BaseEndpoint = c.Endpoint("ecs") })
}
