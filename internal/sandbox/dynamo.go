package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// DynamoDB trouble injected at the front endpoint: throttling, 500s (some
// after the write happened) and lagging indexes, answered the way DynamoDB
// answers so the SDK of the functions and agents reacts as it would on AWS.
//
// What the SDK does with them (aws-sdk-go-v2 aws/retry): the error code is
// read from the body's __type after the '#'; ProvisionedThroughputExceeded-
// Exception and ThrottlingException are throttles, and HTTP 500 is
// retryable; both are retried. internal/awsconf gives every function and
// agent the adaptive retryer with 5 attempts and the legacy backoff (up to
// 2^attempt s of jitter), so one call gives up after at most about 30 s of
// backoff, sooner once the client's retry quota (500 tokens, 5 a retry) is
// spent; the adaptive mode also slows the client down after a throttle.

const dynamoTarget = "DynamoDB_20120810."

// DynamoDB error codes the faults answer with.
const (
	DynamoThroughputExceeded = "ProvisionedThroughputExceededException"
	DynamoThrottling         = "ThrottlingException"
	DynamoInternalError      = "InternalServerError"
)

// DynamoRequest is one DynamoDB request as the DynamoDB fault hook sees it.
type DynamoRequest struct {
	Op    string   // GetItem, UpdateItem, Query, BatchGetItem, ...
	Keys  []string // the table-key values of the items it reads or writes
	Write bool
}

// DynamoAnswer is what the endpoint does with one DynamoDB request instead
// of (or besides) passing it to moto; the zero value passes it on.
type DynamoAnswer struct {
	// Throttle answers HTTP 400 with this error code (DynamoThroughputExceeded
	// or DynamoThrottling); nothing reaches moto.
	Throttle string
	// HotKeys are the request's keys whose partition is throttled: the
	// request is throttled, except a BatchGetItem that also reads other
	// keys, which reads those and returns the hot ones in UnprocessedKeys,
	// as DynamoDB does when only some items exceed their throughput.
	HotKeys []string
	// Fail answers HTTP 500 InternalServerError without passing the request on.
	Fail bool
	// FailAfter passes the request to moto and answers 500 all the same:
	// a write that happened while its caller sees an error, which DynamoDB
	// can do.
	FailAfter bool
}

// dynamoState is what the DynamoDB faults remember: table schemas and the
// recent versions of every item written (indexlag.go).
type dynamoState struct {
	mu      sync.Mutex
	schemas map[string]*tableSchema
	history map[string][]version // by table and key
}

// writeOps change items; their keys are tracked for the index lag.
var writeOps = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "BatchWriteItem": true, "TransactWriteItems": true}

// serveDynamo answers one DynamoDB request under the configured faults.
func (s *Sandbox) serveDynamo(w http.ResponseWriter, r *http.Request, body []byte, f Faults, moto http.Handler) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), dynamoTarget)
	var req map[string]json.RawMessage
	json.Unmarshal(body, &req)
	table := tableOf(req)
	schema := s.schema(r.Header, table)
	keys := requestKeys(op, req, schema)
	write := writeOps[op]
	var ans DynamoAnswer
	if f.DynamoDB != nil {
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = k.id
		}
		ans = f.DynamoDB(DynamoRequest{Op: op, Keys: ids, Write: write})
	}
	switch {
	case ans.Throttle != "":
		dynamoError(w, http.StatusBadRequest, ans.Throttle)
		return
	case len(ans.HotKeys) > 0 && op == "BatchGetItem" && len(ans.HotKeys) < len(keys):
		s.partialBatchGet(w, r, req, ans.HotKeys, moto)
		return
	case len(ans.HotKeys) > 0:
		dynamoError(w, http.StatusBadRequest, DynamoThroughputExceeded)
		return
	case ans.Fail:
		dynamoError(w, http.StatusInternalServerError, DynamoInternalError)
		return
	}
	track := f.IndexLag != nil && write && schema != nil
	if track {
		s.baseline(r.Header, table, keys)
	}
	res := forward(moto, r, body)
	if track && res.Code == http.StatusOK {
		s.record(r.Header, table, keys)
	}
	if ans.FailAfter {
		dynamoError(w, http.StatusInternalServerError, DynamoInternalError)
		return
	}
	if op == "Query" && jsonString(req["IndexName"]) != "" && f.IndexLag != nil && schema != nil && res.Code == http.StatusOK {
		if lag := f.IndexLag(); lag > 0 {
			if older, differs := s.lagged(req, schema, res.Body.Bytes(), lag); differs {
				if f.Note != nil {
					f.Note(FaultIndexLagged)
				}
				writeDynamo(w, res.Code, res.Header(), older)
				return
			}
		}
	}
	writeDynamo(w, res.Code, res.Header(), res.Body.Bytes())
}

