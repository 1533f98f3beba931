package state

import (
	"context"
	"fmt"
	"slices"
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

// InPoolState returns the whole records of pool that are in st, ordered by
// key: the index finds them, one consistent batch read gets each in full
// (the index projects only what the functions query by, and may lag a
// change), and a record that left st or the pool in between is left out.
// What reads records to act on them or to show them lists them this way.
func (s *Instances) InPoolState(ctx context.Context, pool string, st State) ([]Instance, error) {
	found, err := s.ByPoolState(ctx, pool, st, time.Time{})
	if err != nil {
		return nil, err
	}
	keys := make([]Key, len(found))
	for i, in := range found {
		keys[i] = in.Key
	}
	full, err := s.GetMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := []Instance{}
	for _, key := range slices.Sorted(slices.Values(keys)) {
		if rec := full[key]; rec != nil && rec.State == st && rec.Pool == pool {
			out = append(out, *rec)
		}
	}
	return out, nil
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
