package sandbox

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

func TestStreamFiltersPassWhatLambdaWouldPass(t *testing.T) {
	c := &lambdatypes.FilterCriteria{Filters: []lambdatypes.Filter{{Pattern: aws.String(
		`{"dynamodb":{"NewImage":{"signals":{"M":{"UD_JIT_NEXT":{"M":{"assignment":{"S":[{"exists":true}]}}}}}}}}`)}}}
	record := func(signals string) json.RawMessage {
		return json.RawMessage(`{"eventName":"MODIFY","dynamodb":{"NewImage":{"pk":{"S":"i-1"},"signals":{"M":{` + signals + `}}}}}`)
	}
	if !passes(c, record(`"UD_JIT_NEXT":{"M":{"assignment":{"S":"a1"},"detail":{"S":"2"}}}`)) {
		t.Error("a request did not pass")
	}
	if passes(c, record(`"UD_REG_OK":{"M":{"assignment":{"S":"a1"}}}`)) {
		t.Error("a record without a request passed")
	}
	if !passes(nil, record(``)) {
		t.Error("no criteria must pass every record")
	}
	if passes(&lambdatypes.FilterCriteria{Filters: []lambdatypes.Filter{{Pattern: aws.String(`{"eventName":["INSERT"]}`)}}}, record(``)) {
		t.Error("a MODIFY passed an INSERT-only filter")
	}
}
