package sandbox

import (
	"encoding/json"
	"fmt"
)

// The request context of DynamoDB actions: the table or index each names,
// the parts of batch and transaction calls, and the partition key a write or
// a query touches (dynamodb:LeadingKeys). See iamcontext.go for the model.

func (s *Sandbox) dynamoChecks(req awsRequest, op string) ([]check, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(req.body, &in); err != nil {
		return nil, fmt.Errorf("dynamodb %s: %w", op, err)
	}
	tableARN := func(t string) string { return req.arn("dynamodb", "table/"+t) }
	leading := func(table string, keys ...json.RawMessage) map[string][]string {
		sc := s.schema(req.r.Header, table)
		if sc == nil {
			return map[string][]string{"dynamodb:LeadingKeys": {}}
		}
		var vals []string
		for _, k := range keys {
			vals = append(vals, keyOf(k, sc).id)
		}
		return map[string][]string{"dynamodb:LeadingKeys": vals}
	}
	// An update also carries the attributes it names (dynamoattrs.go) and
	// the values it asks back.
	update := func(table string, part map[string]json.RawMessage) map[string][]string {
		cx := leading(table, part["Key"])
		var keyNames []string
		if sc := s.schema(req.r.Header, table); sc != nil {
			keyNames = append(keyNames, sc.hash)
			if sc.sort != "" {
				keyNames = append(keyNames, sc.sort)
			}
		}
		cx["dynamodb:Attributes"] = updateAttributes(part, keyNames)
		if rv := jsonString(part["ReturnValues"]); rv != "" {
			cx["dynamodb:ReturnValues"] = []string{rv}
		}
		return cx
	}
	table := jsonString(in["TableName"])
	switch op {
	case "UpdateItem":
		return []check{{"dynamodb:UpdateItem", tableARN(table), update(table, in)}}, nil
	case "GetItem", "DeleteItem":
		return []check{{"dynamodb:" + op, tableARN(table), leading(table, in["Key"])}}, nil
	case "PutItem":
		return []check{{"dynamodb:PutItem", tableARN(table), leading(table, in["Item"])}}, nil
	case "DescribeTable", "DescribeTimeToLive", "DescribeContinuousBackups":
		return []check{{"dynamodb:" + op, tableARN(table), nil}}, nil
	case "Query", "Scan":
		res := tableARN(table)
		if ix := jsonString(in["IndexName"]); ix != "" {
			res += "/index/" + ix
		}
		c := check{"dynamodb:" + op, res, nil}
		if op == "Query" {
			v, err := queryLeadingKey(s.schema(req.r.Header, table), in)
			if err != nil {
				return nil, err
			}
			c.context = map[string][]string{"dynamodb:LeadingKeys": {v}}
		}
		return []check{c}, nil
	case "BatchGetItem":
		var items map[string]struct{ Keys []json.RawMessage }
		json.Unmarshal(in["RequestItems"], &items)
		var out []check
		for _, t := range sortedKeysOf(items) {
			out = append(out, check{"dynamodb:BatchGetItem", tableARN(t), leading(t, items[t].Keys...)})
		}
		return out, nil
	case "BatchWriteItem":
		var items map[string][]struct {
			PutRequest    *struct{ Item json.RawMessage }
			DeleteRequest *struct{ Key json.RawMessage }
		}
		json.Unmarshal(in["RequestItems"], &items)
		var out []check
		for _, t := range sortedKeysOf(items) {
			var keys []json.RawMessage
			for _, wr := range items[t] {
				if wr.PutRequest != nil {
					keys = append(keys, wr.PutRequest.Item)
				}
				if wr.DeleteRequest != nil {
					keys = append(keys, wr.DeleteRequest.Key)
				}
			}
			out = append(out, check{"dynamodb:BatchWriteItem", tableARN(t), leading(t, keys...)})
		}
		return out, nil
	case "TransactWriteItems", "TransactGetItems":
		// Not IAM actions: each part is authorized as its own action.
		var tx struct {
			TransactItems []map[string]map[string]json.RawMessage
		}
		json.Unmarshal(in["TransactItems"], &tx)
		actions := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
		var out []check
		for _, ti := range tx.TransactItems {
			for kind, part := range ti {
				action, ok := actions[kind]
				if !ok {
					return nil, fmt.Errorf("dynamodb %s: unknown part %q", op, kind)
				}
				t := jsonString(part["TableName"])
				if kind == "Update" {
					out = append(out, check{"dynamodb:UpdateItem", tableARN(t), update(t, part)})
					continue
				}
				key := part["Key"]
				if key == nil {
					key = part["Item"]
				}
				out = append(out, check{"dynamodb:" + action, tableARN(t), leading(t, key)})
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("no IAM mapping for dynamodb %s", op)
}

// queryLeadingKey is the partition key value a Query's key condition names.
func queryLeadingKey(sc *tableSchema, in map[string]json.RawMessage) (string, error) {
	if sc == nil {
		return "", fmt.Errorf("dynamodb Query: the table's key schema is unknown")
	}
	ix := indexSchema{hash: sc.hash, sort: sc.sort}
	if name := jsonString(in["IndexName"]); name != "" {
		ix = sc.indexes[name]
	}
	kc, ok := queryKeyCondition(in, ix)
	if !ok {
		return "", fmt.Errorf("dynamodb Query: cannot read the key condition %q", jsonString(in["KeyConditionExpression"]))
	}
	_, v := attrValue(kc.value)
	return v, nil
}
