package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
)

// The Pools store: a pool's configuration item and the list of pools'
// names (poolconfig.go holds the configuration's type and its rules).

// PoolKey is the partition key of a pool config item.
func PoolKey(name string) string { return "pool#" + name }

type poolItem struct {
	Key          string                `dynamodbav:"pk"`
	Kind         string                `dynamodbav:"kind"`
	Config       PoolConfig            `dynamodbav:"config"`
	LatestTarget *runnerrelease.Target `dynamodbav:"latestTarget,omitempty"`
}

// PutPoolConfig validates and writes a pool config and adds its name to the
// pool list, in one transaction.
func (s *Pools) PutPoolConfig(ctx context.Context, p PoolConfig) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("pool %q: %w", p.Name, err)
	}
	p.UpdatedAt = s.now()
	b, n := newBuilder(), newBuilder()
	// An update, not a put: the item's other attributes (latestTarget,
	// refresh's) outlive an apply.
	set := "SET " + b.name("kind") + " = " + b.value(kindPool) + ", " + b.name("config") + " = " + b.value(p)
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName:                 aws.String(s.table),
			Key:                       s.key(PoolKey(p.Name)),
			UpdateExpression:          aws.String(set),
			ExpressionAttributeNames:  b.attrNames(),
			ExpressionAttributeValues: b.attrValues(),
		}},
		{Update: &types.Update{
			TableName:                 aws.String(s.table),
			Key:                       s.key(poolsKey),
			UpdateExpression:          aws.String("ADD " + n.name("names") + " " + n.value(stringSet{p.Name})),
			ExpressionAttributeNames:  n.attrNames(),
			ExpressionAttributeValues: n.attrValues(),
		}},
	}})
	if err != nil {
		return fmt.Errorf("write pool %s: %w", p.Name, err)
	}
	return nil
}

// SetDraining turns a pool's drain on or off, in place: the rest of the
// item is the provider's. A pool that does not exist is ErrNotFound.
func (s *Pools) SetDraining(ctx context.Context, name string, on bool) error {
	b := newBuilder()
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(PoolKey(name)),
		UpdateExpression:          aws.String("SET " + b.name("config") + "." + b.name("draining") + " = " + b.value(on)),
		ConditionExpression:       aws.String("attribute_exists(" + b.name("pk") + ")"),
		ExpressionAttributeNames:  b.attrNames(),
		ExpressionAttributeValues: b.attrValues(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("pool %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("drain pool %s: %w", name, err)
	}
	return nil
}

// GetPoolConfig reads a pool config with a consistent read.
func (s *Pools) GetPoolConfig(ctx context.Context, name string) (*PoolConfig, error) {
	var it poolItem
	ok, err := s.getItem(ctx, PoolKey(name), &it)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("pool %q: %w", name, ErrNotFound)
	}
	it.Config.LatestTarget = it.LatestTarget
	return &it.Config, nil
}

// DeletePoolConfig removes a pool config and its name from the pool list.
func (s *Pools) DeletePoolConfig(ctx context.Context, name string) error {
	b := newBuilder()
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: aws.String(s.table), Key: s.key(PoolKey(name))}},
		{Update: &types.Update{
			TableName:                 aws.String(s.table),
			Key:                       s.key(poolsKey),
			UpdateExpression:          aws.String("DELETE " + b.name("names") + " " + b.value(stringSet{name})),
			ExpressionAttributeNames:  b.attrNames(),
			ExpressionAttributeValues: b.attrValues(),
		}},
	}})
	if err != nil {
		return fmt.Errorf("delete pool %s: %w", name, err)
	}
	return nil
}

// ListPoolConfigs returns every pool config, sorted by name.
func (s *Pools) ListPoolConfigs(ctx context.Context) ([]PoolConfig, error) {
	var list struct {
		Names []string `dynamodbav:"names,stringset"`
	}
	if _, err := s.getItem(ctx, poolsKey, &list); err != nil {
		return nil, err
	}
	sorted := sortedKeys(setOf(list.Names))
	pools := make([]PoolConfig, 0, len(sorted))
	for _, name := range sorted {
		p, err := s.GetPoolConfig(ctx, name)
		if IsNotFound(err) {
			continue // deleted between the two reads
		}
		if err != nil {
			return nil, err
		}
		pools = append(pools, *p)
	}
	return pools, nil
}

func setOf(names []string) map[string]struct{} {
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		m[n] = struct{}{}
	}
	return m
}
