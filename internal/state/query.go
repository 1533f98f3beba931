package state

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Queries read the indexes, which are eventually consistent and hold the
// projected attributes only (no signals, heartbeat or registration). Anything
// that decides must read the record itself (Get) or write conditionally.

// ByRun returns the instances assigned to runID, every page.
func (s *Instances) ByRun(ctx context.Context, runID string) ([]Instance, error) {
	b := newBuilder()
	return s.query(ctx, &dynamodb.QueryInput{
		IndexName:              aws.String(IndexByRun),
		KeyConditionExpression: aws.String(b.name(AttrRunID) + " = " + b.value(runID)),
	}, b)
}

// ByPoolState returns the instances of pool in state st, oldest lease first.
// A non-zero before keeps only leases that end before it (expired ones when
// before is now).
func (s *Instances) ByPoolState(ctx context.Context, pool string, st State, before time.Time) ([]Instance, error) {
	b := newBuilder()
	cond := b.name(AttrPoolState) + " = " + b.value(PoolState(pool, st))
	if !before.IsZero() {
		cond += " AND " + b.name(AttrThreshold) + " < " + b.value(before.Unix())
	}
	return s.query(ctx, &dynamodb.QueryInput{
		IndexName:              aws.String(IndexPoolState),
		KeyConditionExpression: aws.String(cond),
	}, b)
}

func (s *Instances) query(ctx context.Context, in *dynamodb.QueryInput, b *builder) ([]Instance, error) {
	in.TableName = aws.String(s.table)
	in.ExpressionAttributeNames = b.attrNames()
	in.ExpressionAttributeValues = b.attrValues()
	if s.PageSize > 0 {
		in.Limit = aws.Int32(s.PageSize)
	}
	var all []Instance
	pages := dynamodb.NewQueryPaginator(s.db, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", aws.ToString(in.IndexName), err)
		}
		var items []Instance
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &items); err != nil {
			return nil, fmt.Errorf("decode %s page: %w", aws.ToString(in.IndexName), err)
		}
		all = append(all, items...)
	}
	return all, nil
}
