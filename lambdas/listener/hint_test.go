package listener

import (
	"errors"
	"strings"
	"testing"
)

func TestWithHint(t *testing.T) {
	refused := errors.New(`runner group "default" of pool linux: failed to create new actions service request: failed to issue update token if needed: failed to get runner registration token on refresh: request POST https://api.github.com/orgs/acme/actions/runners/registration-token failed(status="403 Forbidden"): failed to get runner registration token (403 Forbidden): : Resource not accessible by integration`)
	cases := []struct {
		name, owner string
		err         error
		want        string // "": err unchanged
	}{
		{"an organization's token refused names its permission", "acme", refused, "organization_self_hosted_runners: write"},
		{"a repository's token refused names administration", "acme/api", refused, "administration: write"},
		{"another 403 is left as it is", "acme", errors.New(`request GET https://x/_apis/runtime/runnerscalesets failed(status="403 Forbidden")`), ""},
		{"a registration token refused for another reason is left as it is", "acme", errors.New("failed to get runner registration token (404 Not Found)"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := withHint(c.err, c.owner)
			if !errors.Is(got, c.err) {
				t.Fatalf("the hint lost the error: %v", got)
			}
			if c.want == "" {
				if got != c.err {
					t.Errorf("withHint changed an error it has no hint for: %v", got)
				}
				return
			}
			if !strings.Contains(got.Error(), c.want) || !strings.Contains(got.Error(), c.owner+":") {
				t.Errorf("withHint(%s) = %v, want it to name %q and the owner", c.owner, got, c.want)
			}
		})
	}
}
