// Package controlplane holds what the provision, release, refresh,
// scale-down and jit functions share: their dependencies, strict payload
// decoding, and the steps that hand an instance back to the pool or retire
// it.
package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

// A payload the function refuses is a *fielderr.Error of source
// fielderr.Payload: it names the field and the rule, and nothing was
// changed (IsInput).

// Invalid returns the *fielderr.Error refusing a payload's field.
func Invalid(field, format string, args ...any) error {
	return fielderr.New(fielderr.Payload, field, format, args...)
}

// IsInput says whether err is a payload the function refused.
func IsInput(err error) bool { return fielderr.Is(err, fielderr.Payload) }

// Decode parses a JSON payload into v strictly: unknown fields, wrong types,
// trailing data and an empty payload are refused with the field named.
func Decode(payload []byte, v any) error {
	if len(bytes.TrimSpace(payload)) == 0 || string(bytes.TrimSpace(payload)) == "null" {
		return &fielderr.Error{Source: fielderr.Payload, Rule: "empty payload; send a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); !errors.Is(extra, io.EOF) {
			return &fielderr.Error{Source: fielderr.Payload, Rule: "trailing data after the JSON object"}
		}
		return exactKeys(payload, v)
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return &fielderr.Error{Source: fielderr.Payload, Rule: fmt.Sprintf("want a JSON object, got %s", typeErr.Value)}
		}
		return &fielderr.Error{Source: fielderr.Payload, Field: field, Rule: fmt.Sprintf("want %s, got %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)}
	case errors.As(err, &syntaxErr):
		return &fielderr.Error{Source: fielderr.Payload, Rule: fmt.Sprintf("not valid JSON at byte %d: %v", syntaxErr.Offset, err)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &fielderr.Error{Source: fielderr.Payload, Rule: "not valid JSON: it ends too early"}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &fielderr.Error{Source: fielderr.Payload, Field: clip(name), Rule: "unknown field"}
	default:
		return &fielderr.Error{Source: fielderr.Payload, Rule: err.Error()}
	}
}

// exactKeys refuses keys that encoding/json accepted only because it matches
// names without regard to case ("runID" for "runId"), and keys given twice
// (encoding/json keeps the last silently): the payload contract is exact,
// and a near-miss or a repeat is more likely a typo or a trick than intent.
func exactKeys(payload []byte, v any) error {
	keys, ok := topKeys(payload)
	if !ok {
		return nil // not an object of fields: Decode already judged it
	}
	known := map[string]bool{}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" {
			name = t.Field(i).Name
		}
		known[name] = true
	}
	seen := map[string]bool{}
	for _, k := range keys {
		quoted := strconv.Quote(k) // as encoding/json names unknown fields
		field := clip(quoted[1 : len(quoted)-1])
		switch {
		case !known[k]:
			return &fielderr.Error{Source: fielderr.Payload, Field: field, Rule: "unknown field (names are case-sensitive)"}
		case seen[k]:
			return &fielderr.Error{Source: fielderr.Payload, Field: field, Rule: "given more than once"}
		}
		seen[k] = true
	}
	return nil
}

// topKeys lists the keys of a JSON object in order, repeats included.
func topKeys(payload []byte) ([]string, bool) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, _ := tok.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, false
		}
	}
	return keys, true
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int32", "int64", "uint", "uint32", "uint64":
		return "an integer"
	case "slice":
		return "an array"
	case "bool":
		return "true or false"
	case "struct", "map":
		return "an object"
	}
	return goKind
}

var runIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// CheckRunID applies the runId rule. The runId becomes the
// runner's only label, so it must not carry commas, spaces or shell syntax;
// and it is the argument of config.sh --labels, so it must not start with
// '-' (config.sh would read "--ephemeral" as an option, not a label).
func CheckRunID(runID string) error {
	if runID == "" {
		return Invalid("runId", "required (use ${{ github.run_id }}, or run_id-run_attempt for re-runs)")
	}
	if !runIDRE.MatchString(runID) {
		return Invalid("runId", "%s must be 1-100 characters of A-Z a-z 0-9 . _ - starting with a letter or digit", Quote(runID))
	}
	return nil
}

// maxQuoted is how much of a refused value a message repeats.
const maxQuoted = 64

// Quote quotes a refused value for a message, cut to its first 64 bytes
// with its full length, so an oversized value cannot make an oversized
// error (a function error carries the message back to the caller's log).
func Quote(s string) string {
	if len(s) <= maxQuoted {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:maxQuoted], len(s))
}

// clip cuts a name taken from the payload (an unknown field) to the length
// Quote repeats.
func clip(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", strings.ToValidUTF8(s[:maxQuoted], "?"), len(s))
}

// DecodeNone checks the payload of a function that takes no input (refresh,
// scale-down): empty, null or {} — with any surrounding white space — is
// accepted; anything else is refused as Decode refuses it.
func DecodeNone(payload []byte) error {
	trimmed := bytes.TrimSpace(payload)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil
	}
	var none struct{}
	return Decode(payload, &none)
}
