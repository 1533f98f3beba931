package controlplane

import (
	"errors"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

type sample struct {
	RunID string   `json:"runId"`
	Count *int     `json:"instanceCount"`
	Types []string `json:"allowedInstanceTypes"`
}

func TestDecodeNamesTheField(t *testing.T) {
	cases := []struct {
		payload, field, rule string
	}{
		{``, "", "empty payload"},
		{`null`, "", "empty payload"},
		{`[]`, "", "want a JSON object"},
		{`{"runId":1}`, "runId", "want a string, got number"},
		{`{"instanceCount":"3"}`, "instanceCount", "want an integer, got string"},
		{`{"instanceCount":2.5}`, "instanceCount", "want an integer"},
		{`{"allowedInstanceTypes":"c*"}`, "allowedInstanceTypes", "want an array, got string"},
		{`{"runID":"1"}`, "runID", "unknown field"},
		{`{"runId":"1"} {"runId":"2"}`, "", "trailing data"},
		{`{"runId":"1"`, "", "not valid JSON"},
		{`{"runId":"1","RunId":"2"}`, "RunId", "unknown field"},
	}
	for _, c := range cases {
		var v sample
		err := Decode([]byte(c.payload), &v)
		var ie *fielderr.Error
		if !errors.As(err, &ie) || ie.Field != c.field || !strings.Contains(ie.Rule, c.rule) {
			t.Errorf("Decode(%s) = %v, want field %q rule containing %q", c.payload, err, c.field, c.rule)
		}
	}
	var ok sample
	if err := Decode([]byte(`{"runId":"12","instanceCount":3,"allowedInstanceTypes":["c*"]}`), &ok); err != nil || *ok.Count != 3 {
		t.Fatalf("valid payload: %v %+v", err, ok)
	}
}

func TestCheckRunID(t *testing.T) {
	for _, bad := range []string{"", "a b", "12;rm -rf /", "x,y", "$(id)", strings.Repeat("9", 101), "run\nid", "ü"} {
		if err := CheckRunID(bad); err == nil || !strings.Contains(err.Error(), "runId") {
			t.Errorf("CheckRunID(%q) = %v", bad, err)
		}
	}
	for _, good := range []string{"1234567890", "1234-2", "run_7890.a", strings.Repeat("9", 100)} {
		if err := CheckRunID(good); err != nil {
			t.Errorf("CheckRunID(%q) = %v", good, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"runId":"1","instanceCount":2}`))
	f.Add([]byte(`{"allowedInstanceTypes":["c*",1]}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		var v sample
		err := Decode(payload, &v)
		var ie *fielderr.Error
		if err != nil && !errors.As(err, &ie) {
			t.Fatalf("Decode returned a %T, not a *fielderr.Error: %v", err, err)
		}
	})
}
