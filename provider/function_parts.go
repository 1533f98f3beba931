package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// What a function's apply and read do with Lambda and CloudWatch Logs:
// read back, wait until ready, its environment, its settings, its log
// group (function_resource.go holds the schema and the CRUD).

// read fills m from Lambda and the log group; found is false when the
// function is gone.
func (r *functionResource) read(ctx context.Context, name string, m *functionModel) (bool, error) {
	client := admin.Lambda(r.c.aws)
	out, err := client.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
	if awserr.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	cfg := out.Configuration
	m.ID, m.Name, m.ARN = types.StringValue(name), types.StringValue(aws.ToString(cfg.FunctionName)), types.StringValue(aws.ToString(cfg.FunctionArn))
	m.CodeSHA256 = types.StringValue(aws.ToString(cfg.CodeSha256))
	m.Timeout, m.MemorySize = types.Int64Value(int64(aws.ToInt32(cfg.Timeout))), types.Int64Value(int64(aws.ToInt32(cfg.MemorySize)))
	if len(cfg.Architectures) == 1 {
		m.Architecture = types.StringValue(map[lambdatypes.Architecture]string{lambdatypes.ArchitectureArm64: "arm64", lambdatypes.ArchitectureX8664: "amd64"}[cfg.Architectures[0]])
	}
	if cfg.Environment != nil {
		v := cfg.Environment.Variables
		m.Handler, m.Table, m.GitHubParameter = types.StringValue(v["GHRUNNER_HANDLER"]), types.StringValue(v["GHRUNNER_TABLE"]), types.StringValue(v["GHRUNNER_GITHUB_PARAMETER"])
		m.LogLevel = types.StringValue(v["GHRUNNER_LOG_LEVEL"])
		// A function made before runs were bound has neither: the plan
		// then shows them being set.
		m.OIDCIssuer, m.OIDCAudience = types.StringValue(v["GHRUNNER_OIDC_ISSUER"]), types.StringValue(v["GHRUNNER_OIDC_AUDIENCE"])
	}
	m.RoleName = types.StringValue(roleNameOf(aws.ToString(cfg.Role)))
	m.VPCSubnetIDs, m.VPCSecurityGroupIDs = types.SetNull(types.StringType), types.SetNull(types.StringType)
	if v := cfg.VpcConfig; v != nil && len(v.SubnetIds) > 0 {
		m.VPCSubnetIDs, _ = types.SetValueFrom(ctx, types.StringType, v.SubnetIds)
		m.VPCSecurityGroupIDs, _ = types.SetValueFrom(ctx, types.StringType, v.SecurityGroupIds)
	}
	m.OnFailureTopic = types.StringNull()
	async, err := client.GetFunctionEventInvokeConfig(ctx, &lambda.GetFunctionEventInvokeConfigInput{FunctionName: aws.String(name)})
	if err != nil && !awserr.IsNotFound(err) {
		return false, err
	}
	if err == nil && async.DestinationConfig != nil && async.DestinationConfig.OnFailure != nil && aws.ToString(async.DestinationConfig.OnFailure.Destination) != "" {
		m.OnFailureTopic = types.StringValue(aws.ToString(async.DestinationConfig.OnFailure.Destination))
	}
	conc, err := client.GetFunctionConcurrency(ctx, &lambda.GetFunctionConcurrencyInput{FunctionName: aws.String(name)})
	if err != nil {
		return false, err
	}
	m.ReservedConcurrency = types.Int64Value(-1)
	if conc.ReservedConcurrentExecutions != nil {
		m.ReservedConcurrency = types.Int64Value(int64(*conc.ReservedConcurrentExecutions))
	}
	m.LogGroup = types.StringValue("/aws/lambda/" + name)
	days, found, err := r.c.logRetention(ctx, m.LogGroup.ValueString())
	if err != nil {
		return false, err
	}
	if found {
		m.LogRetentionDays = types.Int64Value(days)
	}
	return true, nil
}

