package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// The SDK the functions use takes the injected answers as DynamoDB's:
// throttles and 500s are retried until the attempts run out, then the
// caller sees the error with DynamoDB's code.
func TestDynamoErrorsAreWhatTheSDKRetries(t *testing.T) {
	for _, tc := range []struct {
		status   int
		code     string
		throttle bool
	}{
		{http.StatusBadRequest, DynamoThroughputExceeded, true},
		{http.StatusBadRequest, DynamoThrottling, true},
		{http.StatusInternalServerError, DynamoInternalError, false},
	} {
		var calls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			dynamoError(w, tc.status, tc.code)
		}))
		db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
			Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
			Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 3
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})})
		_, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "i-1"}}})
		srv.Close()
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != tc.code {
			t.Fatalf("%s: got %v, want the code %s", tc.code, err, tc.code)
		}
		if calls.Load() != 3 {
			t.Errorf("%s: %d attempts, want 3 (retried)", tc.code, calls.Load())
		}
		if got := retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool(); got != tc.throttle {
			t.Errorf("%s: throttle %v, want %v", tc.code, got, tc.throttle)
		}
	}
}

func av(typ, v string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{typ: v})
	return b
}

// An index query is answered as the index was lag ago: an item written
// since then shows its older version, matched and projected as the index
// would; unchanged items stay as they are.
func TestLaggedIndexQuery(t *testing.T) {
	s := &Sandbox{}
	schema := &tableSchema{hash: "pk", indexes: map[string]indexSchema{
		"by-pool-state": {hash: "poolState", sort: "threshold", projection: "INCLUDE", include: []string{"state"}}}}
	s.dynamo.schemas = map[string]*tableSchema{"t": schema}
	s.dynamo.history = map[string][]version{}
	item := func(id, st string, threshold string) map[string]json.RawMessage {
		return map[string]json.RawMessage{"pk": av("S", id), "poolState": av("S", "linux#"+st), "threshold": av("N", threshold),
			"state": av("S", st), "heartbeatAt": av("N", "1")}
	}
	now := time.Now()
	key := func(id string) string {
		return historyKey("t", keyOfItem(map[string]json.RawMessage{"pk": av("S", id)}, schema))
	}
	// i-a went idle→claimed 1 s ago; i-b was created 1 s ago; i-c is unchanged.
	s.dynamo.history[key("i-a")] = []version{{item: item("i-a", "idle", "10")}, {at: now.Add(-time.Second), item: item("i-a", "claimed", "20")}}
	s.dynamo.history[key("i-b")] = []version{{item: nil}, {at: now.Add(-time.Second), item: item("i-b", "idle", "5")}}
	current, _ := json.Marshal(map[string]any{"Items": []any{item("i-b", "idle", "5"), item("i-c", "idle", "7")}, "Count": 2, "ScannedCount": 2})
	req := map[string]json.RawMessage{"TableName": json.RawMessage(`"t"`), "IndexName": json.RawMessage(`"by-pool-state"`),
		"KeyConditionExpression": json.RawMessage(`"#n0 = :v0"`), "ExpressionAttributeNames": json.RawMessage(`{"#n0":"poolState"}`),
		"ExpressionAttributeValues": json.RawMessage(`{":v0":{"S":"linux#idle"}}`)}

	if _, differs := s.lagged(req, schema, current, 100*time.Millisecond); differs {
		t.Errorf("a view 0.1 s old differs from the current one")
	}
	out, differs := s.lagged(req, schema, current, 2*time.Second)
	if !differs {
		t.Fatal("a view 2 s old is the current one")
	}
	var got struct {
		Items []map[string]json.RawMessage
		Count int
	}
	json.Unmarshal(out, &got)
	var ids []string
	for _, it := range got.Items {
		_, id := attrValue(it["pk"])
		ids = append(ids, id)
		if _, ok := it["heartbeatAt"]; ok {
			t.Errorf("%s: heartbeatAt is not projected into the index", id)
		}
	}
	if strings.Join(ids, ",") != "i-c,i-a" || got.Count != 2 {
		t.Errorf("2 s ago: items %v (count %d), want i-c then i-a (by threshold)", ids, got.Count)
	}

	// A range condition: threshold < 8 keeps i-c only.
	req["KeyConditionExpression"] = json.RawMessage(`"#n0 = :v0 AND #n1 < :v1"`)
	req["ExpressionAttributeNames"] = json.RawMessage(`{"#n0":"poolState","#n1":"threshold"}`)
	req["ExpressionAttributeValues"] = json.RawMessage(`{":v0":{"S":"linux#idle"},":v1":{"N":"8"}}`)
	out, _ = s.lagged(req, schema, current, 2*time.Second)
	json.Unmarshal(out, &got)
	if len(got.Items) != 1 {
		t.Errorf("threshold < 8, 2 s ago: %s, want i-c alone", out)
	}
}

func TestParseKeyCondition(t *testing.T) {
	ix := indexSchema{hash: "h", sort: "r"}
	vals := map[string]json.RawMessage{":a": av("S", "x"), ":b": av("N", "1"), ":c": av("N", "5")}
	for expr, ok := range map[string]bool{
		"#h = :a":                               true,
		"h = :a AND r BETWEEN :b AND :c":        true,
		"#h = :a and begins_with(#r, :a)":       true,
		"#r < :b AND #h = :a":                   true,
		"#h = :a OR #r = :b":                    false,
		"#r = :b":                               false,
		"(#h = :a)":                             false,
		"#h = :zz":                              false,
		"attribute_exists(#h) AND #h = :a":      false,
		"#h = :a AND #r < :b AND #r > :b":       false,
		"#h = :a AND #r <> :b":                  false,
		"#h = :a AND begins_with(#r, :a) extra": false,
	} {
		_, got := parseKeyCondition(expr, map[string]string{"#h": "h", "#r": "r"}, vals, ix)
		if got != ok {
			t.Errorf("%q: parsed %v, want %v", expr, got, ok)
		}
	}
}
