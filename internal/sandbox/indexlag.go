package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Index lag. DynamoDB copies each write of an item into the global
// secondary indexes asynchronously: a Query of an index sees every item as
// it was a moment ago (usually under a second, seconds under load) and can
// never be read consistently. The endpoint models that per item: it keeps
// the versions of every item written through it (a consistent read right
// after each write moto accepted, and before an item's first write the
// version it had until then), and answers a Query that names an IndexName
// from the versions as of lag ago: an item written since then is replaced
// by the version it had then, matched against the key condition and
// projected as the index projects it.
//
// Why not replay an earlier answer to the same request body: that lags
// only queries asked twice within the lag, and release's by-run query is
// asked once per run, right after provision wrote the run's records,
// which is the case that matters most. The per-item history lags any
// query and never invents a state: each item appears as it really was at
// that moment. One lag per query keeps an answer a snapshot of one moment,
// a special case of DynamoDB's per-item propagation.
//
// Only what DynamoDB allows in a key condition (hash = v, and optionally
// one condition on the range key) is evaluated; a Query with a filter,
// projection, Select, Limit or ExclusiveStartKey (the product sends none)
// is answered current, as are base-table reads.

// historyKeep is how long item versions are kept: more than the longest lag.
const historyKeep = 10 * time.Second

type tableSchema struct {
	hash, sort string
	indexes    map[string]indexSchema
}

type indexSchema struct {
	hash, sort string
	projection string // ALL, KEYS_ONLY or INCLUDE
	include    []string
}

// version is an item as it was from at on; a zero at: before the first
// write the endpoint saw. A nil item: no such item.
type version struct {
	at   time.Time
	item map[string]json.RawMessage
}

