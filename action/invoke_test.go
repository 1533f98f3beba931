// invoke.sh, the action's script, against a stand-in for the AWS CLI that
// answers as `aws lambda invoke` does (success, a function error, a failed
// call). action_test.go runs the action itself with the real AWS CLI.
package action_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// fakeAWS answers `aws lambda invoke` as the AWS CLI does: the invoke
// metadata on stdout, the function's payload in the response file. It keeps
// the arguments and the payload it was given.
const fakeAWS = `#!/usr/bin/env bash
set -eu
printf '%s\n' "$@" > "$FAKE_DIR/args"
echo "${AWS_MAX_ATTEMPTS:-unset}" > "$FAKE_DIR/attempts"
echo "${AWS_DEFAULT_REGION:-unset}" > "$FAKE_DIR/region"
out="${!#}"
for a in "$@"; do
  case $a in fileb://*) cp "${a#fileb://}" "$FAKE_DIR/payload" ;; esac
done
case $FAKE_MODE in
  ok)
    printf '{"runId":"42","label":"ghr-42-abcdefghijklmnop","status":"ready","instances":[{"instanceId":"i-1"}]}' > "$out"
    printf '{\n    "StatusCode": 200,\n    "ExecutedVersion": "$LATEST"\n}\n' ;;
  function-error)
    printf '{"errorMessage":"instanceCount: must be 1 to 10, got 50\\n(100%% of the pool)","errorType":"error"}' > "$out"
    printf '{\n    "StatusCode": 200,\n    "FunctionError": "Unhandled",\n    "ExecutedVersion": "$LATEST"\n}\n' ;;
  error-body)
    printf '{"errorMessage":"pool: no pool \\"gpu\\" in this deployment"}' > "$out"
    printf '{\n    "StatusCode": 200\n}\n' ;;
  no-stdout)
    printf '{"runId":"42","released":[],"expired":[]}' > "$out" ;;
  not-json)
    printf 'Internal Server Error' > "$out"
    printf '{"StatusCode": 200}' ;;
  cli-error)
    echo "An error occurred (AccessDeniedException) when calling the Invoke operation: not allowed" >&2
    exit 254 ;;
  waiting-*|lost-*)
    # The first N calls answer that the run is still being provisioned, or
    # lose their connection (the CLI's wording of a reset), then the run is
    # ready. Each call's payload is kept.
    n=$(( $(cat "$FAKE_DIR/calls" 2>/dev/null || echo 0) + 1 ))
    echo "$n" > "$FAKE_DIR/calls"
    cp "$FAKE_DIR/payload" "$FAKE_DIR/payload-$n"
    if [ "$n" -le "${FAKE_MODE#*-}" ]; then
      case $FAKE_MODE in
        waiting-*)
          printf '{"runId":"42","label":"ghr-42-abcdefghijklmnop","status":"provisioning","instances":[],"elapsedSeconds":%d.4,"progress":"%d of 2 runners ready, 2 instances given to the run"}' "$((n * 60))" "$((n - 1))" > "$out"
          printf '{\n    "StatusCode": 200\n}\n'
          exit 0 ;;
        lost-*)
          echo "Connection was closed before we received a valid response from endpoint URL: \"https://lambda.eu-west-1.amazonaws.com/2015-03-31/functions/ci-provision/invocations\"." >&2
          exit 255 ;;
      esac
    fi
    printf '{"runId":"42","label":"ghr-42-abcdefghijklmnop","status":"ready","instances":[{"instanceId":"i-1"},{"instanceId":"i-2"}]}' > "$out"
    printf '{\n    "StatusCode": 200\n}\n' ;;
  throttled-*)
    # Lambda's 429 before the function runs, for the first N calls (the AWS
    # CLI v2's wording), then the function's answer.
    n=$(( $(cat "$FAKE_DIR/calls" 2>/dev/null || echo 0) + 1 ))
    echo "$n" > "$FAKE_DIR/calls"
    if [ "$n" -le "${FAKE_MODE#throttled-}" ]; then
      echo "An error occurred (TooManyRequestsException) when calling the Invoke operation (reached max retries: 0): Rate Exceeded." >&2
      exit 254
    fi
    printf '{"runId":"42","label":"ghr-42-abcdefghijklmnop","status":"ready","instances":[{"instanceId":"i-1"}]}' > "$out"
    printf '{\n    "StatusCode": 200\n}\n' ;;
esac
`

