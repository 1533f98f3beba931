package state

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// A scale set's listener status ("scaleset#<pool>"): what the listener that
// serves a pool's scale set last saw, for the operator's status. Only the
// listener writes it (PutItem, which no instance role may call, under a key
// no ${aws:userid} equals), and nothing decides on it: the records say
// which runs exist, GitHub's statistics how many are wanted.

const kindScaleSetStatus = "scaleset-status"

// ScaleSetStatusKey is the key of pool's scale set status.
func ScaleSetStatusKey(pool string) string { return "scaleset#" + pool }

// ScaleSetStatus is what the listener serving a pool's scale set saw last.
// Times are unix seconds on the listener's clock (0: never).
type ScaleSetStatus struct {
	Pool       string `dynamodbav:"pool" json:"pool"`
	ScaleSet   string `dynamodbav:"scaleSet" json:"scaleSet"`
	ScaleSetID int    `dynamodbav:"scaleSetId" json:"scaleSetId"`
	// Holder is the listener holding the message session ("" none: the
	// session was lost or closed, SessionAt says when).
	Holder    string `dynamodbav:"holder,omitempty" json:"holder,omitempty"`
	SessionAt int64  `dynamodbav:"sessionAt" json:"sessionAt"`
	// PolledAt is when a poll of the session last answered (202, or a
	// message).
	PolledAt int64 `dynamodbav:"polledAt" json:"polledAt"`
	// Statistics are GitHub's, as the last poll or session gave them.
	Statistics ScaleSetStatistics `dynamodbav:"statistics" json:"statistics"`
	// LiveRuns are the standing runs the listener holds: being
	// provisioned, waiting for a job, or running one.
	LiveRuns int `dynamodbav:"liveRuns" json:"liveRuns"`
	// Error is the last error serving the scale set, and when.
	Error   string `dynamodbav:"error,omitempty" json:"error,omitempty"`
	ErrorAt int64  `dynamodbav:"errorAt,omitempty" json:"errorAt,omitempty"`
	// WrittenAt is when the listener wrote this item.
	WrittenAt int64 `dynamodbav:"writtenAt" json:"writtenAt"`
}

// ScaleSetStatistics are a scale set's counts as GitHub gives them.
type ScaleSetStatistics struct {
	Available  int `dynamodbav:"available" json:"available"`
	Assigned   int `dynamodbav:"assigned" json:"assigned"`
	Running    int `dynamodbav:"running" json:"running"`
	Registered int `dynamodbav:"registered" json:"registered"`
	Busy       int `dynamodbav:"busy" json:"busy"`
	Idle       int `dynamodbav:"idle" json:"idle"`
}

// ValidPoolName says whether name is one a pool may have (PoolConfig's
// rule): what may be written where a pool's name is trusted, such as a
// metric's dimension.
func ValidPoolName(name string) bool { return poolNameRE.MatchString(name) }

// maxStatusError bounds the error text kept: GitHub's answers can be long,
// and the item is read on every status.
const maxStatusError = 1000

type scaleSetStatusItem struct {
	Key  string `dynamodbav:"pk"`
	Kind string `dynamodbav:"kind"`
	ScaleSetStatus
}

// PutScaleSetStatus writes a pool's scale set status (the listener's).
// Each write replaces the last: only the session's holder writes it often,
// and a listener that lost the session writes once to say so.
func (s *ScaleSets) PutScaleSetStatus(ctx context.Context, st ScaleSetStatus) error {
	if st.Pool == "" {
		return fmt.Errorf("scale set status: pool is required")
	}
	if st.WrittenAt == 0 {
		st.WrittenAt = s.now()
	}
	if len(st.Error) > maxStatusError {
		st.Error = strings.ToValidUTF8(st.Error[:maxStatusError], "")
	}
	item, err := attributevalue.MarshalMap(scaleSetStatusItem{Key: ScaleSetStatusKey(st.Pool), Kind: kindScaleSetStatus, ScaleSetStatus: st})
	if err != nil {
		return err
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("write the scale set status of pool %s: %w", st.Pool, err)
	}
	return nil
}

// GetScaleSetStatus reads a pool's scale set status; nil when no listener
// wrote one.
func (s *ScaleSets) GetScaleSetStatus(ctx context.Context, pool string) (*ScaleSetStatus, error) {
	var it scaleSetStatusItem
	ok, err := s.getItem(ctx, ScaleSetStatusKey(pool), &it)
	if err != nil || !ok {
		return nil, err
	}
	return &it.ScaleSetStatus, nil
}
