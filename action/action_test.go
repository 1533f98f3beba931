package action_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/actionrun"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

const role = "arn:aws:iam::123456789012:role/ci-invoker"

// provisioned is provision's answer for two runners of run 42's second attempt.
const provisioned = `{"runId":"42-2","label":"ghr-42-2-abcdefghijklmnop","pool":"linux","status":"ready","instances":[{"instanceId":"i-1"},{"instanceId":"i-2"}]}`

// job is a workflow job of acme/app's run 42, attempt 2, with id-token:
// write (token service of the fake GitHub), on a runner with the real AWS
// CLI pointed at the stand-in AWS. It has static AWS credentials too, which
// the action must not use when it assumes the role.
type job struct {
	gh           *fakegithub.Server
	aws          *actionrun.AWS
	env          []string
	temp         string
	requestToken string
}

func newJob(t testing.TB, idTokenWrite bool) *job {
	t.Helper()
	if _, err := exec.LookPath("aws"); err != nil {
		t.Fatal("the AWS CLI is not on PATH: run make tools (scripts/ensure-awscli installs it)")
	}
	j := &job{gh: fakegithub.New("acme"), aws: actionrun.NewAWS(), temp: t.TempDir()}
	t.Cleanup(j.gh.Close)
	t.Cleanup(j.aws.Close)
	j.aws.Function = func(string, []byte) (string, string) { return provisioned, "" }
	url := ""
	if idTokenWrite {
		url, j.requestToken = j.gh.IDTokenRequest(fakegithub.Workflow{Repository: "acme/app", RunID: "42", RunAttempt: 2})
	}
	j.env = actionrun.JobEnv(j.aws, j.temp, "42", 2, url, j.requestToken)
	return j
}

// claims reads a JWT's claims without verifying it (the stand-in STS does
// not verify either; AWS does, against the role's trust policy).
func claims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %.20q", token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// The action as users reference it: no checkout, no other action. The AWS
// CLI assumes the invoker role with the job's token for sts.amazonaws.com
// (from a file the action wrote), calls provision signed as that role, the
// payload carries the job's token for ghrunner's audience, and the outputs
// are the label and the number of runners. No token is printed, and none
// is left on the runner.
func TestTheActionAssumesTheInvokerRoleWithTheJobsTokenAndCallsTheFunction(t *testing.T) {
	t.Parallel()
	j := newJob(t, true)
	r := actionrun.Run(t, ".", map[string]string{"function-name": "ci-provision", "role-to-assume": role, "region": "eu-west-1",
		"payload": `{"runId":"42-2","pool":"linux","instanceCount":2}`}, j.env)
	if r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Log)
	}
	if r.Outputs["label"] != "ghr-42-2-abcdefghijklmnop" || r.Outputs["runners"] != "2" || r.Outputs["response"] != provisioned {
		t.Errorf("outputs %v", r.Outputs)
	}
	assumed, invokes := j.aws.Assumed(), j.aws.Invokes()
	if len(assumed) != 1 || len(invokes) != 1 {
		t.Fatalf("%d role assumptions and %d invokes (%+v), want one each:\n%s", len(assumed), len(invokes), invokes, r.Log)
	}
	a, in := assumed[0], invokes[0]
	if a.RoleArn != role || a.RoleSessionName != "ghrunner-42-2" {
		t.Errorf("assumed %s as %s", a.RoleArn, a.RoleSessionName)
	}
	if c := claims(t, a.WebIdentityToken); c["aud"] != "sts.amazonaws.com" || c["run_id"] != "42" || c["repository"] != "acme/app" {
		t.Errorf("the role was assumed with a token of %v, want run 42 of acme/app for sts.amazonaws.com", c)
	}
	if in.Function != "ci-provision" || in.AccessKeyID != a.AccessKeyID || in.Session != "session-"+a.AccessKeyID {
		t.Errorf("invoke of %s signed by %s (session %q), want the assumed role's %s, not the job's static key",
			in.Function, in.AccessKeyID, in.Session, a.AccessKeyID)
	}
	var sent struct{ RunID, Pool, IDToken string }
	if err := json.Unmarshal(in.Payload, &sent); err != nil || sent.RunID != "42-2" || sent.Pool != "linux" {
		t.Fatalf("payload %s (%v)", in.Payload, err)
	}
	v, err := idtoken.New(j.gh.Issuer(), "ghrunner", idtoken.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := v.Verify(context.Background(), sent.IDToken); err != nil || id.RunID != "42" || id.RunAttempt != "2" {
		t.Errorf("idToken: %+v, %v", id, err)
	}
	for _, secret := range []string{a.WebIdentityToken, sent.IDToken} {
		for line := range strings.Lines(r.Log) {
			if strings.Contains(line, secret[len(secret)-24:]) && strings.TrimSpace(line) != "::add-mask::"+secret {
				t.Errorf("a token is printed: %.60s…", line)
			}
		}
		if !strings.Contains(r.Log, "::add-mask::"+secret) {
			t.Errorf("a token is not masked")
		}
	}
	if strings.Contains(r.Log, j.requestToken) {
		t.Error("the request token is printed")
	}
	if left, _ := os.ReadDir(j.temp); len(left) != 0 {
		t.Errorf("RUNNER_TEMP holds %v after the step: the token files must go", left)
	}
}

