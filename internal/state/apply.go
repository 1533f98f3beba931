package state

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// change is one conditional UpdateItem of an instance record.
type change struct {
	transition string
	key        Key
	checks     []check
	set        map[string]any // attribute path -> value
	increment  []string       // numeric attributes to add one to
	remove     []string
	// applied, when set, recognises the record this change leaves behind.
	// DynamoDB may store a write and still answer with an error; the SDK
	// then retries it and the retry's condition fails against our own
	// result: that is success, not a lost race.
	applied func(cur *Instance) bool
}

// apply runs the change. Every change bumps version; a refused change returns
// a *ConditionError naming the first clause that does not hold.
func (s *Instances) apply(ctx context.Context, c change) (*Instance, error) {
	b := newBuilder()
	conds := make([]string, len(c.checks))
	for n, ch := range c.checks {
		conds[n] = ch.expr(b)
	}
	sets := []string{b.name("version") + " = " + b.name("version") + " + " + b.value(1)}
	for _, path := range c.increment {
		sets = append(sets, b.name(path)+" = if_not_exists("+b.name(path)+", "+b.value(0)+") + "+b.value(1))
	}
	for _, path := range sortedKeys(c.set) {
		sets = append(sets, b.name(path)+" = "+b.value(c.set[path]))
	}
	if _, moves := c.set["state"]; moves {
		// Close the span of the state it leaves (usage.go): the right-hand
		// sides read the record as it was before this write. spanState,
		// not state: an instance can rewrite its record's state.
		sets = append(sets,
			b.name(attrPrevState)+" = if_not_exists("+b.name(attrSpanState)+", "+b.value("")+")",
			b.name(attrSpanState)+" = "+b.value(c.set["state"]),
			b.name(attrPrevStateAt)+" = if_not_exists("+b.name(attrStateAt)+", "+b.value(0)+")",
			b.name(attrPrevRunID)+" = if_not_exists("+b.name(AttrRunID)+", "+b.value("")+")",
			b.name(attrStateAt)+" = "+b.value(s.now()))
	}
	update := "SET " + strings.Join(sets, ", ")
	if len(c.remove) > 0 {
		rm := make([]string, len(c.remove))
		for n, path := range c.remove {
			rm[n] = b.name(path)
		}
		update += " REMOVE " + strings.Join(rm, ", ")
	}
	key := c.key
	if key == "" {
		return nil, fmt.Errorf("%s: no record key", c.transition)
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.key(string(key)),
		ConditionExpression:                 aws.String(strings.Join(conds, " AND ")),
		UpdateExpression:                    aws.String(update),
		ExpressionAttributeNames:            b.attrNames(),
		ExpressionAttributeValues:           b.attrValues(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			err := s.diagnose(ctx, c, key, ccf.Item)
			var ce *ConditionError
			if errors.As(err, &ce) && ce.Current != nil && c.applied != nil && c.applied(ce.Current) {
				if _, moves := c.set["state"]; moves {
					s.recordSpan(ctx, ce.Current) // idempotent: the same entry again
				}
				return ce.Current, nil
			}
			return nil, err
		}
		return nil, fmt.Errorf("%s of %s: %w", c.transition, key, err)
	}
	var inst Instance
	if err := attributevalue.UnmarshalMap(out.Attributes, &inst); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	if _, moves := c.set["state"]; moves {
		s.recordSpan(ctx, &inst)
	}
	return &inst, nil
}

// diagnose finds the clause that failed, from the old item DynamoDB returned
// with the failure, or else from a consistent read.
func (s *Instances) diagnose(ctx context.Context, c change, key Key, old map[string]types.AttributeValue) error {
	var cur *Instance
	if old != nil {
		cur = &Instance{}
		if err := attributevalue.UnmarshalMap(old, cur); err != nil {
			return fmt.Errorf("decode %s: %w", key, err)
		}
	} else {
		got, err := s.Get(ctx, c.key)
		if err != nil && !IsNotFound(err) {
			return fmt.Errorf("%s of %s refused; reading why failed: %w", c.transition, key, err)
		}
		cur = got
	}
	ce := &ConditionError{Key: string(key), Transition: c.transition, Current: cur}
	if cur == nil {
		ce.Clause, ce.Detail = ClauseExists, "no such record"
		return ce
	}
	for _, ch := range c.checks {
		if ok, detail := ch.holds(cur); !ok {
			ce.Clause, ce.Detail = ch.clause, detail
			return ce
		}
	}
	ce.Clause, ce.Detail = ClauseChanged, "record changed while the write was refused; read it again"
	return ce
}
