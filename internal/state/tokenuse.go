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

// The use of an invoking job's OIDC token (pk "jti#<jti>"): which call it
// served. A token is good for hours; one that leaks (a log, a compromised
// step of the invoking job) must not serve a second purpose in that time.
// The item lives until the token expires (expiresAt, the table's TTL):
// after that the verifier refuses the token anyway.

const kindTokenUse = "token-use"

// TokenUseKey is the key of a token's use.
func TokenUseKey(jti string) string { return "jti#" + jti }

type tokenUse struct {
	Key     string `dynamodbav:"pk"`
	Kind    string `dynamodbav:"kind"`
	Purpose string `dynamodbav:"purpose"`
	UsedAt  int64  `dynamodbav:"usedAt"`
	// ExpiresAt is the token's expiry: the TTL removes the item after it.
	ExpiresAt int64 `dynamodbav:"expiresAt"`
}

// TokenUsedError is a token already used for another purpose.
type TokenUsedError struct {
	JTI     string
	Purpose string // what it served first
	UsedAt  int64
}

func (e *TokenUsedError) Error() string {
	return fmt.Sprintf("token %s was used for %s at %s", e.JTI, e.Purpose, time.Unix(e.UsedAt, 0).UTC().Format(time.RFC3339))
}

// UseToken records that the token jti serves purpose until expires. The
// same purpose again passes and changes nothing (a call sent again after a
// lost answer, or two deliveries of one call); another purpose is refused
// with a *TokenUsedError naming the first, by a conditional put, so of two
// concurrent uses for different purposes exactly one wins.
func (s *Tokens) UseToken(ctx context.Context, jti, purpose string, expires time.Time) error {
	if jti == "" || purpose == "" {
		return errors.New("use token: jti and purpose are required")
	}
	now := s.now()
	item, err := attributevalue.MarshalMap(tokenUse{Key: TokenUseKey(jti), Kind: kindTokenUse, Purpose: purpose, UsedAt: now, ExpiresAt: expires.Unix()})
	if err != nil {
		return err
	}
	b := newBuilder()
	// An item past its expiry that the TTL has not removed yet is no use.
	cond := "attribute_not_exists(" + b.name(AttrPK) + ") OR " + b.name(AttrExpiresAt) + " < " + b.value(now)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item, ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: b.attrNames(), ExpressionAttributeValues: b.attrValues(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &ccf):
		return fmt.Errorf("record the use of token %s: %w", jti, err)
	}
	var first tokenUse
	ok, err := s.getItem(ctx, TokenUseKey(jti), &first)
	if err != nil {
		return fmt.Errorf("read the use of token %s: %w", jti, err)
	}
	if !ok || first.Purpose == purpose {
		// Gone meanwhile (expired), or this very purpose: a retry.
		return nil
	}
	return &TokenUsedError{JTI: jti, Purpose: first.Purpose, UsedAt: first.UsedAt}
}
