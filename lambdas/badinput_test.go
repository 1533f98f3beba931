package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// badInput is one row of the payload catalogue: a payload a handler must
// refuse with a function error whose message holds want (the field and the
// rule). static rows are refused by the handler's pure payload check
// (provision.ParsePayload, release.ParsePayload, controlplane.DecodeNone),
// before any AWS or GitHub call; the others need the pool's configuration.
type badInput struct {
	handler, payload, want string
	static                 bool
}

// provisionBadInputs: every field of the provision payload with a wrong
// type, a missing or out-of-range value, an injection attempt and an
// oversized value; then the payload as a whole (docs/design.md).
func provisionBadInputs() []badInput {
	mb := strings.Repeat("9", 1<<20)
	with := func(field, value string) string {
		base := map[string]string{"runId": `"1"`, "pool": `"linux"`}
		base[field] = value
		var parts []string
		for _, k := range []string{"runId", "pool", "instanceCount", "usageClass", "allowedInstanceTypes", "owner", "timeoutSeconds", "extra"} {
			if v, ok := base[k]; ok && v != "" {
				parts = append(parts, fmt.Sprintf("%q:%s", k, v))
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	var rows []badInput
	add := func(payload, want string, static bool) {
		rows = append(rows, badInput{"provision", payload, want, static})
	}
	// The payload as a whole.
	for _, c := range []struct{ payload, want string }{
		{``, "empty payload"},
		{"  \n", "empty payload"},
		{`null`, "empty payload"},
		{`[]`, "want a JSON object, got array"},
		{`[{"runId":"1","pool":"linux"}]`, "want a JSON object, got array"},
		{`"{\"runId\":\"1\",\"pool\":\"linux\"}"`, "want a JSON object, got string"},
		{`42`, "want a JSON object, got number"},
		{`true`, "want a JSON object, got bool"},
		{`{`, "not valid JSON"},
		{`{"runId":"1","pool":"linux",}`, "not valid JSON"},
		{`{'runId':'1'}`, "not valid JSON"},
		{`{"runId":"1","pool":"linux"} {"runId":"2"}`, "trailing data"},
		{`{"runId":"1","pool":"linux"}; rm -rf /`, "trailing data"},
		{`{"runId":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `,"pool":"linux"}`, "exceeded max depth"},
		{`{"runId":"1","pool":"linux","extra":` + strings.Repeat(`{"a":`, 1000) + `1` + strings.Repeat(`}`, 1000) + `}`, "extra: unknown field"},
		{`{"runId":"1","pool":"linux","runid":"2"}`, "runid: unknown field"},
		{`{"runId":"1","pool":"linux","RunId":"2"}`, "RunId: unknown field"},
		{`{"runId":"1","pool":"linux","instance_count":2}`, "instance_count: unknown field"},
		{`{"runId":"1","runId":"2; rm -rf /","pool":"linux"}`, "runId: given more than once"},
		{`{"runId":"2; rm -rf /","runId":"1","pool":"linux"}`, "runId: given more than once"},
	} {
		add(c.payload, c.want, true)
	}
	// runId: the runner's only label and config.sh's --labels argument.
	for _, c := range []struct{ value, want string }{
		{``, "runId: required"},
		{`null`, "runId: required"},
		{`""`, "runId: required"},
		{`123`, "runId: want a string, got number"},
		{`true`, "runId: want a string, got bool"},
		{`["1"]`, "runId: want a string, got array"},
		{`{"id":"1"}`, "runId: want a string, got object"},
		{`"1; rm -rf /"`, `runId: "1; rm -rf /" must be`},
		{`"$(id)"`, `runId: "$(id)" must be`},
		{"\"`id`\"", "runId: \"`id`\" must be"},
		{`"1\nrm -rf /"`, `runId: "1\nrm -rf /" must be`},
		{`"1\"2"`, `runId: "1\"2" must be`},
		{`"1'2"`, `runId: "1'2" must be`},
		{`"a,b"`, `runId: "a,b" must be`},
		{`"a b"`, `runId: "a b" must be`},
		{`"--ephemeral"`, `runId: "--ephemeral" must be`},
		{`"-1"`, `runId: "-1" must be`},
		{`".."`, `runId: ".." must be`},
		{`"a/b"`, `runId: "a/b" must be`},
		{`"run#1"`, `runId: "run#1" must be`},
		{`"ü"`, `runId: "ü" must be`},
		{`"1\u0000"`, `runId: "1\x00" must be`},
		{`"` + strings.Repeat("9", 101) + `"`, "runId: \"" + strings.Repeat("9", 64) + "\"… (101 bytes) must be"},
		{`"` + mb + `"`, "(1048576 bytes) must be"},
	} {
		add(with("runId", c.value), c.want, true)
	}
	// pool: a ghrunner_pool name, the key of its configuration item.
	for _, c := range []struct{ value, want string }{
		{``, "pool: required"},
		{`""`, "pool: required"},
		{`7`, "pool: want a string, got number"},
		{`["linux"]`, "pool: want a string, got array"},
		{`"linux#x"`, `pool: "linux#x" must be 1-64 letters`},
		{`"linux,gpu"`, `pool: "linux,gpu" must be`},
		{`"linux gpu"`, `pool: "linux gpu" must be`},
		{`"../linux"`, `pool: "../linux" must be`},
		{`"linux\n"`, `pool: "linux\n" must be`},
		{`"$(id)"`, `pool: "$(id)" must be`},
		{`"` + strings.Repeat("p", 65) + `"`, "(65 bytes) must be"},
		{`"` + mb + `"`, "(1048576 bytes) must be"},
	} {
		add(with("pool", c.value), c.want, true)
	}
	for _, c := range []struct{ value, want string }{
		{`"gpu"`, `pool: unknown pool "gpu"; known pools: linux`},
		{`"Linux"`, `pool: unknown pool "Linux"`},
	} {
		add(with("pool", c.value), c.want, false)
	}
	// instanceCount: 1 to the pool's maxInstances (20 here).
	for _, c := range []struct{ value, want string }{
		{`"3"`, "instanceCount: want an integer, got string"},
		{`2.5`, "instanceCount: want an integer, got number 2.5"},
		{`2.0`, "instanceCount: want an integer, got number 2.0"},
		{`1e2`, "instanceCount: want an integer"},
		{`1e400`, "instanceCount: want an integer"},
		{`9223372036854775808`, "instanceCount: want an integer"},
		{`true`, "instanceCount: want an integer, got bool"},
		{`[3]`, "instanceCount: want an integer, got array"},
	} {
		add(with("instanceCount", c.value), c.want, true)
	}
	for _, c := range []struct{ value, want string }{
		{`0`, "instanceCount: must be 1 to 20 (the pool's maxInstances), got 0"},
		{`-1`, "instanceCount: must be 1 to 20 (the pool's maxInstances), got -1"},
		{`21`, "instanceCount: must be 1 to 20"},
		{`9223372036854775807`, "instanceCount: must be 1 to 20"},
		{`-9223372036854775808`, "instanceCount: must be 1 to 20"},
	} {
		add(with("instanceCount", c.value), c.want, false)
	}
	// usageClass: spot or on-demand, case included.
	for _, c := range []struct{ value, want string }{
		{`1`, "usageClass: want a string, got number"},
		{`"reserved"`, `usageClass: "reserved" must be spot or on-demand`},
		{`"SPOT"`, `usageClass: "SPOT" must be spot or on-demand`},
		{`"spot; rm -rf /"`, `usageClass: "spot; rm -rf /" must be`},
		{`"spot,on-demand"`, `usageClass: "spot,on-demand" must be`},
		{`"` + mb + `"`, "(1048576 bytes) must be spot or on-demand"},
	} {
		add(with("usageClass", c.value), c.want, true)
	}
	// allowedInstanceTypes: globs of letters, digits, '.', '-' and '*'.
	for _, c := range []struct{ value, want string }{
		{`"c*"`, "allowedInstanceTypes: want an array, got string"},
		{`{"c*":true}`, "allowedInstanceTypes: want an array, got object"},
		{`[1]`, "allowedInstanceTypes: want a string, got number"},
		{`[["c*"]]`, "allowedInstanceTypes: want a string, got array"},
		{`[null]`, `allowedInstanceTypes[0]: "" must be 1-64 characters`},
		{`[""]`, `allowedInstanceTypes[0]: "" must be 1-64 characters`},
		{`["c*","c*;x"]`, `allowedInstanceTypes[1]: "c*;x" may hold only`},
		{`["c*,m*"]`, `allowedInstanceTypes[0]: "c*,m*" may hold only`},
		{`["c?i.large"]`, `allowedInstanceTypes[0]: "c?i.large" may hold only`},
		{`["c[67]i.large"]`, `allowedInstanceTypes[0]: "c[67]i.large" may hold only`},
		{`["$(id)"]`, `allowedInstanceTypes[0]: "$(id)" may hold only`},
		{`["c* "]`, `allowedInstanceTypes[0]: "c* " may hold only`},
		{`["c7i.large\n"]`, `allowedInstanceTypes[0]: "c7i.large\n" may hold only`},
		{`["` + strings.Repeat("*", 65) + `"]`, "allowedInstanceTypes[0]: \"" + strings.Repeat("*", 64) + "\"… (65 bytes) must be 1-64 characters"},
		{`[` + strings.Repeat(`"c*",`, 64) + `"m*"]`, "allowedInstanceTypes: at most 64 globs, got 65"},
	} {
		add(with("allowedInstanceTypes", c.value), c.want, true)
	}
	for _, c := range []struct{ value, want string }{
		{`["r7*"]`, "allowedInstanceTypes: [r7*] match none of the pool's instance types [c7i.large m7i.large]"},
		{`["c7i.larg"]`, "allowedInstanceTypes: [c7i.larg] match none"},
		{`["c7i"]`, "allowedInstanceTypes: [c7i] match none"},
	} {
		add(with("allowedInstanceTypes", c.value), c.want, false)
	}
	// owner: an organization or one of its repositories; a GitHub API path.
	for _, c := range []struct{ value, want string }{
		{`7`, "owner: want a string, got number"},
		{`["acme"]`, "owner: want a string, got array"},
		{`"acme,evil"`, `owner: "acme,evil" must be an organization (acme) or a repository (acme/api)`},
		{`"acme/.."`, `owner: "acme/.." must be`},
		{`"acme/."`, `owner: "acme/." must be`},
		{`"acme/"`, `owner: "acme/" must be`},
		{`"acme/api/x"`, `owner: "acme/api/x" must be`},
		{`"acme/../orgs/evil"`, `owner: "acme/../orgs/evil" must be`},
		{`"acme/api?x=1"`, `owner: "acme/api?x=1" must be`},
		{`"acme/api#x"`, `owner: "acme/api#x" must be`},
		{`"acme/a b"`, `owner: "acme/a b" must be`},
		{`"acme/$(id)"`, `owner: "acme/$(id)" must be`},
		{`"-acme"`, `owner: "-acme" must be`},
		{`"acme/` + strings.Repeat("r", 101) + `"`, "owner: \"acme/"},
	} {
		add(with("owner", c.value), c.want, true)
	}
	for _, c := range []struct{ value, want string }{
		{`"other-org"`, `owner: "other-org" must be the pool's owner "acme" or one of its repositories (acme/<repo>)`},
		{`"other-org/api"`, `owner: "other-org/api" must be the pool's owner`},
		{`"ACME/api"`, `owner: "ACME/api" must be the pool's owner`},
		{`"acmeco/api"`, `owner: "acmeco/api" must be the pool's owner`},
	} {
		add(with("owner", c.value), c.want, false)
	}
	// timeoutSeconds: 30 to 900.
	for _, c := range []struct{ value, want string }{
		{`"60"`, "timeoutSeconds: want an integer, got string"},
		{`60.5`, "timeoutSeconds: want an integer, got number 60.5"},
		{`1e30`, "timeoutSeconds: want an integer"},
		{`5`, "timeoutSeconds: must be 30 to 900, got 5"},
		{`0`, "timeoutSeconds: must be 30 to 900, got 0"},
		{`-60`, "timeoutSeconds: must be 30 to 900, got -60"},
		{`901`, "timeoutSeconds: must be 30 to 900, got 901"},
		// × 1e9 ns wraps around int64 to about 30 s: accepted once.
		{`18446744104`, "timeoutSeconds: must be 30 to 900, got 18446744104"},
		{`-18446744013`, "timeoutSeconds: must be 30 to 900, got -18446744013"},
		{`9223372036854775807`, "timeoutSeconds: must be 30 to 900"},
	} {
		add(with("timeoutSeconds", c.value), c.want, true)
	}
	return rows
}

func otherBadInputs() []badInput {
	var rows []badInput
	for _, c := range []struct{ payload, want string }{
		{``, "empty payload"},
		{`null`, "empty payload"},
		{`{}`, "runId: required"},
		{`{"runId":null}`, "runId: required"},
		{`{"runId":1}`, "runId: want a string, got number"},
		{`{"runId":["1"]}`, "runId: want a string, got array"},
		{`{"runId":"x y"}`, `runId: "x y" must be`},
		{`{"runId":"1; rm -rf /"}`, `runId: "1; rm -rf /" must be`},
		{`{"runId":"$(id)"}`, `runId: "$(id)" must be`},
		{`{"runId":"a,b"}`, `runId: "a,b" must be`},
		{`{"runId":"--ephemeral"}`, `runId: "--ephemeral" must be`},
		{`{"runId":"1\n2"}`, `runId: "1\n2" must be`},
		{`{"runID":"1"}`, "runID: unknown field"},
		{`{"runId":"1","pool":"linux"}`, "pool: unknown field"},
		{`{"runId":"1","runId":"1"}`, "runId: given more than once"},
		{`[{"runId":"1"}]`, "want a JSON object, got array"},
		{`"1"`, "want a JSON object, got string"},
		{`{"runId":"1"} {"runId":"2"}`, "trailing data"},
	} {
		rows = append(rows, badInput{"release", c.payload, c.want, true})
	}
	for _, h := range []string{"refresh", bundle.HandlerScaleDown} {
		for _, c := range []struct{ payload, want string }{
			{`{"force":true}`, "force: unknown field"},
			{`{"pool":"linux"}`, "pool: unknown field"},
			{`[]`, "want a JSON object, got array"},
			{`"{}"`, "want a JSON object, got string"},
			{`0`, "want a JSON object, got number"},
			{`{`, "not valid JSON"},
			{`{} {}`, "trailing data"},
			{`{"":null}`, ": unknown field"},
		} {
			rows = append(rows, badInput{h, c.payload, c.want, true})
		}
	}
	return rows
}

// pureCheck is the handler's payload check that calls nothing.
func pureCheck(handler string, payload []byte) error {
	switch handler {
	case "provision":
		_, err := provision.ParsePayload(payload)
		return err
	case "release":
		_, err := release.ParsePayload(payload)
		return err
	default:
		return controlplane.DecodeNone(payload)
	}
}

// TestBadInputCatalogue: every row is a function error through the real
// entry point (the bundle under the Lambda runtime API) whose message holds
// the field and the rule, stays short, and changes nothing: no item in the
// state table but the pool's, no EC2 instance, no pool message.
func TestBadInputCatalogue(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	before := d.tableKeys()
	rows := append(provisionBadInputs(), otherBadInputs()...)
	for _, c := range rows {
		name := c.handler + " " + c.payload
		if len(name) > 120 {
			name = name[:120]
		}
		payload := []byte(c.payload)
		err := pureCheck(c.handler, payload)
		switch {
		case c.static && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: pure check = %.300v, want %q", name, err, c.want)
		case !c.static && err != nil:
			t.Errorf("%s: pure check refused what only the pool can judge: %v", name, err)
		}
		res := d.invoke(c.handler, payload)
		msg := string(res.Payload)
		if res.FunctionError == "" || !strings.Contains(msg, jsonText(c.want)) {
			t.Errorf("%s: %s %.400s, want a function error containing %q", name, res.FunctionError, msg, c.want)
		}
		if len(msg) > 1024 {
			t.Errorf("%s: error of %d bytes", name, len(msg))
		}
	}
	if n := len(d.live()); n != 0 {
		t.Errorf("bad payloads launched %d instances", n)
	}
	if after := d.tableKeys(); !slices.Equal(after, before) {
		t.Errorf("the table holds %v after bad payloads, want %v as before", after, before)
	}
	// Refresh and scale-down take nothing: white space, null and {} are
	// accepted (EventBridge Scheduler sends {}).
	for _, h := range []string{"refresh", bundle.HandlerScaleDown} {
		for _, p := range []string{"", " \n", "null", "{}", " { } "} {
			if res := d.invoke(h, []byte(p)); res.FunctionError != "" {
				t.Errorf("%s %q: %s", h, p, res.Payload)
			}
		}
	}
}

// tableKeys lists the keys of every item in the state table, sorted.
func (d *deployment) tableKeys() []string {
	d.t.Helper()
	out, err := d.aws.DynamoDB().Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(d.name), ConsistentRead: aws.Bool(true)})
	must(d.t, err)
	var keys []string
	for _, item := range out.Items {
		// A verified token's use is recorded before the call goes on
		// (controlplane.Caller): that token serves nothing else, whether
		// the call was then refused or not. The rest must not change.
		if pk, ok := item["pk"].(*ddbtypes.AttributeValueMemberS); ok && !strings.HasPrefix(pk.Value, "jti#") {
			keys = append(keys, pk.Value)
		}
	}
	slices.Sort(keys)
	return keys
}

// jsonText is s as it appears inside a JSON string (the function error's
// errorMessage): quotes and backslashes escaped, and non-ASCII as Go's
// encoding/json writes it.
func jsonText(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "<", `\u003c`, ">", `\u003e`, "&", `\u0026`)
	return r.Replace(s)
}

