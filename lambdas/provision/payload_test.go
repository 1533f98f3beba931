package provision

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/pool"
)

// TestParsePayloadAccepts: the payloads of the README and the examples.
func TestParsePayloadAccepts(t *testing.T) {
	for _, p := range []string{
		`{"runId":"1234567890","pool":"linux"}`,
		`{"runId":"1234567890-2","pool":"linux-large","instanceCount":3,"usageClass":"spot","allowedInstanceTypes":["c*","m7i.*"],"owner":"acme/api","timeoutSeconds":900}`,
		`{"runId":"a","pool":"p","instanceCount":null,"owner":"acme","timeoutSeconds":30}`,
		`{"preflight":true}`,
		`{"preflight":true,"repositories":["acme/app","other-org/site"]}`,
		`{"runId":"a","pool":"p","waitSeconds":60}`,
	} {
		if _, err := ParsePayload([]byte(p)); err != nil {
			t.Errorf("ParsePayload(%s) = %v", p, err)
		}
	}
}

var (
	fuzzRunIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)
	fuzzPoolRE  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// FuzzProvisionPayload: ParsePayload never panics; a refusal is an
// *fielderr.Error with a short message; what it accepts keeps every rule that
// needs no pool, and survives its own encoding unchanged (the run item
// stores it so).
func FuzzProvisionPayload(f *testing.F) {
	f.Add([]byte(`{"runId":"1","pool":"linux"}`))
	f.Add([]byte(`{"runId":"1; rm -rf /","pool":"linux","instanceCount":2}`))
	f.Add([]byte(`{"runId":"1","pool":"linux","owner":"acme/..","timeoutSeconds":18446744104}`))
	f.Add([]byte(`{"preflight":true}`))
	f.Add([]byte(`{"preflight":true,"runId":"1","pool":"linux"}`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		in, err := ParsePayload(payload)
		if err != nil {
			var ie *fielderr.Error
			if !errors.As(err, &ie) || len(err.Error()) > 512 {
				t.Fatalf("%q: %T of %d bytes: %.300v", payload, err, len(err.Error()), err)
			}
			return
		}
		if in.Preflight {
			if !reflect.DeepEqual(in, Input{Preflight: true, Repositories: in.Repositories}) {
				t.Fatalf("accepted a preflight with more: %+v", in)
			}
			return
		}
		if !fuzzRunIDRE.MatchString(in.RunID) || !fuzzPoolRE.MatchString(in.Pool) {
			t.Fatalf("accepted runId %q pool %q", in.RunID, in.Pool)
		}
		if in.UsageClass != "" && in.UsageClass != "spot" && in.UsageClass != "on-demand" {
			t.Fatalf("accepted usageClass %q", in.UsageClass)
		}
		if t0 := in.TimeoutSeconds; t0 != nil && (*t0 < 30 || *t0 > 900) {
			t.Fatalf("accepted timeoutSeconds %d", *t0)
		}
		if in.Owner != "" {
			if _, err := github.ParseOwner(in.Owner); err != nil {
				t.Fatalf("accepted owner %q", in.Owner)
			}
		}
		if len(in.AllowedInstanceTypes) > MaxAllowedInstanceTypes {
			t.Fatalf("accepted %d globs", len(in.AllowedInstanceTypes))
		}
		for _, g := range in.AllowedInstanceTypes {
			if pool.ValidateGlob(g) != nil || strings.ContainsAny(g, ",; \n$`'\"") {
				t.Fatalf("accepted glob %q", g)
			}
		}
		again, _ := json.Marshal(in)
		back, err := ParsePayload(again)
		if err != nil {
			t.Fatalf("re-encoded %s refused: %v", again, err)
		}
		if len(in.AllowedInstanceTypes) == 0 {
			in.AllowedInstanceTypes = nil // [] is dropped by omitempty
		}
		if !reflect.DeepEqual(in, back) {
			t.Fatalf("re-encoded %+v as %+v", in, back)
		}
	})
}

// A preflight payload comes alone: with a run's fields it is refused,
// naming preflight, and nothing is provisioned.
func TestParsePayloadRefusesAPreflightWithARequest(t *testing.T) {
	_, err := ParsePayload([]byte(`{"preflight":true,"runId":"1","pool":"linux"}`))
	var ie *fielderr.Error
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "preflight") {
		t.Fatalf("got %v, want an input error naming preflight", err)
	}
}

// A preflight's repositories are owner/name, and only a preflight names
// them: anything else is refused naming repositories and the rule.
func TestPreflightRepositoriesMustBeRepositoriesOfAPreflight(t *testing.T) {
	for payload, rule := range map[string]string{
		`{"preflight":true,"repositories":["acme"]}`:               `"acme" must be a repository, owner/name`,
		`{"preflight":true,"repositories":["acme/app/x"]}`:         `must be a repository, owner/name`,
		`{"preflight":true,"repositories":[""]}`:                   `must be a repository, owner/name`,
		`{"runId":"1","pool":"linux","repositories":["acme/app"]}`: "only with preflight",
		`{"preflight":true,"repositories":["acme/a","acme/\n"]}`:   `must be a repository, owner/name`,
	} {
		_, err := ParsePayload([]byte(payload))
		var ie *fielderr.Error
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), "repositories") || !strings.Contains(err.Error(), rule) {
			t.Errorf("%s: got %v, want an input error naming repositories and saying %q", payload, err, rule)
		}
	}
	many := `{"preflight":true,"repositories":["acme/r"` + strings.Repeat(`,"acme/r"`, MaxPreflightRepositories) + `]}`
	if _, err := ParsePayload([]byte(many)); err == nil || !strings.Contains(err.Error(), "repositories: at most 100") {
		t.Errorf("%d repositories: %v", MaxPreflightRepositories+1, err)
	}
}

// waitSeconds, the bound of a call asked again for a run under way, stays
// well below the idle time after which NAT gateways drop a connection.
func TestWaitSecondsMustBeOneToThreeHundred(t *testing.T) {
	for _, w := range []string{"0", "-1", "301", "86400"} {
		_, err := ParsePayload([]byte(`{"runId":"a","pool":"p","waitSeconds":` + w + `}`))
		if err == nil || !strings.Contains(err.Error(), "waitSeconds: must be 1 to 300, got "+w) {
			t.Errorf("waitSeconds %s: %v", w, err)
		}
	}
}