// fakeSleep stands in for sleep: it notes how long it was asked to wait.
const fakeSleep = `#!/usr/bin/env bash
echo "$1" >> "$FAKE_DIR/sleeps"
`

type run struct {
	dir                                          string
	out, output, payload, args, attempts, region string
	code                                         int
	sleeps                                       []string // what invoke.sh waited, in seconds
}

func invoke(t *testing.T, mode string, args ...string) run {
	return invokeEnv(t, mode, nil, args...)
}

// invokeEnv runs invoke.sh with the stand-in aws first on PATH, without the
// caller's AWS endpoint and retry settings nor its Actions runtime (these
// tests may run in a GitHub Actions job), plus env.
func invokeEnv(t *testing.T, mode string, env []string, args ...string) run {
	t.Helper()
	return invokeScript(t, "./invoke.sh", mode, env, args...)
}

// invokeScript is invokeEnv for the invoke.sh at script; one given by an
// absolute path runs in a directory of its own, as a step runs in the
// job's workspace, not beside the action.
func invokeScript(t *testing.T, script, mode string, env []string, args ...string) run {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "aws"), []byte(fakeAWS), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "sleep"), []byte(fakeSleep), 0o755); err != nil {
		t.Fatal(err)
	}
	output := filepath.Join(dir, "github_output")
	cmd := exec.Command(script, args...)
	if filepath.IsAbs(script) {
		cmd.Dir = dir
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_ENDPOINT_URL") && !strings.HasPrefix(kv, "AWS_MAX_ATTEMPTS=") &&
			!strings.HasPrefix(kv, "AWS_REGION=") && !strings.HasPrefix(kv, "AWS_DEFAULT_REGION=") &&
			!strings.HasPrefix(kv, "GITHUB_ACTIONS=") && !strings.HasPrefix(kv, "ACTIONS_ID_TOKEN_REQUEST_") && !strings.HasPrefix(kv, "GHRUNNER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_DIR="+dir, "FAKE_MODE="+mode, "GITHUB_OUTPUT="+output)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	r := run{out: string(out), dir: dir}
	if exit, ok := err.(*exec.ExitError); ok {
		r.code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string { b, _ := os.ReadFile(filepath.Join(dir, name)); return string(b) }
	r.output, r.payload, r.args, r.attempts = read("github_output"), read("payload"), read("args"), strings.TrimSpace(read("attempts"))
	r.region = strings.TrimSpace(read("region"))
	r.sleeps = strings.Fields(read("sleeps"))
	return r
}

func TestInvokeSucceeds(t *testing.T) {
	payload := `{"runId":"42","pool":"linux","instanceCount":2}`
	r := invoke(t, "ok", "ci-provision", payload)
	if r.code != 0 || !strings.Contains(r.out, `"status":"ready"`) {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	if want := `{"runId":"42","pool":"linux","instanceCount":2,"waitSeconds":60}`; r.payload != want {
		t.Errorf("the CLI got payload %q, want %q", r.payload, want)
	}
	// No connection waits for minutes (a provision payload says
	// waitSeconds), and the CLI sends no second call behind the script's
	// back.
	if !strings.Contains(r.args, "--function-name\nci-provision\n") || !strings.Contains(r.args, "--cli-read-timeout\n90\n") ||
		strings.Contains(r.args, "cli-binary-format") || strings.Contains(r.args, "--endpoint-url") {
		t.Errorf("arguments:\n%s", r.args)
	}
	if r.attempts != "1" {
		t.Errorf("AWS_MAX_ATTEMPTS %q, want 1", r.attempts)
	}
	if r.output != `response={"runId":"42","label":"ghr-42-abcdefghijklmnop","status":"ready","instances":[{"instanceId":"i-1"}]}`+"\n"+
		"label=ghr-42-abcdefghijklmnop\nrunners=1\n" {
		t.Errorf("GITHUB_OUTPUT: %q", r.output)
	}
	// A payload without a pool (release, preflight) goes as given.
	for _, payload := range []string{`{"runId":"42"}`, `{"preflight":true}`} {
		if r = invoke(t, "ok", "ci-release", payload); r.payload != payload {
			t.Errorf("the CLI got payload %q, want %q", r.payload, payload)
		}
	}
}

func TestInvokeFunctionErrorFailsTheStep(t *testing.T) {
	r := invoke(t, "function-error", "ci-provision", `{"runId":"42","pool":"linux","instanceCount":50}`)
	want := "::error title=ghrunner ci-provision::instanceCount: must be 1 to 10, got 50%0A(100%25 of the pool)"
	if r.code != 1 || !strings.Contains(r.out, want) {
		t.Fatalf("exit %d, want 1 and %q in:\n%s", r.code, want, r.out)
	}
	if r.output != "" {
		t.Errorf("a failed call wrote an output: %q", r.output)
	}
}

func TestInvokeErrorMessageFailsTheStep(t *testing.T) {
	// An errorMessage in the response fails the step even when the CLI did
	// not report a FunctionError (older emulators).
	r := invoke(t, "error-body", "ci-provision", `{"runId":"42","pool":"gpu"}`)
	want := `::error title=ghrunner ci-provision::pool: no pool "gpu" in this deployment`
	if r.code != 1 || !strings.Contains(r.out, want) || r.output != "" {
		t.Fatalf("exit %d, output %q, want 1 and %q in:\n%s", r.code, r.output, want, r.out)
	}
}

func TestInvokeNotJSONFailsTheStep(t *testing.T) {
	r := invoke(t, "not-json", "ci-release", `{"runId":"42"}`)
	if r.code != 1 || !strings.Contains(r.out, "::error title=ghrunner ci-release::the response is not JSON: Internal Server Error") {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
}

func TestInvokeWithoutInvokeOutput(t *testing.T) {
	r := invoke(t, "no-stdout", "ci-release", `{"runId":"42"}`)
	if r.code != 0 || r.output != `response={"runId":"42","released":[],"expired":[]}`+"\n" {
		t.Fatalf("exit %d, output %q:\n%s", r.code, r.output, r.out)
	}
}

func TestInvokeARNTitleEscaped(t *testing.T) {
	arn := "arn:aws:lambda:eu-west-1:123456789012:function:ci-provision"
	r := invoke(t, "function-error", arn, `{"runId":"42"}`)
	want := "::error title=ghrunner arn%3Aaws%3Alambda%3Aeu-west-1%3A123456789012%3Afunction%3Aci-provision::instanceCount"
	if r.code != 1 || !strings.Contains(r.out, want) {
		t.Fatalf("exit %d, want %q in:\n%s", r.code, want, r.out)
	}
}

func TestInvokeEndpointAndAttempts(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      []string
		endpoint string
		attempts string
	}{
		{"AWS_ENDPOINT_URL", []string{"AWS_ENDPOINT_URL=http://127.0.0.1:5000"}, "http://127.0.0.1:5000", "1"},
		{"the Lambda one wins", []string{"AWS_ENDPOINT_URL=http://127.0.0.1:5000", "AWS_ENDPOINT_URL_LAMBDA=http://127.0.0.1:9001"}, "http://127.0.0.1:9001", "1"},
		{"AWS_MAX_ATTEMPTS kept", []string{"AWS_ENDPOINT_URL=http://127.0.0.1:5000", "AWS_MAX_ATTEMPTS=3"}, "http://127.0.0.1:5000", "3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := invokeEnv(t, "ok", c.env, "ci-provision", `{"runId":"42"}`)
			if r.code != 0 || !strings.Contains(r.args, "--endpoint-url\n"+c.endpoint+"\n") || r.attempts != c.attempts {
				t.Fatalf("exit %d, AWS_MAX_ATTEMPTS %q, arguments:\n%s\n%s", r.code, r.attempts, r.args, r.out)
			}
		})
	}
}

func TestInvokeRegionForCLIv1(t *testing.T) {
	// AWS CLI v1 reads AWS_DEFAULT_REGION only.
	if r := invokeEnv(t, "ok", []string{"AWS_REGION=eu-west-1"}, "ci-release", "{}"); r.code != 0 || r.region != "eu-west-1" {
		t.Errorf("exit %d, AWS_DEFAULT_REGION %q", r.code, r.region)
	}
	if r := invokeEnv(t, "ok", []string{"AWS_REGION=eu-west-1", "AWS_DEFAULT_REGION=us-east-2"}, "ci-release", "{}"); r.region != "us-east-2" {
		t.Errorf("AWS_DEFAULT_REGION %q, want the caller's us-east-2 kept", r.region)
	}
}

func TestInvokeCLIErrorFailsTheStep(t *testing.T) {
	r := invoke(t, "cli-error", "ci-release", `{"runId":"42"}`)
	if r.code != 1 || !strings.Contains(r.out, "::error title=ghrunner ci-release::aws lambda invoke failed: An error occurred (AccessDeniedException) when calling the Invoke operation: not allowed\n") {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
}

func TestInvokeUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"--help"}, {"a", "b", "c"}} {
		if r := invoke(t, "ok", args...); r.code != 2 || !strings.Contains(r.out, "usage: invoke.sh FUNCTION") {
			t.Errorf("%q: exit %d\n%s", args, r.code, r.out)
		}
	}
}

