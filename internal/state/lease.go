package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A single-flight lease: one item per scheduled function ("lease#refresh")
// that at most one invocation holds at a time. It replaces reserved
// concurrency 1, which new accounts cannot grant (their unreserved
// concurrency may not drop below its minimum). A holder keeps it until the
// time it asked for and extends it by asking again (controlplane.SingleFlight
// asks for 30 s at a time): one that dies keeps it no longer.

const kindLease = "lease"

// LeaseKey is the key of the named lease.
func LeaseKey(name string) string { return "lease#" + name }

type lease struct {
	Key       string `dynamodbav:"pk"`
	Kind      string `dynamodbav:"kind"`
	Holder    string `dynamodbav:"holder"`
	Until     int64  `dynamodbav:"until"` // unix seconds; 0: released
	ExpiresAt int64  `dynamodbav:"expiresAt"`
}

// AcquireLease takes the named lease for holder until the given time, when
// nobody holds it or its holder's time has passed. ok is false when
// another holder has it.
func (s *Leases) AcquireLease(ctx context.Context, name, holder string, until time.Time) (ok bool, err error) {
	switch {
	case name == "":
		return false, errors.New("lease: name required")
	case holder == "":
		return false, errors.New("lease: holder required")
	}
	now := s.now()
	item, err := attributevalue.MarshalMap(lease{Key: LeaseKey(name), Kind: kindLease, Holder: holder, Until: until.Unix(), ExpiresAt: until.Unix() + secs(runsKeepFor)})
	if err != nil {
		return false, err
	}
	b := newBuilder()
	cond := fmt.Sprintf("attribute_not_exists(%s) OR %s < %s OR %s = %s", b.name(AttrPK), b.name("until"), b.value(now), b.name("holder"), b.value(holder))
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: aws.String(cond), ExpressionAttributeNames: b.attrNames(), ExpressionAttributeValues: b.attrValues()})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf):
		return false, nil
	}
	return false, fmt.Errorf("acquire lease %s: %w", name, err)
}

// ReleaseLease gives the lease back if holder still holds it.
func (s *Leases) ReleaseLease(ctx context.Context, name, holder string) error {
	b := newBuilder()
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(LeaseKey(name)),
		UpdateExpression:         aws.String("SET " + b.name("until") + " = " + b.value(0)),
		ConditionExpression:      aws.String(b.name("holder") + " = " + b.value(holder)),
		ExpressionAttributeNames: b.attrNames(), ExpressionAttributeValues: b.attrValues()})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}
