// Package awsconf is the one place that builds AWS configuration and service
// clients for ghrunner (those of the services only deployment calls are in
// the admin subpackage): region, credentials, per-service endpoint overrides
// (emulators, the sandbox, VPC endpoints) and adaptive retries.
package awsconf

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// Services whose endpoint can be overridden one by one. The names match the
// provider's `endpoints` block and the SDK's AWS_ENDPOINT_URL_<SERVICE> variables.
var Services = []string{"cloudwatch", "dynamodb", "ec2", "ecr", "ecs", "iam", "lambda", "logs", "pricing", "s3", "scheduler", "sns", "sqs", "ssm", "sts"}

// Options say how to reach AWS. The zero value uses the SDK's default chain
// (environment, shared config, instance role) with adaptive retries.
type Options struct {
	Region  string
	Profile string
	// Endpoint, when set, is used for every service that has no entry in Endpoints.
	Endpoint string
	// Endpoints overrides the endpoint of single services, keyed by the names in Services.
	Endpoints map[string]string
	// Static credentials; when AccessKeyID is empty the default chain is used.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// MaxAttempts bounds the retries of one call (default 5).
	MaxAttempts int
}

// Config is an aws.Config together with the per-service endpoint overrides
// that aws.Config cannot hold by itself.
type Config struct {
	AWS       aws.Config
	endpoints map[string]string
}

// Validate reports the first invalid option, naming the field and the rule.
func (o Options) Validate() error {
	if o.Endpoint != "" {
		if err := checkURL(o.Endpoint); err != nil {
			return fmt.Errorf("endpoint: %w", err)
		}
	}
	names := make([]string, 0, len(o.Endpoints))
	for name := range o.Endpoints {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !known(name) {
			return fmt.Errorf("endpoints.%s: unknown service; use one of %s", name, strings.Join(Services, ", "))
		}
		if err := checkURL(o.Endpoints[name]); err != nil {
			return fmt.Errorf("endpoints.%s: %w", name, err)
		}
	}
	if o.MaxAttempts < 0 {
		return fmt.Errorf("max_attempts: must be 0 (default) or more, got %d", o.MaxAttempts)
	}
	if (o.AccessKeyID == "") != (o.SecretAccessKey == "") {
		return fmt.Errorf("access_key_id and secret_access_key: set both or neither")
	}
	return nil
}

// Load builds a Config from opts.
func Load(ctx context.Context, opts Options) (Config, error) {
	if err := opts.Validate(); err != nil {
		return Config{}, err
	}
	attempts := opts.MaxAttempts
	if attempts == 0 {
		attempts = 5
	}
	loaders := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer {
			return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
				o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) {
					so.MaxAttempts = attempts
				})
			})
		}),
	}
	if opts.Region != "" {
		loaders = append(loaders, config.WithRegion(opts.Region))
	}
	if opts.Profile != "" {
		loaders = append(loaders, config.WithSharedConfigProfile(opts.Profile))
	}
	if opts.AccessKeyID != "" {
		loaders = append(loaders, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(opts.AccessKeyID, opts.SecretAccessKey, opts.SessionToken)))
	}
	if opts.Endpoint != "" {
		loaders = append(loaders, config.WithBaseEndpoint(opts.Endpoint))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loaders...)
	if err != nil {
		return Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return Config{}, fmt.Errorf("region: not set; set the region option or AWS_REGION")
	}
	eps := make(map[string]string, len(opts.Endpoints))
	for k, v := range opts.Endpoints {
		eps[k] = v
	}
	return Config{AWS: cfg, endpoints: eps}, nil
}

// FromEnv reads Options from the environment the SDK already understands
// (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>).
// The SDK would read these by itself; reading them here lets Validate name a
// bad value before the first call fails in a confusing way.
func FromEnv() Options {
	o := Options{Region: os.Getenv("AWS_REGION"), Endpoint: os.Getenv("AWS_ENDPOINT_URL")}
	for _, s := range Services {
		if v := os.Getenv("AWS_ENDPOINT_URL_" + strings.ToUpper(s)); v != "" {
			if o.Endpoints == nil {
				o.Endpoints = map[string]string{}
			}
			o.Endpoints[s] = v
		}
	}
	return o
}

// Endpoint returns the override for one service, or nil to use the base endpoint.
func (c Config) Endpoint(service string) *string {
	if v, ok := c.endpoints[service]; ok {
		return aws.String(v)
	}
	return c.AWS.BaseEndpoint
}

// DynamoDB returns a DynamoDB client honouring the overrides.
func (c Config) DynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(c.AWS, func(o *dynamodb.Options) { o.BaseEndpoint = c.Endpoint("dynamodb") })
}

// SQS returns an SQS client honouring the overrides.
func (c Config) SQS() *sqs.Client {
	return sqs.NewFromConfig(c.AWS, func(o *sqs.Options) { o.BaseEndpoint = c.Endpoint("sqs") })
}

// EC2 returns an EC2 client honouring the overrides.
func (c Config) EC2() *ec2.Client {
	return ec2.NewFromConfig(c.AWS, func(o *ec2.Options) { o.BaseEndpoint = c.Endpoint("ec2") })
}

// ServiceQuotas returns a Service Quotas client honouring the overrides.
func (c Config) ServiceQuotas() *servicequotas.Client {
	return servicequotas.NewFromConfig(c.AWS, func(o *servicequotas.Options) { o.BaseEndpoint = c.Endpoint("servicequotas") })
}

// Pricing returns a client of the AWS Price List API honouring the
// overrides. The API answers in a few regions only, whatever the
// deployment's (us-east-1 among them), so it always asks us-east-1.
func (c Config) Pricing() *pricing.Client {
	return pricing.NewFromConfig(c.AWS, func(o *pricing.Options) {
		o.Region = "us-east-1"
		o.BaseEndpoint = c.Endpoint("pricing")
	})
}

// SSM returns an SSM client honouring the overrides.
func (c Config) SSM() *ssm.Client {
	return ssm.NewFromConfig(c.AWS, func(o *ssm.Options) { o.BaseEndpoint = c.Endpoint("ssm") })
}

func known(service string) bool {
	for _, s := range Services {
		if s == service {
			return true
		}
	}
	return false
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL with a host", raw)
	}
	return nil
}
