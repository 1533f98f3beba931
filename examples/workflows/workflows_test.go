// The example workflow, read as GitHub reads it, and its invoking jobs run
// as GitHub runs them: the action it references (../../action), with the
// inputs its `with:` gives, the real AWS CLI against a stand-in AWS and the
// fake GitHub's token service.
package workflows_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/actionrun"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

type step struct {
	ID   string
	Uses string
	With map[string]string
}

type workflow struct {
	Permissions map[string]string
	Concurrency struct {
		Group            string
		CancelInProgress string `yaml:"cancel-in-progress"`
	}
	Jobs map[string]struct {
		If             string
		RunsOn         string `yaml:"runs-on"`
		TimeoutMinutes int    `yaml:"timeout-minutes"`
		Needs          any
		Permissions    map[string]string
		Outputs        map[string]string
		Steps          []step
	}
}

func readWorkflow(t *testing.T) workflow {
	t.Helper()
	raw, err := os.ReadFile("ci.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatalf("ci.yml: %v", err)
	}
	return wf
}

// actionRef is how users reference the action: this repository's path
// action/ at a release tag (go.mod names the repository).
var actionRef = regexp.MustCompile(`^ghrunner/terraform-provider-ghrunner/action@v\d+\.\d+\.\d+$`)

// invoking is the one step of an invoking job: ghrunner's action.
func invoking(t *testing.T, wf workflow, job string) step {
	t.Helper()
	steps := wf.Jobs[job].Steps
	if len(steps) != 1 || !actionRef.MatchString(steps[0].Uses) {
		t.Fatalf("job %s: steps %+v, want the one step uses: ghrunner/terraform-provider-ghrunner/action@vX.Y.Z (no checkout, no other action)", job, steps)
	}
	return steps[0]
}

func TestTheWorkflowProvisionsRunsOnTheLabelAndAlwaysReleases(t *testing.T) {
	wf := readWorkflow(t)
	provision, build, release := wf.Jobs["provision"], wf.Jobs["build"], wf.Jobs["release"]
	// The label provision minted, never the guessable run id; a fork's pull
	// request (provision skipped) builds on a GitHub-hosted runner instead.
	if build.RunsOn != "${{ needs.provision.outputs.label || 'ubuntu-latest' }}" || build.Needs != "provision" ||
		provision.Outputs["label"] != "${{ steps.provision.outputs.label }}" {
		t.Errorf("build: runs-on %q needs %v, provision's label output %q", build.RunsOn, build.Needs, provision.Outputs["label"])
	}
	if build.If != "${{ !cancelled() && (needs.provision.result == 'success' || needs.provision.result == 'skipped') }}" {
		t.Errorf("build if %q: want it to run after provision, and without it for a fork", build.If)
	}
	// Forks get no OIDC token: provision does not try.
	if provision.If != "github.event_name != 'pull_request' || github.event.pull_request.head.repo.full_name == github.repository" {
		t.Errorf("provision if %q: a fork's pull request must skip it", provision.If)
	}
	if release.If != "${{ always() && needs.provision.result != 'skipped' }}" || !slices.Equal(toStrings(release.Needs), []string{"provision", "build"}) {
		t.Errorf("release: if %q needs %v; want always() after provision and build, unless provision was skipped", release.If, release.Needs)
	}
	// The invoking jobs wait on one call: the smallest GitHub-hosted runner,
	// within its 15-minute limit (provision's longest timeout is 900 s).
	for _, name := range []string{"provision", "release"} {
		if j := wf.Jobs[name]; j.RunsOn != "ubuntu-slim" || j.TimeoutMinutes == 0 || j.TimeoutMinutes > 15 {
			t.Errorf("%s: runs-on %q, timeout-minutes %d; want ubuntu-slim within 15 minutes", name, j.RunsOn, j.TimeoutMinutes)
		}
	}
	if !strings.Contains(wf.Concurrency.Group, "github.event.pull_request.number") || wf.Concurrency.CancelInProgress != "${{ github.event_name == 'pull_request' }}" {
		t.Errorf("concurrency %+v: want a newer push to a pull request to cancel the older run", wf.Concurrency)
	}
	if p, r := invoking(t, wf, "provision"), invoking(t, wf, "release"); p.Uses != r.Uses {
		t.Errorf("provision uses %s, release %s: one version of the action", p.Uses, r.Uses)
	}
}

