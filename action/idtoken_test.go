package action_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// invoke.sh asks the Actions runtime (the fake GitHub's stand-in) for the
// job's token with the deployment's audience and sends it as idToken; the
// token shows in the log only in the ::add-mask:: command that hides it.
func TestInvokeSendsTheJobsOIDCTokenAndNeverPrintsIt(t *testing.T) {
	gh := fakegithub.New("acme")
	defer gh.Close()
	url, requestToken := gh.IDTokenRequest(fakegithub.Workflow{Repository: "acme/app", RunID: "42", RunAttempt: 2})
	env := []string{"GITHUB_ACTIONS=true", "ACTIONS_ID_TOKEN_REQUEST_URL=" + url, "ACTIONS_ID_TOKEN_REQUEST_TOKEN=" + requestToken, "GHRUNNER_AUDIENCE=ci-runners"}
	r := invokeEnv(t, "ok", env, "ci-provision", `{"runId":"42","pool":"linux"}`)
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	var sent struct{ RunID, Pool, IDToken string }
	if err := json.Unmarshal([]byte(r.payload), &sent); err != nil || sent.IDToken == "" || sent.RunID != "42" || sent.Pool != "linux" {
		t.Fatalf("payload sent %q (%v), want the given one with idToken", r.payload, err)
	}
	v, err := idtoken.New(gh.Issuer(), "ci-runners", idtoken.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.Verify(context.Background(), sent.IDToken)
	if err != nil || id.Repository != "acme/app" || id.RunID != "42" || id.RunAttempt != "2" {
		t.Fatalf("the token sent: %+v, %v", id, err)
	}
	for _, line := range strings.Split(r.out, "\n") {
		if strings.Contains(line, sent.IDToken[len(sent.IDToken)-24:]) && line != "::add-mask::"+sent.IDToken {
			t.Errorf("the token is printed: %.60s…", line)
		}
		if strings.Contains(line, requestToken) {
			t.Errorf("the request token is printed: %.60s…", line)
		}
	}
	if !strings.Contains(r.out, "::add-mask::"+sent.IDToken) {
		t.Errorf("the token is not masked:\n%s", r.out)
	}
}

func TestInvokeWithoutIDTokenPermissionFailsTheStepSaying(t *testing.T) {
	r := invokeEnv(t, "ok", []string{"GITHUB_ACTIONS=true", "ACTIONS_ID_TOKEN_REQUEST_URL=", "ACTIONS_ID_TOKEN_REQUEST_TOKEN="}, "ci-release", `{"runId":"42"}`)
	if r.code != 1 || !strings.Contains(r.out, "::error title=ghrunner ci-release::no OIDC token for this job: give the job that invokes ghrunner permissions: id-token: write") {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	if r.args != "" {
		t.Errorf("the function was called anyway: %s", r.args)
	}
}

func TestInvokeOutsideActionsSendsThePayloadAsGiven(t *testing.T) {
	// Its token as given; a provision payload gets waitSeconds all the same.
	payload := `{"runId":"42","pool":"linux","idToken":"given"}`
	if r := invokeEnv(t, "ok", []string{"GITHUB_ACTIONS=", "ACTIONS_ID_TOKEN_REQUEST_URL="}, "ci-provision", payload); r.code != 0 ||
		r.payload != `{"runId":"42","pool":"linux","idToken":"given","waitSeconds":60}` {
		t.Fatalf("exit %d, payload %q:\n%s", r.code, r.payload, r.out)
	}
	if r := invokeEnv(t, "ok", []string{"GITHUB_ACTIONS=", "ACTIONS_ID_TOKEN_REQUEST_URL="}, "ci-refresh", `{}`); r.code != 0 || r.payload != `{}` {
		t.Fatalf("exit %d, payload %q:\n%s", r.code, r.payload, r.out)
	}
}