// waitReady waits until Lambda has applied the last change to the function.
func (r *functionResource) waitReady(ctx context.Context, name string) error {
	w := lambda.NewFunctionUpdatedV2Waiter(admin.Lambda(r.c.aws), func(o *lambda.FunctionUpdatedV2WaiterOptions) { o.MinDelay, o.MaxDelay = time.Second, 5*time.Second })
	return w.Wait(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)}, 5*time.Minute)
}

// environment is what the bundle reads its settings from.
func (r *functionResource) environment(m functionModel) map[string]string {
	return map[string]string{
		"GHRUNNER_HANDLER": m.Handler.ValueString(), "GHRUNNER_TABLE": m.Table.ValueString(), "GHRUNNER_ENVIRONMENT": r.c.environment,
		"GHRUNNER_GITHUB_PARAMETER": m.GitHubParameter.ValueString(), "GHRUNNER_LOG_LEVEL": m.LogLevel.ValueString(),
		"GHRUNNER_OIDC_ISSUER": m.OIDCIssuer.ValueString(), "GHRUNNER_OIDC_AUDIENCE": m.OIDCAudience.ValueString(),
	}
}

// maxEventAge bounds how long Lambda keeps an asynchronous invocation (a
// schedule's firing) it could not run yet, e.g. while throttled: by default
// six hours, by when dozens of later firings have done the same work.
const maxEventAge = 10 * 60

// applySettings sets what CreateFunction cannot: concurrency and, for
// asynchronous invocations, no retry and a short maximum age.
func (r *functionResource) applySettings(ctx context.Context, m functionModel) error {
	name := aws.String(m.Name.ValueString())
	client := admin.Lambda(r.c.aws)
	if c := m.ReservedConcurrency.ValueInt64(); c >= 0 {
		if _, err := client.PutFunctionConcurrency(ctx, &lambda.PutFunctionConcurrencyInput{FunctionName: name, ReservedConcurrentExecutions: aws.Int32(int32(c))}); err != nil {
			return fmt.Errorf("reserved concurrency: %w", err)
		}
	} else if _, err := client.DeleteFunctionConcurrency(ctx, &lambda.DeleteFunctionConcurrencyInput{FunctionName: name}); awserr.IgnoreNotFound(err) != nil {
		return fmt.Errorf("reserved concurrency: %w", err)
	}
	async := &lambda.PutFunctionEventInvokeConfigInput{FunctionName: name, MaximumRetryAttempts: aws.Int32(0), MaximumEventAgeInSeconds: aws.Int32(maxEventAge)}
	if topic := m.OnFailureTopic.ValueString(); topic != "" {
		async.DestinationConfig = &lambdatypes.DestinationConfig{OnFailure: &lambdatypes.OnFailure{Destination: aws.String(topic)}}
	} else if cur, err := client.GetFunctionEventInvokeConfig(ctx, &lambda.GetFunctionEventInvokeConfigInput{FunctionName: name}); err == nil &&
		cur.DestinationConfig != nil && cur.DestinationConfig.OnFailure != nil && aws.ToString(cur.DestinationConfig.OnFailure.Destination) != "" {
		// A destination given up: delete the configuration rather than
		// trust a put without it to drop the one there (moto keeps it).
		if _, err := client.DeleteFunctionEventInvokeConfig(ctx, &lambda.DeleteFunctionEventInvokeConfigInput{FunctionName: name}); err != nil {
			return fmt.Errorf("asynchronous invocation config: %w", err)
		}
	}
	err := retryWhile(ctx, 2*time.Second, 2*time.Minute, lambdaGrantNotSeen, func() error {
		_, err := client.PutFunctionEventInvokeConfig(ctx, async)
		return err
	})
	if err != nil {
		return fmt.Errorf("asynchronous invocation config: %w", err)
	}
	return r.ensureStreamSource(ctx, m)
}

// ensureLogGroup makes the function's log group, or takes the one that
// exists, and sets its retention.
func (r *functionResource) ensureLogGroup(ctx context.Context, m functionModel, tags map[string]string) error {
	return r.c.ensureLogGroup(ctx, m.LogGroup.ValueString(), m.LogRetentionDays.ValueInt64(), tags)
}
