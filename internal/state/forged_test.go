package state

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An instance may write its own record (within the agent's attributes; and
// anything, where that policy is bypassed) but never its key. Every read
// of the package takes the instance id from the key, so no function acts
// on an id the instance wrote (issue 29: refresh terminated the instance
// a record named). Without UnmarshalDynamoDBAttributeValue's override,
// every read below returns i-victim.
func TestARecordsInstanceIDComesFromItsKeyNotFromWhatTheInstanceWrote(t *testing.T) {
	s, _ := newStore(t)
	inst := created(t, s, "i-attacker", "run-forged")
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(string(inst.Key)),
		UpdateExpression:          aws.String("SET instanceId = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "i-victim"}},
	})
	must(t, err)
	got, err := s.Get(ctx, inst.Key)
	must(t, err)
	if got.ID != "i-attacker" || len(got.Forged) != 1 {
		t.Fatalf("Get: instance %s (forged %v), want i-attacker with the forgery noted", got.ID, got.Forged)
	}
	byRun, err := s.ByRun(ctx, "run-forged")
	must(t, err)
	if len(byRun) != 1 || byRun[0].ID != "i-attacker" {
		t.Fatalf("ByRun: %+v, want i-attacker", byRun)
	}
	found, err := s.ByInstanceID(ctx, []string{"i-attacker", "i-victim"}, func(string) []string { return []string{testRole} })
	must(t, err)
	if found["i-attacker"] == nil || found["i-attacker"].ID != "i-attacker" || found["i-victim"] != nil {
		t.Fatalf("ByInstanceID: %v, want only i-attacker's record, under its own id", found)
	}
	// A transition answers with the record as written: still the key's id.
	after, err := s.NoteBeat(ctx, got.Ref(), 0)
	must(t, err)
	if after.ID != "i-attacker" {
		t.Fatalf("a write's answer names %s", after.ID)
	}
}