func TestInvokeShellcheck(t *testing.T) {
	if _, err := exec.LookPath("shellcheck"); err != nil {
		t.Fatal("shellcheck not found: run make tools (scripts/ensure-shellcheck installs it)")
	}
	if out, err := exec.Command("shellcheck", "invoke.sh").CombinedOutput(); err != nil {
		t.Fatalf("shellcheck invoke.sh: %v\n%s", err, out)
	}
}

// Issue 30, item 7: Lambda answers 429 before the function runs when the
// account's or the function's concurrency is used up (new accounts may have
// little). Provision and release are idempotent per run, so invoke.sh sends
// the call again with backoff instead of failing the workflow; the CLI
// itself still sends each call once (AWS_MAX_ATTEMPTS=1). Past
// GHRUNNER_THROTTLE_WAIT it gives up with Lambda's message; any other CLI
// error fails at once. (With the retry removed, the first case exits 1.)
func TestInvokeWaitsOutLambdaThrottling(t *testing.T) {
	r := invokeEnv(t, "throttled-2", nil, "ci-provision", `{"runId":"42"}`)
	if r.code != 0 || strings.Join(r.sleeps, ",") != "2,4" || r.attempts != "1" || !strings.Contains(r.output, `"label":"ghr-42-abcdefghijklmnop"`) {
		t.Fatalf("throttled twice: exit %d, waits %v, AWS_MAX_ATTEMPTS %s\n%s", r.code, r.sleeps, r.attempts, r.out)
	}
	r = invokeEnv(t, "throttled-99", []string{"GHRUNNER_THROTTLE_WAIT=20"}, "ci-provision", `{"runId":"42"}`)
	if r.code != 1 || strings.Join(r.sleeps, ",") != "2,4,8,16" || !strings.Contains(r.out, "TooManyRequestsException") {
		t.Fatalf("throttled for good: exit %d, waits %v\n%s", r.code, r.sleeps, r.out)
	}
	if r := invoke(t, "cli-error", "ci-release", `{"runId":"42"}`); r.code != 1 || len(r.sleeps) != 0 {
		t.Fatalf("another CLI error: exit %d, waits %v: it must fail at once", r.code, r.sleeps)
	}
}

