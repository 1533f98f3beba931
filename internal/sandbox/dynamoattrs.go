package sandbox

import (
	"encoding/json"
	"sort"
	"strings"
	"unicode"
)

// The dynamodb:Attributes and dynamodb:ReturnValues condition keys of an
// UpdateItem, as the endpoint models them. AWS documents dynamodb:Attributes
// as the list of top-level attribute names a request accesses, and the
// DynamoDB developer guide's fine-grained access control examples use it
// with ForAllValues to limit which attributes a principal may write. It does
// not spell out, for UpdateItem, whether names read only by the condition
// expression are in the list: the sandbox counts them (with the key and
// every name the update expression sets, removes, adds or deletes), the
// stricter reading, so a policy that works here works either way. Nested
// paths count by their top-level name (signals.UD_OK is signals).

// updateAttributes lists the top-level attribute names an UpdateItem names.
func updateAttributes(in map[string]json.RawMessage, keyNames []string) []string {
	var names map[string]string
	json.Unmarshal(in["ExpressionAttributeNames"], &names)
	seen := map[string]bool{}
	for _, k := range keyNames {
		seen[k] = true
	}
	for _, field := range []string{"UpdateExpression", "ConditionExpression"} {
		for _, n := range topLevelNames(jsonString(in[field]), names) {
			seen[n] = true
		}
	}
	// The legacy parameters name attributes directly.
	for _, field := range []string{"AttributeUpdates", "Expected"} {
		var legacy map[string]json.RawMessage
		json.Unmarshal(in[field], &legacy)
		for n := range legacy {
			seen[n] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// expressionWords are the keywords and functions of DynamoDB's expression
// grammar (the developer guide's condition and update expression
// references): never attribute names.
var expressionWords = map[string]bool{
	"SET": true, "REMOVE": true, "ADD": true, "DELETE": true, "AND": true, "OR": true, "NOT": true,
	"IN": true, "BETWEEN": true, "attribute_exists": true, "attribute_not_exists": true,
	"attribute_type": true, "begins_with": true, "contains": true, "size": true,
	"if_not_exists": true, "list_append": true,
}

// topLevelNames reads the first element of every document path in expr:
// a #placeholder resolved through names, or a literal name. Values
// (:placeholders), numbers, keywords and functions are skipped, and so are
// the later elements of a path (.name, [n]).
func topLevelNames(expr string, names map[string]string) []string {
	var out []string
	r := []rune(expr)
	isName := func(c rune) bool { return c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c) }
	afterPathDot := false
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case c == '.':
			afterPathDot = true
			i++
			continue
		case c == '[':
			for i < len(r) && r[i] != ']' {
				i++
			}
			i++
			continue
		case c == ':':
			i++
			for i < len(r) && isName(r[i]) {
				i++
			}
		case c == '#' || unicode.IsLetter(c) || c == '_':
			j := i + 1
			for j < len(r) && isName(r[j]) {
				j++
			}
			word := string(r[i:j])
			k := j
			for k < len(r) && r[k] == ' ' {
				k++
			}
			isFunc := k < len(r) && r[k] == '('
			if !afterPathDot && !isFunc && !expressionWords[word] {
				if strings.HasPrefix(word, "#") {
					if n, ok := names[word]; ok {
						out = append(out, n)
					}
				} else {
					out = append(out, word)
				}
			}
			i = j
		default:
			i++
		}
		afterPathDot = false
	}
	return out
}
