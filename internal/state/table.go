// Package state is the DynamoDB state store described in docs/design.md: the single
// source of truth for instances, runs and pool configuration. Every change of
// an instance's state is one conditional UpdateItem, so exactly one writer wins
// and a loser learns which clause of the condition it failed.
package state

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute and index names of the table (docs/design.md).
const (
	AttrPK         = "pk"
	AttrRunID      = "runId"
	AttrPoolState  = "poolState"
	AttrThreshold  = "threshold"
	AttrExpiresAt  = "expiresAt"
	IndexByRun     = "by-run"
	IndexPoolState = "by-pool-state"
)

// projected lists the attributes copied into both indexes. heartbeatAt,
// signals and registration are left out on purpose: they change often or are
// secret, and the index copy would cost a write on every heartbeat.
var projected = []string{
	"kind", "instanceId", "pool", "owner", "state", "assignment", "launchedAt",
	"launchTemplateVersion", "instanceType", "usageClass", "runnerName", "githubRunnerId",
	"pooledAt", "uses", "version", "expiresAt", "terminatedReason",
}

// TableOptions are the choices a deployment makes about its table.
type TableOptions struct {
	PointInTimeRecovery bool
	// KMSKeyARN selects a customer managed key; empty means the AWS owned key.
	KMSKeyARN string
	Tags      map[string]string
	// Stream turns on the table's stream of new images: the just-in-time
	// consumer (lambdas/jitstream) reads the agents' requests from it.
	Stream bool
}

// TableDefinition returns the CreateTable request for a state table: on-demand
// billing, key pk, the sparse by-run index and the by-pool-state index.
func TableDefinition(name string, opts TableOptions) *dynamodb.CreateTableInput {
	projection := &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: projected}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrRunID), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrPoolState), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrThreshold), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(AttrPK), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{
				IndexName:  aws.String(IndexByRun),
				KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String(AttrRunID), KeyType: types.KeyTypeHash}},
				Projection: projection,
			},
			{
				IndexName: aws.String(IndexPoolState),
				KeySchema: []types.KeySchemaElement{
					{AttributeName: aws.String(AttrPoolState), KeyType: types.KeyTypeHash},
					{AttributeName: aws.String(AttrThreshold), KeyType: types.KeyTypeRange},
				},
				Projection: projection,
			},
		},
	}
	// No SSESpecification is the AWS owned key (free). Enabled without a key
	// would be the AWS managed key, which KMS bills per request.
	if opts.KMSKeyARN != "" {
		in.SSESpecification = &types.SSESpecification{Enabled: aws.Bool(true), SSEType: types.SSETypeKms, KMSMasterKeyId: aws.String(opts.KMSKeyARN)}
	}
	if opts.Stream {
		in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}
	}
	for k, v := range opts.Tags {
		in.Tags = append(in.Tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return in
}

// TableAPI is the part of DynamoDB needed to create a table.
type TableAPI interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	UpdateContinuousBackups(context.Context, *dynamodb.UpdateContinuousBackupsInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateContinuousBackupsOutput, error)
}

// CreateTable creates the table, waits until it is active and turns on TTL on
// expiresAt (and point-in-time recovery when asked).
func CreateTable(ctx context.Context, client TableAPI, name string, opts TableOptions) error {
	if _, err := client.CreateTable(ctx, TableDefinition(name, opts)); err != nil {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client)
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, waiterLimit); err != nil {
		return fmt.Errorf("wait for table %s: %w", name, err)
	}
	if _, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(AttrExpiresAt), Enabled: aws.Bool(true)},
	}); err != nil {
		return fmt.Errorf("enable TTL on %s: %w", name, err)
	}
	if opts.PointInTimeRecovery {
		if _, err := client.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{
			TableName:                        aws.String(name),
			PointInTimeRecoverySpecification: &types.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)},
		}); err != nil {
			return fmt.Errorf("enable point-in-time recovery on %s: %w", name, err)
		}
	}
	return nil
}