// Lambda's 429 is waited out, and the job's token is asked for again for
// each call: a call sent minutes later must not carry an expired token.
func TestTheActionAsksForAFreshRoleTokenWhenItSendsAThrottledCallAgain(t *testing.T) {
	t.Parallel()
	j := newJob(t, true)
	j.aws.Throttle = 1
	r := actionrun.Run(t, ".", map[string]string{"function-name": "ci-release", "role-to-assume": role, "region": "eu-west-1", "payload": `{"runId":"42-2"}`}, j.env)
	if r.Code != 0 || !strings.Contains(r.Log, "sending it again in 2s") {
		t.Fatalf("exit %d:\n%s", r.Code, r.Log)
	}
	assumed, invokes := j.aws.Assumed(), j.aws.Invokes()
	if len(assumed) != 2 || len(invokes) != 2 || assumed[0].WebIdentityToken == assumed[1].WebIdentityToken {
		t.Fatalf("%d assumptions, %d invokes: want one fresh token and role per call", len(assumed), len(invokes))
	}
	if invokes[1].AccessKeyID != assumed[1].AccessKeyID {
		t.Errorf("the second call was signed by %s, want the second assumption's %s", invokes[1].AccessKeyID, assumed[1].AccessKeyID)
	}
}

// Without role-to-assume the action uses the credentials the job has (a
// runner with an instance role, or an earlier step's), as before.
func TestTheActionWithoutARoleUsesTheJobsCredentials(t *testing.T) {
	t.Parallel()
	j := newJob(t, true)
	r := actionrun.Run(t, ".", map[string]string{"function-name": "ci-release", "region": "eu-west-1", "payload": `{"runId":"42-2"}`}, j.env)
	if r.Code != 0 {
		t.Fatalf("exit %d:\n%s", r.Code, r.Log)
	}
	if in := j.aws.Invokes(); len(j.aws.Assumed()) != 0 || len(in) != 1 || in[0].AccessKeyID != "AKIASTATIC" {
		t.Fatalf("assumed %v, invokes %+v: want one call with the job's key", j.aws.Assumed(), in)
	}
}

// A job without id-token: write (a pull request from a fork gets none)
// fails before any call, saying what to give the job.
func TestTheActionWithoutAnIDTokenFailsSayingWhatTheJobNeeds(t *testing.T) {
	t.Parallel()
	j := newJob(t, false)
	r := actionrun.Run(t, ".", map[string]string{"function-name": "ci-provision", "role-to-assume": role, "payload": `{}`}, j.env)
	if r.Code != 1 || !strings.Contains(r.Log, "::error title=ghrunner ci-provision::no OIDC token for this job: give the job that invokes ghrunner permissions: id-token: write") {
		t.Fatalf("exit %d:\n%s", r.Code, r.Log)
	}
	if len(j.aws.Assumed())+len(j.aws.Invokes()) != 0 {
		t.Error("the action called AWS anyway")
	}
}

// Inputs reach the script through the environment, never pasted into the
// script text, so a payload with quotes cannot change the command.
func TestTheActionPassesInputsThroughTheEnvironment(t *testing.T) {
	t.Parallel()
	a := actionrun.Read(t, ".")
	if len(a.Runs.Steps) != 1 || !a.Inputs["function-name"].Required || a.Inputs["role-audience"].Default != "sts.amazonaws.com" ||
		a.Inputs["audience"].Default != idtoken.DefaultAudience {
		t.Fatalf("action: %+v", a)
	}
	step := a.Runs.Steps[0]
	if !strings.Contains(step.Run, `"$GITHUB_ACTION_PATH/invoke.sh" "$FUNCTION_NAME" "$PAYLOAD"`) || strings.Contains(step.Run, "${{") {
		t.Errorf("step run: %q", step.Run)
	}
	for name := range a.Inputs {
		found := false
		for _, v := range step.Env {
			found = found || v == "${{ inputs."+name+" }}"
		}
		if !found {
			t.Errorf("input %s does not reach the script", name)
		}
	}
}

// A provision still under way is asked again (issue 37, item 4), each call
// with a fresh job token for its payload and for the role: GitHub's tokens
// live minutes, the calls of one provision may go on for longer. The
// function takes each token once, for the same operation of the same run.
func TestTheActionAsksAgainWithFreshTokensWhileTheRunIsStillProvisioning(t *testing.T) {
	t.Parallel()
	j := newJob(t, true)
	calls := 0
	j.aws.Function = func(string, []byte) (string, string) {
		if calls++; calls == 1 {
			return `{"runId":"42-2","label":"ghr-42-2-abcdefghijklmnop","pool":"linux","status":"provisioning","instances":[],"elapsedSeconds":61.2,"progress":"0 of 2 runners: waiting for the pool's capacity or a launch"}`, ""
		}
		return provisioned, ""
	}
	r := actionrun.Run(t, ".", map[string]string{"function-name": "ci-provision", "role-to-assume": role, "region": "eu-west-1",
		"payload": `{"runId":"42-2","pool":"linux","instanceCount":2}`}, j.env)
	if r.Code != 0 || r.Outputs["runners"] != "2" || !strings.Contains(r.Log, "still provisioning after 61s: 0 of 2 runners: waiting for the pool's capacity or a launch; asking again") {
		t.Fatalf("exit %d, outputs %v:\n%s", r.Code, r.Outputs, r.Log)
	}
	assumed, invokes := j.aws.Assumed(), j.aws.Invokes()
	if len(assumed) != 2 || len(invokes) != 2 || assumed[0].WebIdentityToken == assumed[1].WebIdentityToken {
		t.Fatalf("%d assumptions, %d invokes: want a fresh role token per call", len(assumed), len(invokes))
	}
	var jtis []any
	for _, in := range invokes {
		var sent struct{ IDToken string }
		if err := json.Unmarshal(in.Payload, &sent); err != nil {
			t.Fatal(err)
		}
		jtis = append(jtis, claims(t, sent.IDToken)["jti"])
	}
	if jtis[0] == nil || jtis[0] == jtis[1] {
		t.Errorf("the calls' idTokens have jti %v: want a fresh token per call", jtis)
	}
}
