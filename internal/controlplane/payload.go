// Package controlplane holds what the provision, release, refresh and
// scale-down functions share: their dependencies, strict payload decoding,
// and the steps that hand an instance back to the pool or retire it.
package controlplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strings"
)

// InputError is a payload the function refuses: it names the field and the
// rule, and nothing was changed.
type InputError struct {
	Field string
	Rule  string
}

func (e *InputError) Error() string {
	if e.Field == "" {
		return "invalid payload: " + e.Rule
	}
	return fmt.Sprintf("invalid payload: %s: %s", e.Field, e.Rule)
}

// Invalid returns an *InputError.
func Invalid(field, format string, args ...any) error {
	return &InputError{Field: field, Rule: fmt.Sprintf(format, args...)}
}

// Decode parses a JSON payload into v strictly: unknown fields, wrong types,
// trailing data and an empty payload are refused with the field named.
func Decode(payload []byte, v any) error {
	if len(bytes.TrimSpace(payload)) == 0 || string(bytes.TrimSpace(payload)) == "null" {
		return &InputError{Rule: "empty payload; send a JSON object"}
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); !errors.Is(extra, io.EOF) {
			return &InputError{Rule: "trailing data after the JSON object"}
		}
		return exactKeys(payload, v)
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return &InputError{Rule: fmt.Sprintf("want a JSON object, got %s", typeErr.Value)}
		}
		return &InputError{Field: field, Rule: fmt.Sprintf("want %s, got %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)}
	case errors.As(err, &syntaxErr):
		return &InputError{Rule: fmt.Sprintf("not valid JSON at byte %d: %v", syntaxErr.Offset, err)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &InputError{Rule: "not valid JSON: it ends too early"}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &InputError{Field: name, Rule: "unknown field"}
	default:
		return &InputError{Rule: err.Error()}
	}
}

// exactKeys refuses keys that encoding/json accepted only because it matches
// names without regard to case ("runID" for "runId"): the payload contract is
// exact, and a near-miss is more likely a typo than intent.
func exactKeys(payload []byte, v any) error {
	var keys map[string]json.RawMessage
	if json.Unmarshal(payload, &keys) != nil {
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
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !known[k] {
			return &InputError{Field: k, Rule: "unknown field (names are case-sensitive)"}
		}
	}
	return nil
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

var runIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

// CheckRunID applies the runId rule of DESIGN.md §6. The runId becomes the
// runner's only label, so it must not carry commas, spaces or shell syntax.
func CheckRunID(runID string) error {
	if runID == "" {
		return Invalid("runId", "required (use ${{ github.run_id }}, or run_id-run_attempt for re-runs)")
	}
	if !runIDRE.MatchString(runID) {
		return Invalid("runId", "%q must be 1-100 characters of A-Z a-z 0-9 . _ -", runID)
	}
	return nil
}
