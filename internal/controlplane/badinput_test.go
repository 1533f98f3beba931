package controlplane

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

// maxMessage bounds every refusal's message: the caller's log gets it back,
// however large the payload was.
const maxMessage = 512

// TestDecodeBadInput is the decoder's part of the bad-input catalogue
// (lambdas/badinput_test.go has the handlers' part): repeats, oversized and
// odd names, deep nesting, and messages that stay short.
func TestDecodeBadInput(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	cases := []struct {
		name, payload, field, rule string
	}{
		{"repeated key, bad value last", `{"runId":"1","runId":"2; rm -rf /"}`, "runId", "given more than once"},
		{"repeated key, bad value first", `{"runId":"2; rm -rf /","runId":"1"}`, "runId", "given more than once"},
		{"oversized unknown key", `{"` + long + `":1}`, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx… (1048576 bytes)", "unknown field"},
		{"unknown key with a newline", `{"a\nb":1}`, `a\nb`, "unknown field"},
		{"unknown key with a NUL", `{"a\u0000b":1}`, `a\x00b`, "unknown field"},
		{"deep nesting in a known field", `{"runId":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, "", "exceeded max depth"},
		{"deep nesting in an unknown field", `{"x":` + strings.Repeat(`{"a":`, 500) + `1` + strings.Repeat("}", 500) + `}`, "x", "unknown field"},
		{"nested object for a string", `{"runId":{"runId":"1"}}`, "runId", "want a string, got object"},
		{"huge number for an integer", `{"instanceCount":1e400}`, "instanceCount", "want an integer"},
		{"integer beyond int64", `{"instanceCount":9223372036854775808}`, "instanceCount", "want an integer"},
		{"exponent for an integer", `{"instanceCount":1e2}`, "instanceCount", "want an integer"},
		{"string array with a number", `{"allowedInstanceTypes":["c*",1]}`, "allowedInstanceTypes", "want a string, got number"},
		{"BOM before the object", "\ufeff{}", "", "not valid JSON"},
		{"invalid UTF-8 key", "{\"\xff\":1}", "\ufffd", "unknown field"},
		{"JSON in a string", `"{\"runId\":\"1\"}"`, "", "want a JSON object, got string"},
		{"number", `42`, "", "want a JSON object, got number"},
		{"bool", `true`, "", "want a JSON object, got bool"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var v sample
			err := Decode([]byte(c.payload), &v)
			var ie *fielderr.Error
			if !errors.As(err, &ie) || !strings.Contains(ie.Rule, c.rule) || (c.field != "" && ie.Field != c.field) {
				t.Fatalf("Decode = %v, want field %q rule containing %q", err, c.field, c.rule)
			}
			if len(err.Error()) > maxMessage {
				t.Fatalf("message of %d bytes", len(err.Error()))
			}
		})
	}
}

func TestQuoteCutsLongValues(t *testing.T) {
	if got := Quote("a;b"); got != `"a;b"` {
		t.Errorf("Quote = %s", got)
	}
	got := Quote(strings.Repeat("é", 1000))
	if !strings.HasSuffix(got, "… (2000 bytes)") || len(got) > 3*maxQuoted+32 {
		t.Errorf("Quote = %s", got)
	}
	err := CheckRunID(strings.Repeat("$(id)", 1<<18))
	if err == nil || len(err.Error()) > maxMessage || !strings.Contains(err.Error(), "runId:") {
		t.Errorf("CheckRunID(1 MB) = %d bytes: %.200v", len(err.Error()), err)
	}
}

// The runId is config.sh's --labels argument: it may not look like an option.
func TestCheckRunIDNoOption(t *testing.T) {
	for _, bad := range []string{"--ephemeral", "-1", ".", "..", "_x", "1\x00", "1\r", "1\t", "`id`", "1'2", `1"2`, "a/b", "a#b", "a=b"} {
		if err := CheckRunID(bad); err == nil || !strings.Contains(err.Error(), "runId: ") {
			t.Errorf("CheckRunID(%q) = %v", bad, err)
		}
	}
	for _, good := range []string{"9", "a", "1234-2", "1.2", "R_1"} {
		if err := CheckRunID(good); err != nil {
			t.Errorf("CheckRunID(%q) = %v", good, err)
		}
	}
}

// DecodeNone is the whole payload check of refresh and scale-down.
func TestDecodeNone(t *testing.T) {
	for _, ok := range []string{"", " ", "\n\t", "null", " null\n", "{}", " { } "} {
		if err := DecodeNone([]byte(ok)); err != nil {
			t.Errorf("DecodeNone(%q) = %v", ok, err)
		}
	}
	for _, c := range []struct{ payload, want string }{
		{`{"force":true}`, "force: unknown field"},
		{`[]`, "want a JSON object, got array"},
		{`"run"`, "want a JSON object, got string"},
		{`0`, "want a JSON object, got number"},
		{`{`, "not valid JSON"},
		{`{} {}`, "trailing data"},
		{`nul`, "not valid JSON"},
		{`{"":1}`, ": unknown field"},
	} {
		err := DecodeNone([]byte(c.payload))
		var ie *fielderr.Error
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeNone(%q) = %v, want %q", c.payload, err, c.want)
		}
	}
}

// FuzzDecodeNone: refresh's and scale-down's payload check never panics,
// refuses with a *fielderr.Error and a short message, and accepts only an empty
// object (or nothing).
func FuzzDecodeNone(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(` null `))
	f.Add([]byte(`{"force":true}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		err := DecodeNone(payload)
		if err == nil {
			trimmed := strings.TrimSpace(string(payload))
			var m map[string]any
			if trimmed != "" && trimmed != "null" && (Decode(payload, &m) != nil || len(m) != 0) {
				t.Fatalf("DecodeNone accepted %q", payload)
			}
			return
		}
		checkRefusal(t, payload, err)
	})
}

func checkRefusal(t *testing.T, payload []byte, err error) {
	t.Helper()
	var ie *fielderr.Error
	if !errors.As(err, &ie) {
		t.Fatalf("%q: a %T, not a *fielderr.Error: %v", payload, err, err)
	}
	if msg := err.Error(); len(msg) > maxMessage || !utf8.ValidString(ie.Field) {
		t.Fatalf("%q: message of %d bytes, field %q", payload, len(msg), ie.Field)
	}
}
