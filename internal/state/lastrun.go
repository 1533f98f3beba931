package state

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// The last run of a scheduled function ("last#refresh"): what the operator's
// status shows. Each run overwrites it; nothing decides on it.

const kindLastRun = "last-run"

// LastRunKey is the key of a scheduled function's last run.
func LastRunKey(handler string) string { return "last#" + handler }

// LastRun is what a scheduled function's last completed invocation did.
type LastRun struct {
	Handler string  `dynamodbav:"handler" json:"handler"`
	At      int64   `dynamodbav:"at" json:"at"` // unix seconds, the control plane's clock
	Seconds float64 `dynamodbav:"seconds" json:"seconds"`
	// Error is why it failed ("" when it succeeded).
	Error string `dynamodbav:"error,omitempty" json:"error,omitempty"`
	// Counts are its decisions by kind (terminated, expired, kept, …).
	Counts map[string]int `dynamodbav:"counts,omitempty" json:"counts,omitempty"`
}

type lastRunItem struct {
	Key  string `dynamodbav:"pk"`
	Kind string `dynamodbav:"kind"`
	LastRun
}

// PutLastRun records a scheduled function's last run.
func (s *Leases) PutLastRun(ctx context.Context, r LastRun) error {
	if r.At == 0 {
		r.At = s.now()
	}
	item, err := attributevalue.MarshalMap(lastRunItem{Key: LastRunKey(r.Handler), Kind: kindLastRun, LastRun: r})
	if err != nil {
		return err
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("write last run of %s: %w", r.Handler, err)
	}
	return nil
}

// GetLastRun reads a scheduled function's last run; nil when it has not run.
func (s *Leases) GetLastRun(ctx context.Context, handler string) (*LastRun, error) {
	var it lastRunItem
	ok, err := s.getItem(ctx, LastRunKey(handler), &it)
	if err != nil || !ok {
		return nil, err
	}
	return &it.LastRun, nil
}