// FaultIndexLagged is the Note of a Query answered from an older view of
// its index than the current one, and different from it.
const FaultIndexLagged = "DynamoDB requests: index query answered from an older view that differs"

// forward passes a request to moto and keeps the answer.
func forward(moto http.Handler, r *http.Request, body []byte) *httptest.ResponseRecorder {
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	rec := httptest.NewRecorder()
	moto.ServeHTTP(rec, r)
	return rec
}

// copyAnswer writes an answer forward recorded.
func copyAnswer(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// writeDynamo writes an answer with its CRC32 header recomputed: the
// DynamoDB client checks it against the body.
func writeDynamo(w http.ResponseWriter, code int, h http.Header, body []byte) {
	for k, v := range h {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	w.WriteHeader(code)
	w.Write(body)
}

// dynamoError answers as DynamoDB does: the error type in __type, with the
// namespace DynamoDB puts before the '#'.
func dynamoError(w http.ResponseWriter, status int, code string) {
	ns, msg := "com.amazonaws.dynamodb.v20120810", "Internal server error"
	switch code {
	case DynamoThroughputExceeded:
		msg = "The level of configured provisioned throughput for the table was exceeded. Consider increasing your provisioning level with the UpdateTable API."
	case DynamoThrottling:
		ns, msg = "com.amazon.coral.availability", "Rate of requests exceeds the allowed throughput."
	}
	body, _ := json.Marshal(map[string]string{"__type": ns + "#" + code, "message": msg})
	h := http.Header{"Content-Type": {"application/x-amz-json-1.0"}, "X-Amzn-Requestid": {fmt.Sprintf("SANDBOXFAULT%020d", faultSeq.Add(1))}}
	writeDynamo(w, status, h, body)
}

var faultSeq atomic.Int64 // request ids of injected answers

// partialBatchGet reads the keys of a BatchGetItem that are not hot and
// returns the hot ones in UnprocessedKeys.
func (s *Sandbox) partialBatchGet(w http.ResponseWriter, r *http.Request, req map[string]json.RawMessage, hot []string, moto http.Handler) {
	var items map[string]map[string]json.RawMessage
	json.Unmarshal(req["RequestItems"], &items)
	unprocessed := map[string]map[string]json.RawMessage{}
	for table, ka := range items {
		schema := s.schema(r.Header, table)
		var keys []json.RawMessage
		json.Unmarshal(ka["Keys"], &keys)
		var keep, left []json.RawMessage
		for _, k := range keys {
			if schema != nil && slices.Contains(hot, keyOf(k, schema).id) {
				left = append(left, k)
			} else {
				keep = append(keep, k)
			}
		}
		if len(left) > 0 {
			u := map[string]json.RawMessage{}
			for k, v := range ka {
				u[k] = v
			}
			u["Keys"], _ = json.Marshal(left)
			unprocessed[table] = u
		}
		if len(keep) == 0 {
			delete(items, table)
			continue
		}
		ka["Keys"], _ = json.Marshal(keep)
	}
	req["RequestItems"], _ = json.Marshal(items)
	body, _ := json.Marshal(req)
	res := forward(moto, r, body)
	if res.Code != http.StatusOK {
		writeDynamo(w, res.Code, res.Header(), res.Body.Bytes())
		return
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(res.Body.Bytes(), &out); err != nil {
		writeDynamo(w, res.Code, res.Header(), res.Body.Bytes())
		return
	}
	var already map[string]map[string]json.RawMessage
	json.Unmarshal(out["UnprocessedKeys"], &already)
	for table, u := range already {
		if mine, ok := unprocessed[table]; ok {
			var a, b []json.RawMessage
			json.Unmarshal(u["Keys"], &a)
			json.Unmarshal(mine["Keys"], &b)
			mine["Keys"], _ = json.Marshal(append(a, b...))
			continue
		}
		unprocessed[table] = u
	}
	out["UnprocessedKeys"], _ = json.Marshal(unprocessed)
	merged, _ := json.Marshal(out)
	writeDynamo(w, res.Code, res.Header(), merged)
}

// itemKey is one item's key: id is the hash key's value (an instance id
// for instance records), raw the key attributes as DynamoDB JSON.
type itemKey struct {
	id  string
	raw json.RawMessage
}

// requestKeys lists the items a request reads or writes, for the
// operations that name them (not Query or Scan).
func requestKeys(op string, req map[string]json.RawMessage, schema *tableSchema) []itemKey {
	if schema == nil {
		return nil
	}
	var out []itemKey
	add := func(raw json.RawMessage) {
		if len(raw) > 0 {
			out = append(out, keyOf(raw, schema))
		}
	}
	switch op {
	case "GetItem", "UpdateItem", "DeleteItem":
		add(req["Key"])
	case "PutItem":
		add(req["Item"])
	case "BatchGetItem":
		var items map[string]struct{ Keys []json.RawMessage }
		json.Unmarshal(req["RequestItems"], &items)
		for _, ka := range sortedValues(items) {
			for _, k := range ka.Keys {
				add(k)
			}
		}
	case "BatchWriteItem":
		var items map[string][]struct {
			PutRequest    struct{ Item json.RawMessage }
			DeleteRequest struct{ Key json.RawMessage }
		}
		json.Unmarshal(req["RequestItems"], &items)
		for _, reqs := range sortedValues(items) {
			for _, wr := range reqs {
				add(wr.PutRequest.Item)
				add(wr.DeleteRequest.Key)
			}
		}
	case "TransactWriteItems", "TransactGetItems":
		var tx struct {
			TransactItems []map[string]struct{ Key, Item json.RawMessage }
		}
		json.Unmarshal(req["TransactItems"], &tx)
		for _, ti := range tx.TransactItems {
			for _, part := range ti {
				add(part.Key)
				add(part.Item)
			}
		}
	}
	return out
}

// keyOf takes the key attributes out of a key or a whole item.
func keyOf(raw json.RawMessage, schema *tableSchema) itemKey {
	var item map[string]json.RawMessage
	json.Unmarshal(raw, &item)
	return keyOfItem(item, schema)
}

func keyOfItem(item map[string]json.RawMessage, schema *tableSchema) itemKey {
	key := map[string]json.RawMessage{schema.hash: item[schema.hash]}
	if schema.sort != "" {
		key[schema.sort] = item[schema.sort]
	}
	_, id := attrValue(item[schema.hash])
	b, _ := json.Marshal(key)
	return itemKey{id: id, raw: b}
}

// attrValue reads a scalar DynamoDB attribute value: its type (S, N, B)
// and its text ("" for anything else).
func attrValue(raw json.RawMessage) (typ, val string) {
	var av map[string]json.RawMessage
	if json.Unmarshal(raw, &av) != nil || len(av) != 1 {
		return "", ""
	}
	for t, v := range av {
		if json.Unmarshal(v, &val) == nil && (t == "S" || t == "N" || t == "B") {
			return t, val
		}
	}
	return "", ""
}

func jsonString(raw json.RawMessage) string {
	var s string
	json.Unmarshal(raw, &s)
	return s
}

// tableOf names the table of a request: TableName, or the first table
// of a batch or transaction (the sandbox has one).
func tableOf(req map[string]json.RawMessage) string {
	if t := jsonString(req["TableName"]); t != "" {
		return t
	}
	var items map[string]json.RawMessage
	json.Unmarshal(req["RequestItems"], &items)
	for _, t := range slices.Sorted(maps.Keys(items)) {
		return t
	}
	var tx struct {
		TransactItems []map[string]struct{ TableName string }
	}
	json.Unmarshal(req["TransactItems"], &tx)
	for _, ti := range tx.TransactItems {
		for _, part := range ti {
			return part.TableName
		}
	}
	return ""
}

func sortedValues[V any](m map[string]V) []V {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]V, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}