// Issue 37, item 4: a provision waiting for capacity or a slow boot held
// one connection idle for minutes; NAT gateways drop such a connection
// and the job hung. A provision payload goes with waitSeconds, a call for
// a run under way answers status provisioning within it, and invoke.sh
// asks again with the same payload, printing how far the run got, until
// the run is ready; the outputs are the final answer's.
func TestInvokeAsksAgainWhileTheRunIsStillProvisioning(t *testing.T) {
	r := invokeEnv(t, "waiting-2", []string{"GHRUNNER_WAIT_SECONDS=20"}, "ci-provision", `{"runId":"42","pool":"linux","instanceCount":2}`)
	if r.code != 0 || !strings.Contains(r.output, "runners=2\n") || strings.Contains(r.output, "provisioning") {
		t.Fatalf("exit %d, GITHUB_OUTPUT %q:\n%s", r.code, r.output, r.out)
	}
	for _, want := range []string{
		"still provisioning after 60s: 0 of 2 runners ready, 2 instances given to the run; asking again",
		"run 42 (label ghr-42-abcdefghijklmnop) still provisioning after 120s: 1 of 2 runners ready",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("no progress line %q in:\n%s", want, r.out)
		}
	}
	if !strings.Contains(r.args, "--cli-read-timeout\n50\n") || len(r.sleeps) != 0 {
		t.Errorf("read timeout: want 50 s (waitSeconds + 30), no sleep; waits %v, arguments:\n%s", r.sleeps, r.args)
	}
	for n := 1; n <= 3; n++ {
		b, _ := os.ReadFile(filepath.Join(r.dir, "payload-"+strconv.Itoa(n)))
		if string(b) != `{"runId":"42","pool":"linux","instanceCount":2,"waitSeconds":20}` {
			t.Errorf("call %d sent %s, want the same payload each time", n, b)
		}
	}
	r = invokeEnv(t, "waiting-99", []string{"GHRUNNER_WAIT_LIMIT=0"}, "ci-provision", `{"runId":"42","pool":"linux"}`)
	if r.code != 1 || !regexp.MustCompile(`still provisioning after 60s: 0 of 2 runners ready, 2 instances given to the run; gave up after \d+s \(GHRUNNER_WAIT_LIMIT\)`).MatchString(r.out) {
		t.Fatalf("past GHRUNNER_WAIT_LIMIT: exit %d\n%s", r.code, r.out)
	}
}