// schema reads a table's keys and indexes from moto once.
func (s *Sandbox) schema(h http.Header, table string) *tableSchema {
	if table == "" {
		return nil
	}
	s.dynamo.mu.Lock()
	sc, ok := s.dynamo.schemas[table]
	s.dynamo.mu.Unlock()
	if ok {
		return sc
	}
	raw, err := s.motoDynamo(h, "DescribeTable", map[string]any{"TableName": table})
	if err != nil {
		return nil // asked again next time
	}
	type keyElem struct{ AttributeName, KeyType string }
	var out struct {
		Table struct {
			KeySchema              []keyElem
			GlobalSecondaryIndexes []struct {
				IndexName  string
				KeySchema  []keyElem
				Projection struct {
					ProjectionType   string
					NonKeyAttributes []string
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil
	}
	keys := func(ks []keyElem) (hash, sort string) {
		for _, k := range ks {
			if k.KeyType == "HASH" {
				hash = k.AttributeName
			} else {
				sort = k.AttributeName
			}
		}
		return hash, sort
	}
	sc = &tableSchema{indexes: map[string]indexSchema{}}
	sc.hash, sc.sort = keys(out.Table.KeySchema)
	for _, gsi := range out.Table.GlobalSecondaryIndexes {
		ix := indexSchema{projection: gsi.Projection.ProjectionType, include: gsi.Projection.NonKeyAttributes}
		ix.hash, ix.sort = keys(gsi.KeySchema)
		sc.indexes[gsi.IndexName] = ix
	}
	s.dynamo.mu.Lock()
	if s.dynamo.schemas == nil {
		s.dynamo.schemas, s.dynamo.history = map[string]*tableSchema{}, map[string][]version{}
	}
	s.dynamo.schemas[table] = sc
	s.dynamo.mu.Unlock()
	return sc
}

// motoDynamo calls moto's DynamoDB directly (moto does not check
// signatures; the caller's Authorization names the region and account).
func (s *Sandbox) motoDynamo(h http.Header, op string, body any) ([]byte, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(http.MethodPost, s.Moto.URL+"/", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", dynamoTarget+op)
	req.Header.Set("Authorization", h.Get("Authorization"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s: %s", op, resp.Status, out)
	}
	return out, err
}

func (s *Sandbox) readItem(h http.Header, table string, key json.RawMessage) (map[string]json.RawMessage, error) {
	raw, err := s.motoDynamo(h, "GetItem", map[string]any{"TableName": table, "Key": key, "ConsistentRead": true})
	if err != nil {
		return nil, err
	}
	var out struct{ Item map[string]json.RawMessage }
	err = json.Unmarshal(raw, &out)
	return out.Item, err
}

func historyKey(table string, k itemKey) string { return table + "\x00" + string(k.raw) }

// baseline reads, before an item's first write, the version it has had
// until then.
func (s *Sandbox) baseline(h http.Header, table string, keys []itemKey) {
	for _, k := range keys {
		hk := historyKey(table, k)
		s.dynamo.mu.Lock()
		_, known := s.dynamo.history[hk]
		if !known {
			s.dynamo.history[hk] = nil // being read
		}
		s.dynamo.mu.Unlock()
		if known {
			continue
		}
		item, err := s.readItem(h, table, k.raw)
		s.dynamo.mu.Lock()
		if err != nil {
			delete(s.dynamo.history, hk) // unknown: that item is answered current
		} else {
			s.dynamo.history[hk] = append([]version{{item: item}}, s.dynamo.history[hk]...)
		}
		s.dynamo.mu.Unlock()
	}
}

// record reads the items a write changed and keeps their new versions.
func (s *Sandbox) record(h http.Header, table string, keys []itemKey) {
	done := time.Now()
	for _, k := range keys {
		item, err := s.readItem(h, table, k.raw)
		if err != nil {
			continue
		}
		hk := historyKey(table, k)
		s.dynamo.mu.Lock()
		vs := append(s.dynamo.history[hk], version{at: done, item: item})
		// Versions older than historyKeep go, except the newest of them:
		// it is the item as of any moment a lag can reach back to.
		cut := 0
		for cut+1 < len(vs) && done.Sub(vs[cut+1].at) > historyKeep {
			cut++
		}
		s.dynamo.history[hk] = slices.Clone(vs[cut:])
		s.dynamo.mu.Unlock()
	}
}

// versionAt is an item's version at a moment; false when the history does
// not reach back that far.
func versionAt(vs []version, at time.Time) (version, bool) {
	for i := len(vs) - 1; i >= 0; i-- {
		if !vs[i].at.After(at) {
			return vs[i], true
		}
	}
	return version{}, false
}

// lagged answers an index Query as the index was lag ago; false when that
// answer is the current one (or the query is beyond what is modelled).
func (s *Sandbox) lagged(req map[string]json.RawMessage, schema *tableSchema, current []byte, lag time.Duration) ([]byte, bool) {
	for _, k := range []string{"FilterExpression", "ProjectionExpression", "Select", "Limit", "ExclusiveStartKey", "KeyConditions", "QueryFilter", "AttributesToGet"} {
		if _, ok := req[k]; ok {
			return nil, false
		}
	}
	ix, ok := schema.indexes[jsonString(req["IndexName"])]
	if !ok {
		return nil, false
	}
	cond, ok := queryKeyCondition(req, ix)
	if !ok {
		return nil, false
	}
	var resp map[string]json.RawMessage
	var items []map[string]json.RawMessage
	if json.Unmarshal(current, &resp) != nil || json.Unmarshal(resp["Items"], &items) != nil || resp["LastEvaluatedKey"] != nil {
		return nil, false
	}
	at := time.Now().Add(-lag)
	prefix := jsonString(req["TableName"]) + "\x00"
	then := map[string]version{} // items written since at, as they were at at
	s.dynamo.mu.Lock()
	for hk, vs := range s.dynamo.history {
		if !strings.HasPrefix(hk, prefix) || len(vs) == 0 || !vs[len(vs)-1].at.After(at) {
			continue
		}
		if v, known := versionAt(vs, at); known {
			then[strings.TrimPrefix(hk, prefix)] = v
		}
	}
	s.dynamo.mu.Unlock()
	var out []map[string]json.RawMessage
	for _, it := range items {
		if _, changed := then[string(keyOfItem(it, schema).raw)]; !changed {
			out = append(out, ix.project(it, schema))
		}
	}
	for _, v := range then {
		if v.item != nil && cond.matches(v.item) {
			out = append(out, ix.project(v.item, schema))
		}
	}
	if sameItems(out, items, ix, schema) {
		return nil, false
	}
	sortItems(out, ix, schema, string(req["ScanIndexForward"]) == "false")
	resp["Items"], _ = json.Marshal(out)
	resp["Count"] = json.RawMessage(strconv.Itoa(len(out)))
	resp["ScannedCount"] = resp["Count"]
	b, _ := json.Marshal(resp)
	return b, true
}

// project keeps what the index holds of an item.
func (ix indexSchema) project(item map[string]json.RawMessage, schema *tableSchema) map[string]json.RawMessage {
	if ix.projection == "ALL" {
		return item
	}
	out := map[string]json.RawMessage{}
	for _, a := range append([]string{schema.hash, schema.sort, ix.hash, ix.sort}, ix.include...) {
		if v, ok := item[a]; ok && a != "" {
			out[a] = v
		}
	}
	return out
}

func sameItems(a, b []map[string]json.RawMessage, ix indexSchema, schema *tableSchema) bool {
	canon := func(items []map[string]json.RawMessage) []string {
		out := make([]string, len(items))
		for i, it := range items {
			b, _ := json.Marshal(ix.project(it, schema))
			out[i] = string(b)
		}
		sort.Strings(out)
		return out
	}
	return slices.Equal(canon(a), canon(b))
}

// sortItems orders by the index's range key, then the table key.
func sortItems(items []map[string]json.RawMessage, ix indexSchema, schema *tableSchema, backward bool) {
	sort.SliceStable(items, func(i, j int) bool {
		if ix.sort != "" {
			if c, ok := compareAttr(items[i][ix.sort], items[j][ix.sort]); ok && c != 0 {
				return (c < 0) != backward
			}
		}
		return keyOfItem(items[i], schema).id < keyOfItem(items[j], schema).id
	})
}
