package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
)

// guideBlock is a fenced shell block of docs/getting-started.md and the
// mark before it.
type guideBlock struct {
	line   int    // of the opening fence
	mark   string // "run", "run: as a workflow job" or "not run: <why>"
	script string
}

var (
	guideMark  = regexp.MustCompile(`^<!-- (run|run: as a workflow job|not run: .+) -->$`)
	guideFence = regexp.MustCompile("^```(\\S*)")
	// A placeholder the test does not fill: <word ...> in a block it runs.
	guideLeftOver = regexp.MustCompile(`<[a-z][a-z /._-]*>`)
)

// guideBlocks reads the guide's fenced blocks: every sh, bash or shell
// block must follow a mark (<!-- run -->, <!-- run: as a workflow job -->
// or <!-- not run: why -->) on the line before it, blank lines aside; a
// mark before anything but a shell block is an error as well, and so is a
// mark the test does not know.
func guideBlocks(markdown string) ([]guideBlock, []error) {
	lines := strings.Split(markdown, "\n")
	var blocks []guideBlock
	var errs []error
	mark, markLine := "", 0
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " ")
		if m := guideMark.FindStringSubmatch(l); m != nil {
			mark, markLine = m[1], i+1
			continue
		}
		if strings.HasPrefix(l, "<!-- run") || strings.HasPrefix(l, "<!-- not run") {
			errs = append(errs, fmt.Errorf("line %d: a mark the test does not know: %q (want <!-- run -->, <!-- run: as a workflow job --> or <!-- not run: why -->)", i+1, l))
			continue
		}
		f := guideFence.FindStringSubmatch(l)
		if f == nil {
			if l != "" && mark != "" {
				errs = append(errs, fmt.Errorf("line %d: the mark of line %d is not followed by a shell block", i+1, markLine))
				mark = ""
			}
			continue
		}
		start := i
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			body = append(body, lines[i])
		}
		switch f[1] {
		case "sh", "bash", "shell":
			if mark == "" {
				errs = append(errs, fmt.Errorf("line %d: a shell block with no mark: put <!-- run --> before it (the test then runs it) or <!-- not run: why -->", start+1))
			}
			blocks = append(blocks, guideBlock{line: start + 1, mark: mark, script: strings.Join(body, "\n") + "\n"})
		default:
			if mark != "" {
				errs = append(errs, fmt.Errorf("line %d: a %q block marked %q: only shell blocks run", start+1, f[1], mark))
			}
		}
		mark = ""
	}
	return blocks, errs
}

// A shell block without a mark, a mark on another block and an unknown
// mark fail the guide's test: no command of the guide goes untested
// without saying why.
func TestGuideBlocksEachShellBlockIsMarkedRunOrNotRun(t *testing.T) {
	md := "# g\n\n<!-- run -->\n```sh\necho a\n```\n\n<!-- not run: needs github.com -->\n```bash\ngh x\n```\n\n```text\nout\n```\n"
	blocks, errs := guideBlocks(md)
	if len(errs) != 0 || len(blocks) != 2 || blocks[0].mark != "run" || blocks[0].script != "echo a\n" || blocks[1].mark != "not run: needs github.com" {
		t.Fatalf("blocks %+v, errors %v", blocks, errs)
	}
	for bad, want := range map[string]string{
		"```sh\necho unmarked\n```\n":                 "a shell block with no mark",
		"<!-- run -->\n```json\n{}\n```\n":            "only shell blocks run",
		"<!-- runs -->\n```sh\necho\n```\n":           "a mark the test does not know",
		"<!-- run -->\nsome text\n```sh\necho\n```\n": "is not followed by a shell block",
	} {
		_, errs := guideBlocks(bad)
		if len(errs) == 0 || !strings.Contains(fmt.Sprint(errs), want) {
			t.Errorf("%q: errors %v, want %q", bad, errs, want)
		}
	}
}

