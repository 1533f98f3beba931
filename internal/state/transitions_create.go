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

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
)

// The record's first write: Create puts the created record of a freshly
// launched instance, if none exists for it.

// NewInstance describes a record to create for a freshly launched instance.
type NewInstance struct {
	ID string
	// RoleID is the id of the pool's instance role (PoolConfig.InstanceRoleID):
	// the record's key is InstanceKey(RoleID, ID). Required: a record keyed
	// otherwise is one no instance could read or write.
	RoleID                string
	Pool                  string
	Owner                 string
	RunID                 string // empty for a pre-warmed instance
	Assignment            string // the value tagged on the EC2 instance as ghr:assignment
	InstanceType          string
	UsageClass            string
	LaunchTemplateVersion string
	LaunchedAt            time.Time
	TTL                   time.Duration // createdTTL
	Registration          *Registration
	// RunnerTarget is the runner release the instance installs at boot
	// (PoolConfig.RunnerTarget), nil: the one its user data names.
	RunnerTarget *runnerrelease.Target
}

// Create puts the created record if none exists for the instance.
func (s *Instances) Create(ctx context.Context, n NewInstance) (*Instance, error) {
	if n.ID == "" || n.RoleID == "" || n.Pool == "" || n.Assignment == "" || n.TTL <= 0 {
		return nil, fmt.Errorf("create record: id, roleId, pool, assignment and a positive TTL are required")
	}
	now := s.now()
	inst := Instance{
		Key:                   InstanceKey(n.RoleID, n.ID),
		Kind:                  kindInstance,
		ID:                    n.ID,
		Pool:                  n.Pool,
		Owner:                 n.Owner,
		State:                 Created,
		PoolState:             PoolState(n.Pool, Created),
		RunID:                 n.RunID,
		Assignment:            n.Assignment,
		Threshold:             now + int64(n.TTL/time.Second),
		LeaseLimit:            now + int64(n.TTL/time.Second),
		LeaseAt:               now,
		StateAt:               now,
		SpanState:             Created,
		LaunchedAt:            n.LaunchedAt.Unix(),
		LaunchTemplateVersion: n.LaunchTemplateVersion,
		Signals:               map[string]Signal{},
		InstanceType:          n.InstanceType,
		UsageClass:            n.UsageClass,
		Registration:          n.Registration,
		RunnerTarget:          n.RunnerTarget,
		Version:               1,
	}
	if n.RunID != "" {
		inst.Uses = 1
	}
	if n.Registration != nil {
		material := *n.Registration
		material.Assignment = n.Assignment // bound to this assignment, whatever the caller set
		inst.Registration = &material
	}
	if n.LaunchedAt.IsZero() {
		inst.LaunchedAt = now
	}
	item, err := attributevalue.MarshalMap(inst)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", n.ID, err)
	}
	b := newBuilder()
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(" + b.name(AttrPK) + ")"),
		ExpressionAttributeNames:            b.attrNames(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			cur, _ := s.Get(ctx, inst.Key)
			if cur != nil && cur.Assignment == n.Assignment && cur.RunID == n.RunID && cur.LaunchedAt == inst.LaunchedAt {
				// Our own write, retried by the SDK after DynamoDB stored it
				// and then answered with an error: it is done.
				return cur, nil
			}
			return nil, &ConditionError{Key: string(inst.Key), Transition: "create", Clause: ClauseExists, Detail: "a record already exists", Current: cur}
		}
		return nil, fmt.Errorf("create %s: %w", n.ID, err)
	}
	return &inst, nil
}