// A call whose connection was reset, or that got no answer within its
// read timeout (a NAT gateway drops an idle connection silently), is asked
// again: the invocation runs on in Lambda, and the next call joins it.
// Any other CLI error still fails at once (TestInvokeCLIErrorFailsTheStep).
func TestInvokeAsksAgainWhenTheConnectionIsLost(t *testing.T) {
	r := invoke(t, "lost-2", "ci-provision", `{"runId":"42","pool":"linux"}`)
	if r.code != 0 || !strings.Contains(r.output, "runners=2\n") ||
		strings.Count(r.out, "the call's connection was lost or gave no answer within 90s; asking again (Connection was closed before") != 2 {
		t.Fatalf("exit %d, GITHUB_OUTPUT %q:\n%s", r.code, r.output, r.out)
	}
	if r = invokeEnv(t, "lost-99", []string{"GHRUNNER_WAIT_LIMIT=0"}, "ci-provision", `{"runId":"42","pool":"linux"}`); r.code != 1 ||
		!strings.Contains(r.out, "::error title=ghrunner ci-provision::aws lambda invoke failed: Connection was closed before") {
		t.Fatalf("past GHRUNNER_WAIT_LIMIT: exit %d\n%s", r.code, r.out)
	}
}

// A payload's own waitSeconds is kept, and bounds the read timeout: a
// call must never be given up on before the function answers it.
func TestInvokeKeepsThePayloadsWaitSecondsAndWaitsLongerForEachCall(t *testing.T) {
	payload := `{"runId":"42","pool":"linux","waitSeconds":120}`
	r := invoke(t, "ok", "ci-provision", payload)
	if r.code != 0 || r.payload != payload || !strings.Contains(r.args, "--cli-read-timeout\n150\n") {
		t.Fatalf("exit %d, payload %s, arguments:\n%s\n%s", r.code, r.payload, r.args, r.out)
	}
	if r := invokeEnv(t, "ok", []string{"GHRUNNER_WAIT_SECONDS=soon"}, "ci-provision", payload); r.code != 1 || !strings.Contains(r.out, "GHRUNNER_WAIT_SECONDS must be a number of seconds (1 to 300), got soon") {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
}

// Vendored as the guide does it (docs/getting-started.md: the action's
// three files copied into .github/actions/ghrunner), the action works
// from wherever the step runs: invoke.sh finds invoke.py beside itself,
// not in the working directory. Without invoke.py it fails saying so,
// before it calls anything.
func TestTheVendoredActionRunsFromItsOwnFolder(t *testing.T) {
	vendored := filepath.Join(t.TempDir(), ".github", "actions", "ghrunner")
	if err := os.MkdirAll(vendored, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"action.yml", "invoke.sh", "invoke.py"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(vendored, f), raw, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(vendored, "invoke.sh")
	r := invokeScript(t, script, "ok", nil, "ci-provision", `{"pool":"linux","instanceCount":2}`)
	if r.code != 0 || !strings.Contains(r.output, "label=ghr-42-abcdefghijklmnop\n") || !strings.Contains(r.payload, `"waitSeconds":60`) {
		t.Fatalf("the vendored action: exit %d, outputs %q, payload %q\n%s", r.code, r.output, r.payload, r.out)
	}
	if err := os.Remove(filepath.Join(vendored, "invoke.py")); err != nil {
		t.Fatal(err)
	}
	r = invokeScript(t, script, "ok", nil, "ci-provision", `{"pool":"linux"}`)
	if r.code != 1 || !strings.Contains(r.out, "invoke.py is missing beside invoke.sh") || r.args != "" {
		t.Fatalf("without invoke.py: exit %d, aws called with %q\n%s", r.code, r.args, r.out)
	}
}