// Issue 32: docs/getting-started.md's commands, run in order by bash with
// the real AWS CLI against a sandbox, from a folder standing for the user's
// repository. The sandbox deploys examples/sandbox (the runner-pool module
// with every endpoint the sandbox's), not examples/complete: that one's
// provider has no endpoints and its pools want subnets, an image and agent
// endpoints of a real account, so its apply is a block marked not run. The
// functions read the GitHub App's credentials from /ghrunner/github, which
// stays empty until the guide's own put-parameter writes it: preflight
// passing proves they accept what it wrote.
func TestE2E_GettingStartedCommandsRunAgainstTheSandbox(t *testing.T) {
	t.Parallel()
	for _, tool := range []struct{ name, install string }{
		{"aws", "run make tools (scripts/ensure-awscli), or install the AWS CLI (v1: pip install awscli; v2: https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html)"},
		{"python3", "install Python 3 (apt-get install python3)"},
		{"bash", "install bash"},
		{"shellcheck", "run make tools (scripts/ensure-shellcheck), or apt-get install shellcheck"},
	} {
		if _, err := exec.LookPath(tool.name); err != nil {
			t.Fatalf("%s not found on PATH: the guide's commands use it; %s", tool.name, tool.install)
		}
	}
	raw, err := os.ReadFile(filepath.Join(repo, "docs", "getting-started.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, errs := guideBlocks(string(raw))
	for _, err := range errs {
		t.Errorf("docs/getting-started.md: %v", err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}

	// Every shell block, run or not, is bash shellcheck accepts, with the
	// placeholders filled (SC2164, cd without || exit, is a script's
	// concern: at a prompt a failed cd says so).
	sample := strings.NewReplacer("<ghrunner>", repo, "<app id>", "123456", "<private-key.pem>", "app.pem", "<org>", "acme",
		"<owner/name>", "acme/app", "<code>", "0123abcd")
	for _, b := range blocks {
		cmd := exec.Command("shellcheck", "-s", "bash", "-e", "SC2164", "-")
		cmd.Stdin = strings.NewReader(sample.Replace(b.script))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("getting-started.md:%d: shellcheck: %v\n%s", b.line, err, out)
		}
	}

	const parameter = "/ghrunner/github" // examples/complete's github_parameter
	sb, d, _ := deployedWith(t, sandbox.DeployOptions{GitHubParameter: parameter})
	tmp := t.TempDir()
	pem := filepath.Join(tmp, "ghrunner.private-key.pem")
	if err := os.WriteFile(pem, sb.GitHub.PrivateKeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(tmp, "app") // the user's repository
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("<ghrunner>", repo, "<app id>", fmt.Sprint(sb.GitHub.AppID), "<private-key.pem>", pem)

	// The Actions runtime's token service, for a job of the sandbox
	// repository's workflow run runID: what invoke.sh asks with
	// ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN.
	const runID, requestToken = "5151", "request-token"
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "bearer "+requestToken || r.URL.Query().Get("audience") != "ghrunner" {
			http.Error(w, "want the request token and audience ghrunner", http.StatusUnauthorized)
			return
		}
		res, err := http.Post(sb.URL+"/_sandbox/idtoken", "application/json", strings.NewReader(`{"runId":"`+runID+`"}`))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		w.WriteHeader(res.StatusCode)
		io.Copy(w, res.Body)
	}))
	defer tokens.Close()

	// A shell of the user's: no AWS or GitHub settings of this machine's,
	// the sandbox's instead (as .sandbox/env has them), and the names step 4
	// reads from terraform's outputs.
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "GITHUB_") || strings.HasPrefix(k, "ACTIONS_") || strings.HasPrefix(k, "GHRUNNER_") || k == "GHES_API_URL" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "AWS_ENDPOINT_URL="+sb.URL, "AWS_REGION="+sandbox.Region, "AWS_DEFAULT_REGION="+sandbox.Region,
		"AWS_ACCESS_KEY_ID=sandbox", "AWS_SECRET_ACCESS_KEY=sandbox", "AWS_MAX_ATTEMPTS=1",
		"AWS_CONFIG_FILE="+filepath.Join(tmp, "no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(tmp, "no-aws-credentials"),
		"GHRUNNER_REGION="+sandbox.Region, "GHRUNNER_PROVISION_FUNCTION="+d.Functions[bundle.HandlerProvision],
		"GHRUNNER_RELEASE_FUNCTION="+d.Functions[bundle.HandlerRelease], "GHES_API_URL="+sb.GitHub.APIURL())
	output := filepath.Join(tmp, "github-output")
	jobEnv := append(append([]string(nil), env...), "GITHUB_ACTIONS=true", "GITHUB_RUN_ID="+runID, "GITHUB_OUTPUT="+output,
		"ACTIONS_ID_TOKEN_REQUEST_URL="+tokens.URL+"/token?api-version=2.0", "ACTIONS_ID_TOKEN_REQUEST_TOKEN="+requestToken)

	// What each command must have done, beyond exiting 0: found by what
	// the block holds; each must be found exactly once.
	var label string
	var provisioned []string
	checks := []struct {
		name  string
		match func(script string) bool
		check func(t *testing.T, out string)
		seen  int
	}{
		{name: "put the App's credentials", match: func(s string) bool { return strings.Contains(s, "aws ssm put-parameter") },
			check: func(t *testing.T, _ string) {
				res, err := sb.AWS.SSM().GetParameter(context.Background(), &ssm.GetParameterInput{Name: aws.String(parameter), WithDecryption: aws.Bool(true)})
				if err != nil {
					t.Fatalf("the parameter the guide wrote: %v", err)
				}
				if res.Parameter.Type != "SecureString" {
					t.Errorf("parameter type %s, want SecureString", res.Parameter.Type)
				}
				cfg, err := github.ParseCredentials([]byte(aws.ToString(res.Parameter.Value)))
				if err != nil {
					t.Fatalf("the functions would refuse the parameter: %v", err)
				}
				if cfg.AppID != sb.GitHub.AppID || !bytes.Equal(cfg.PrivateKeyPEM, sb.GitHub.PrivateKeyPEM) {
					t.Errorf("parameter holds app %d and a key of %d bytes, want app %d and the PEM file's %d bytes as they are",
						cfg.AppID, len(cfg.PrivateKeyPEM), sb.GitHub.AppID, len(sb.GitHub.PrivateKeyPEM))
				}
			}},
		{name: "read it back", match: func(s string) bool { return strings.Contains(s, "aws ssm get-parameter") },
			check: func(t *testing.T, out string) {
				if want := fmt.Sprintf("appId %d - -----BEGIN RSA PRIVATE KEY-----", sb.GitHub.AppID); !strings.Contains(out, want) {
					t.Errorf("output %q, want %q", out, want)
				}
			}},
		{name: "preflight with invoke.sh", match: func(s string) bool { return strings.Contains(s, "invoke.sh") && strings.Contains(s, "preflight") },
			check: func(t *testing.T, out string) {
				for _, want := range []string{"ok   launch       linux", "ok   github       acme", "preflight-ok"} {
					if !strings.Contains(out, want) {
						t.Errorf("preflight printed %q, want a line %q", out, want)
					}
				}
			}},
		{name: "preflight with aws lambda invoke", match: func(s string) bool {
			return strings.Contains(s, "aws lambda invoke") && strings.Contains(s, "preflight")
		},
			check: func(t *testing.T, out string) {
				if !strings.Contains(out, `"status":"preflight-ok"`) {
					t.Errorf("preflight answered %q, want status preflight-ok", out)
				}
			}},
		{name: "copy the workflow", match: func(s string) bool { return strings.Contains(s, "cp <ghrunner>/examples/workflows/ci.yml") },
			check: func(t *testing.T, _ string) {
				// The action is referenced (uses: ...@tag), not copied.
				if _, err := os.Stat(filepath.Join(work, ".github/workflows/ci.yml")); err != nil {
					t.Error(err)
				}
			}},
		// Before the first release: the action vendored as a local one
		// (examples/workflows' actionlint test lints the result).
		{name: "vendor the action", match: func(s string) bool { return strings.Contains(s, ".github/actions/ghrunner") },
			check: func(t *testing.T, _ string) {
				if st, err := os.Stat(filepath.Join(work, ".github/actions/ghrunner/invoke.sh")); err != nil || st.Mode()&0o100 == 0 {
					t.Errorf("the vendored invoke.sh: %v, want an executable file", err)
				}
				if _, err := os.Stat(filepath.Join(work, ".github/actions/ghrunner/invoke.py")); err != nil {
					t.Errorf("the vendored invoke.py (invoke.sh runs it): %v", err)
				}
				raw, err := os.ReadFile(filepath.Join(work, ".github/workflows/ci.yml"))
				if err != nil {
					t.Fatal(err)
				}
				if n := strings.Count(string(raw), "uses: ./.github/actions/ghrunner"); n != 2 || strings.Contains(string(raw), "ghrunner/terraform-provider-ghrunner/action@") {
					t.Errorf("the vendored ci.yml uses the local action %d times (want 2) or still references the tag:\n%s", n, raw)
				}
			}},
		{name: "provision as the workflow's job", match: func(s string) bool {
			return strings.Contains(s, "$GHRUNNER_PROVISION_FUNCTION") && strings.Contains(s, "runId")
		},
			check: func(t *testing.T, out string) {
				var prov struct {
					Label, Status string
					Instances     []struct{ InstanceID string }
				}
				if i := strings.Index(out, `{"runId"`); i < 0 || json.Unmarshal([]byte(strings.TrimSpace(out[i:])), &prov) != nil {
					t.Fatalf("provision printed %q, want its answer", out)
				}
				if prov.Status != "ready" || len(prov.Instances) != 2 || !strings.HasPrefix(prov.Label, "ghr-"+runID+"-") {
					t.Fatalf("provision: %+v, want 2 instances ready under a label of run %s", prov, runID)
				}
				if raw, _ := os.ReadFile(output); !strings.Contains(string(raw), `response={"runId":"`+runID+`"`) {
					t.Errorf("GITHUB_OUTPUT holds %q, want the response output", raw)
				}
				label = prov.Label
				for _, in := range prov.Instances {
					provisioned = append(provisioned, in.InstanceID)
				}
				// GitHub sends a job of the run to its label: ci.yml's build.
				if j := runJob(t, sb.URL, runID, "echo built"); j.Result != "succeeded" {
					t.Fatalf("a job on %s: %+v", label, j)
				}
			}},
		{name: "release as the workflow's job", match: func(s string) bool { return strings.Contains(s, "$GHRUNNER_RELEASE_FUNCTION") },
			check: func(t *testing.T, out string) {
				var rel struct{ Released, Expired []string }
				if i := strings.Index(out, `{"runId"`); i < 0 || json.Unmarshal([]byte(strings.TrimSpace(out[i:])), &rel) != nil {
					t.Fatalf("release printed %q, want its answer", out)
				}
				// Each instance of the run is back in the pool, or retired
				// (expired) when its agent found it not clean: release's
				// two outcomes, both the release's success.
				got := slices.Sorted(slices.Values(append(rel.Released, rel.Expired...)))
				if want := slices.Sorted(slices.Values(provisioned)); !slices.Equal(got, want) || len(rel.Released) == 0 {
					t.Errorf("release: released %v, expired %v; want the run's instances %v, at least one back in the pool", rel.Released, rel.Expired, want)
				}
				if len(rel.Expired) > 0 {
					t.Logf("release retired %v instead of pooling it (its agent found it not clean: the sandbox log says why)", rel.Expired)
				}
			}},
	}

	ran := 0
	for _, b := range blocks {
		if strings.HasPrefix(b.mark, "not run") {
			continue
		}
		script := fill.Replace(b.script)
		if left := guideLeftOver.FindString(script); left != "" {
			t.Fatalf("getting-started.md:%d: placeholder %s is not one the test fills (<ghrunner>, <app id>, <private-key.pem>): mark the block not run, or teach the test", b.line, left)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = work, env
		if b.mark == "run: as a workflow job" {
			cmd.Env = jobEnv
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("getting-started.md:%d: %v\n--- script\n%s--- output\n%s", b.line, err, script, out.String())
		}
		t.Logf("getting-started.md:%d ran:\n%s", b.line, out.String())
		ran++
		for i := range checks {
			if checks[i].match(b.script) {
				checks[i].seen++
				checks[i].check(t, out.String())
			}
		}
	}
	for _, c := range checks {
		if c.seen != 1 {
			t.Errorf("the guide has %d run blocks that %s; want one", c.seen, c.name)
		}
	}
	if ran == 0 {
		t.Error("no block of the guide ran")
	}
}