// Only the jobs that invoke provision and release may mint OIDC tokens: the
// build jobs run pull-request code on pooled runners, and with id-token:
// write they could assume the invoking role and sign payloads of this run.
func TestOnlyTheInvokingJobsMayMintTokens(t *testing.T) {
	wf := readWorkflow(t)
	if len(wf.Permissions) == 0 || wf.Permissions["id-token"] != "" {
		t.Errorf("workflow permissions %v, want some given and no id-token", wf.Permissions)
	}
	for name, job := range wf.Jobs {
		invoking := name == "provision" || name == "release"
		if got := job.Permissions["id-token"]; invoking != (got == "write") {
			t.Errorf("job %s: id-token %q; only provision and release may write it", name, got)
		}
	}
}

// The invoking jobs of ci.yml run as GitHub would run them, for two
// attempts of run 42: each attempt provisions and releases a runId of its
// own (so "Re-run all jobs" works: provision refuses a released runId),
// the role is assumed with the job's token, and provision's label is the
// job's output the build jobs run on.
func TestTheWorkflowsInvokingJobsRunTheActionAndReRunsGetARunIDOfTheirOwn(t *testing.T) {
	wf := readWorkflow(t)
	gh := fakegithub.New("acme")
	defer gh.Close()
	aws := actionrun.NewAWS()
	defer aws.Close()
	aws.Function = func(name string, payload []byte) (string, string) {
		var in struct{ RunID string }
		json.Unmarshal(payload, &in)
		if name == "ci-provision" {
			return `{"runId":"` + in.RunID + `","label":"ghr-` + in.RunID + `-abcdefghijklmnop","instances":[{"instanceId":"i-1"},{"instanceId":"i-2"}]}`, ""
		}
		return `{"runId":"` + in.RunID + `","released":["i-1","i-2"],"expired":[]}`, ""
	}
	vars := map[string]string{"vars.GHRUNNER_PROVISION_FUNCTION": "ci-provision", "vars.GHRUNNER_RELEASE_FUNCTION": "ci-release",
		"vars.GHRUNNER_INVOKE_ROLE_ARN": "arn:aws:iam::123456789012:role/ci-invoker", "vars.GHRUNNER_REGION": "eu-west-1"}
	seen := map[string]bool{}
	for attempt := 1; attempt <= 2; attempt++ {
		ctx := map[string]string{"github.run_id": "42", "github.run_attempt": string(rune('0' + attempt))}
		for k, v := range vars {
			ctx[k] = v
		}
		for _, job := range []string{"provision", "release"} {
			s := invoking(t, wf, job)
			inputs := map[string]string{}
			for k, v := range s.With {
				expanded, err := actionrun.Expand(v, ctx)
				if err != nil {
					t.Fatalf("%s with %s: %v", job, k, err)
				}
				inputs[k] = expanded
			}
			url, tok := gh.IDTokenRequest(fakegithub.Workflow{Repository: "acme/app", RunID: "42", RunAttempt: attempt})
			r := actionrun.Run(t, "../../action", inputs, actionrun.JobEnv(aws, t.TempDir(), "42", attempt, url, tok))
			if r.Code != 0 {
				t.Fatalf("attempt %d, %s: exit %d\n%s", attempt, job, r.Code, r.Log)
			}
			if job == "provision" {
				label, err := actionrun.Expand(wf.Jobs[job].Outputs["label"], map[string]string{"steps.provision.outputs.label": r.Outputs["label"]})
				if err != nil || label != "ghr-42-"+ctx["github.run_attempt"]+"-abcdefghijklmnop" || r.Outputs["runners"] != "2" {
					t.Errorf("attempt %d: provision's label output %q (%v), runners %q", attempt, label, err, r.Outputs["runners"])
				}
			}
		}
	}
	invokes, assumed := aws.Invokes(), aws.Assumed()
	if len(invokes) != 4 || len(assumed) != 4 {
		t.Fatalf("%d invokes, %d role assumptions; want 4 each", len(invokes), len(assumed))
	}
	for i, in := range invokes {
		var p struct{ RunID, IDToken string }
		json.Unmarshal(in.Payload, &p)
		if p.IDToken == "" || in.AccessKeyID != assumed[i].AccessKeyID || assumed[i].RoleArn != vars["vars.GHRUNNER_INVOKE_ROLE_ARN"] {
			t.Errorf("%s %s: idToken %t, signed by %s (assumed %s as %s)", in.Function, p.RunID, p.IDToken != "", in.AccessKeyID, assumed[i].AccessKeyID, assumed[i].RoleArn)
		}
		seen[in.Function+" "+p.RunID] = true
	}
	for _, want := range []string{"ci-provision 42-1", "ci-release 42-1", "ci-provision 42-2", "ci-release 42-2"} {
		if !seen[want] {
			t.Errorf("no %s: calls %v", want, seen)
		}
	}
}

func toStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, s := range list {
		out = append(out, s.(string))
	}
	return out
}
