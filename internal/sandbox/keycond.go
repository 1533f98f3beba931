package sandbox

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The key conditions of a Query, evaluated on item versions for the index
// lag (indexlag.go).

// keyCond is a key condition: hash = value, and optionally a condition on
// the index's range key.
type keyCond struct {
	hash  string
	value json.RawMessage
	sort  string
	op    string // =, <, <=, >, >=, BETWEEN, begins_with; "" none
	args  []json.RawMessage
}

var keyCondToken = regexp.MustCompile(`#\w+|:\w+|<=|>=|=|<|>|\(|\)|,|[A-Za-z_][\w.]*`)

// queryKeyCondition reads a Query request's key condition against index ix
// (the table's own keys for a base-table query).
func queryKeyCondition(req map[string]json.RawMessage, ix indexSchema) (keyCond, bool) {
	var names map[string]string
	var values map[string]json.RawMessage
	json.Unmarshal(req["ExpressionAttributeNames"], &names)
	json.Unmarshal(req["ExpressionAttributeValues"], &values)
	return parseKeyCondition(jsonString(req["KeyConditionExpression"]), names, values, ix)
}

func parseKeyCondition(expr string, names map[string]string, values map[string]json.RawMessage, ix indexSchema) (keyCond, bool) {
	toks := keyCondToken.FindAllString(expr, -1)
	if strings.Join(toks, "") != strings.Join(strings.Fields(expr), "") {
		return keyCond{}, false // something this parser does not know
	}
	pos := 0
	next := func() string {
		if pos >= len(toks) {
			return ""
		}
		pos++
		return toks[pos-1]
	}
	name := func(t string) string {
		if strings.HasPrefix(t, "#") {
			return names[t]
		}
		return t
	}
	var kc keyCond
	for {
		var attr, op string
		var args []json.RawMessage
		t := next()
		if strings.EqualFold(t, "begins_with") {
			if next() != "(" {
				return kc, false
			}
			attr = name(next())
			if next() != "," {
				return kc, false
			}
			args = append(args, values[next()])
			if next() != ")" {
				return kc, false
			}
			op = "begins_with"
		} else {
			attr, op = name(t), strings.ToUpper(next())
			args = append(args, values[next()])
			if op == "BETWEEN" {
				if !strings.EqualFold(next(), "AND") {
					return kc, false
				}
				args = append(args, values[next()])
			}
		}
		for _, a := range args {
			if a == nil {
				return kc, false
			}
		}
		switch {
		case attr == ix.hash && op == "=" && kc.hash == "":
			kc.hash, kc.value = attr, args[0]
		case attr == ix.sort && ix.sort != "" && kc.op == "" && slices.Contains([]string{"=", "<", "<=", ">", ">=", "BETWEEN", "begins_with"}, op):
			kc.sort, kc.op, kc.args = attr, op, args
		default:
			return kc, false
		}
		t = next()
		if t == "" {
			return kc, kc.hash != ""
		}
		if !strings.EqualFold(t, "AND") {
			return kc, false
		}
	}
}

func (kc keyCond) matches(item map[string]json.RawMessage) bool {
	if c, ok := compareAttr(item[kc.hash], kc.value); !ok || c != 0 {
		return false
	}
	if kc.op == "" {
		return true
	}
	v := item[kc.sort]
	if kc.op == "begins_with" {
		t1, a := attrValue(v)
		t2, b := attrValue(kc.args[0])
		return t1 != "" && t1 == t2 && strings.HasPrefix(a, b)
	}
	c, ok := compareAttr(v, kc.args[0])
	if !ok {
		return false
	}
	switch kc.op {
	case "=":
		return c == 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	case ">=":
		return c >= 0
	}
	hi, ok := compareAttr(v, kc.args[1]) // BETWEEN
	return ok && c >= 0 && hi <= 0
}

// compareAttr compares two scalar values of the same type as DynamoDB
// orders them: numbers by value, strings and binaries byte by byte.
func compareAttr(a, b json.RawMessage) (int, bool) {
	ta, va := attrValue(a)
	tb, vb := attrValue(b)
	if ta == "" || ta != tb {
		return 0, false
	}
	switch ta {
	case "N":
		x, err1 := strconv.ParseFloat(va, 64)
		y, err2 := strconv.ParseFloat(vb, 64)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		return cmpFloat(x, y), true
	case "B":
		x, err1 := base64.StdEncoding.DecodeString(va)
		y, err2 := base64.StdEncoding.DecodeString(vb)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		return bytes.Compare(x, y), true
	}
	return strings.Compare(va, vb), true
}

func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