// TestBadPayloads: every malformed payload is a function error naming the
// field, and changes nothing.
func TestBadPayloads(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	cases := []struct {
		handler, payload, field string
	}{
		{"provision", ``, "empty payload"},
		{"provision", `[]`, "JSON object"},
		{"provision", `{"pool":"linux"}`, "runId: required"},
		{"provision", `{"runId":"","pool":"linux"}`, "runId: required"},
		{"provision", `{"runId":"1; rm -rf /","pool":"linux"}`, "runId:"},
		{"provision", `{"runId":"a,b","pool":"linux"}`, "runId:"},
		{"provision", `{"runId":123,"pool":"linux"}`, "runId: want a string"},
		{"provision", `{"runId":"1"}`, "pool: required"},
		{"provision", `{"runId":"1","pool":"gpu"}`, `pool: unknown pool \"gpu\"; known pools: linux`},
		{"provision", `{"runId":"1","pool":"linux","instanceCount":0}`, "instanceCount: must be 1 to 20"},
		{"provision", `{"runId":"1","pool":"linux","instanceCount":21}`, "instanceCount: must be 1 to 20"},
		{"provision", `{"runId":"1","pool":"linux","instanceCount":"3"}`, "instanceCount: want an integer"},
		{"provision", `{"runId":"1","pool":"linux","usageClass":"reserved"}`, "usageClass:"},
		{"provision", `{"runId":"1","pool":"linux","allowedInstanceTypes":["r7*"]}`, "allowedInstanceTypes: [r7*] match none"},
		{"provision", `{"runId":"1","pool":"linux","allowedInstanceTypes":["c*;x"]}`, "allowedInstanceTypes[0]:"},
		{"provision", `{"runId":"1","pool":"linux","allowedInstanceTypes":"c*"}`, "allowedInstanceTypes: want an array"},
		{"provision", `{"runId":"1","pool":"linux","owner":"other-org"}`, "owner:"},
		{"provision", `{"runId":"1","pool":"linux","timeoutSeconds":5}`, "timeoutSeconds:"},
		{"provision", `{"runId":"1","pool":"linux","instancecount":2}`, "instancecount: unknown field"},
		{"provision", `{"runId":"1","pool":"linux","extra":true}`, "extra: unknown field"},
		{"release", `{}`, "runId: required"},
		{"release", `{"runId":"x y"}`, "runId:"},
		{"release", `{"runID":"1"}`, "runID: unknown field"},
		{"refresh", `{"force":true}`, "force: unknown field"},
	}
	for _, c := range cases {
		res := d.invoke(c.handler, []byte(c.payload))
		if res.FunctionError == "" || !strings.Contains(string(res.Payload), c.field) {
			t.Errorf("%s %s: %s %s, want a function error containing %q", c.handler, c.payload, res.FunctionError, res.Payload, c.field)
		}
	}
	if n := len(d.live()); n != 0 {
		t.Fatalf("bad payloads launched %d instances", n)
	}
	if _, err := d.store.GetRun(ctx, "1"); !state.IsNotFound(err) {
		t.Fatalf("a bad payload left a run item: %v", err)
	}
}
