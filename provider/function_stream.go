package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

// The jit function is fed by the state table's stream through an event
// source mapping the function resource owns: only new images that carry
// an agent's request (Lambda's event filtering: heartbeats and every other
// write of a record without one invoke nothing), from the latest record,
// one shard batch at a time; a record the function reports failed is
// retried from it (partial batch responses), and a request older than
// five minutes is dropped (the agent asks again every few seconds).

// jitRecordAge bounds the age of a stream record the consumer still gets.
const jitRecordAge = 300

// jitFilter passes the new images whose signals hold UD_JIT_NEXT.
const jitFilter = `{"dynamodb":{"NewImage":{"signals":{"M":{"UD_JIT_NEXT":{"M":{"assignment":{"S":[{"exists":true}]}}}}}}}}`

// ensureStreamSource makes the jit function's event source mapping from
// the table's stream, or checks the one there; other handlers have none.
func (r *functionResource) ensureStreamSource(ctx context.Context, m functionModel) error {
	if m.Handler.ValueString() != bundle.HandlerJIT {
		return nil
	}
	table, err := r.c.aws.DynamoDB().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(m.Table.ValueString())})
	if err != nil {
		return fmt.Errorf("table %q: %w", m.Table.ValueString(), err)
	}
	stream := aws.ToString(table.Table.LatestStreamArn)
	if spec := table.Table.StreamSpecification; spec == nil || !aws.ToBool(spec.StreamEnabled) || stream == "" {
		return fmt.Errorf("table %q has no stream: the jit function reads the agents' requests from it; set stream = true on its ghrunner_table", m.Table.ValueString())
	}
	mappings, err := r.streamSources(ctx, m.Name.ValueString())
	if err != nil {
		return err
	}
	for _, sm := range mappings {
		if aws.ToString(sm.EventSourceArn) == stream {
			return nil
		}
		// A stream the table no longer has (turned off and on again).
		if _, err := admin.Lambda(r.c.aws).DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: sm.UUID}); awserr.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete the event source mapping of an old stream: %w", err)
		}
	}
	err = retryWhile(ctx, 2*time.Second, 2*time.Minute, lambdaGrantNotSeen, func() error {
		_, err := admin.Lambda(r.c.aws).CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{
			FunctionName: aws.String(m.Name.ValueString()), EventSourceArn: aws.String(stream), Enabled: aws.Bool(true),
			StartingPosition: lambdatypes.EventSourcePositionLatest, BatchSize: aws.Int32(10), MaximumBatchingWindowInSeconds: aws.Int32(0),
			FunctionResponseTypes:     []lambdatypes.FunctionResponseType{lambdatypes.FunctionResponseTypeReportBatchItemFailures},
			MaximumRecordAgeInSeconds: aws.Int32(jitRecordAge), MaximumRetryAttempts: aws.Int32(10), BisectBatchOnFunctionError: aws.Bool(true),
			FilterCriteria: &lambdatypes.FilterCriteria{Filters: []lambdatypes.Filter{{Pattern: aws.String(jitFilter)}}},
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("event source mapping from %s: %w", stream, err)
	}
	return nil
}

// streamSources lists the function's event source mappings.
func (r *functionResource) streamSources(ctx context.Context, function string) ([]lambdatypes.EventSourceMappingConfiguration, error) {
	var all []lambdatypes.EventSourceMappingConfiguration
	in := &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(function)}
	for {
		out, err := admin.Lambda(r.c.aws).ListEventSourceMappings(ctx, in)
		if awserr.IsNotFound(err) {
			return all, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list the event source mappings of %s: %w", function, err)
		}
		all = append(all, out.EventSourceMappings...)
		if aws.ToString(out.NextMarker) == "" {
			return all, nil
		}
		in.Marker = out.NextMarker
	}
}

// deleteStreamSources deletes the function's event source mappings, which
// outlive a deleted function.
func (r *functionResource) deleteStreamSources(ctx context.Context, function string) error {
	mappings, err := r.streamSources(ctx, function)
	if err != nil {
		return err
	}
	for _, sm := range mappings {
		if _, err := admin.Lambda(r.c.aws).DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: sm.UUID}); awserr.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete event source mapping %s: %w", aws.ToString(sm.UUID), err)
		}
	}
	return nil
}
