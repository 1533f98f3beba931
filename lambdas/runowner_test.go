package main

import (
	"crypto/rand"
	"crypto/rsa"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// A run belongs to the workflow run that provisioned it (docs/security.md,
// T7): these tests play the workflows of other repositories, and of other
// runs of the same repository, that learned a run's runId.

// refused invokes handler with payload and wants a function error holding
// every one of want, and no label of run in it.
func (d *deployment) refused(handler string, payload map[string]any, label string, want ...string) {
	d.t.Helper()
	res := d.invoke(handler, payload)
	msg := string(res.Payload)
	if res.FunctionError == "" {
		d.t.Errorf("%s %v: answered %s, want a refusal", handler, payload["runId"], msg)
		return
	}
	for _, w := range want {
		if !strings.Contains(msg, jsonText(w)) {
			d.t.Errorf("%s %v: %s, want it to contain %q", handler, payload["runId"], msg, w)
		}
	}
	if label != "" && strings.Contains(msg, label) {
		d.t.Errorf("%s %v: the refusal tells the run's label: %s", handler, payload["runId"], msg)
	}
}

// as is payload with the token of a job of repo's workflow run runID.
func (d *deployment) as(repo, runID string, attempt int, payload map[string]any) map[string]any {
	payload["idToken"] = d.fake.IDToken(fakegithub.Workflow{Repository: repo, RunID: runID, RunAttempt: attempt}, audience)
	return payload
}

// ownerView is what a refused call must leave as it was.
type ownerView struct {
	keys      []string
	live      int
	runners   int
	runStatus state.RunStatus
}

func (d *deployment) view(runID string) ownerView {
	d.t.Helper()
	s := ownerView{keys: d.tableKeys(), live: len(d.live()), runners: len(d.fake.Runners())}
	if run, err := d.store.GetRun(ctx, runID); err == nil {
		s.runStatus = run.Status
	}
	return s
}

func (d *deployment) unchanged(before ownerView, runID string) {
	d.t.Helper()
	after := d.view(runID)
	if !slices.Equal(after.keys, before.keys) || after.live != before.live || after.runners != before.runners || after.runStatus != before.runStatus {
		d.t.Errorf("refused calls changed the deployment: %+v, was %+v", after, before)
	}
}

func TestAnotherRepositorysWorkflowGetsNoLabelNorRunnersOfARunNotItsOwn(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	var mine provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "5001", "pool": "linux"}, &mine)
	before := d.view("5001")
	ask := func() map[string]any { return map[string]any{"runId": "5001", "pool": "linux"} }

	// Its own token names its own workflow run, not 5001.
	d.refused(bundle.HandlerProvision, d.as("acme/evil", "6001", 1, ask()), mine.Label,
		`runId: "5001" is not a run of the invoking workflow run`)
	// Even a token naming run 5001 (a run id guessed or reused on another
	// GitHub) is of another repository.
	d.refused(bundle.HandlerProvision, d.as("acme/evil", "5001", 1, ask()), mine.Label,
		"idToken: repository_id", "(acme/evil) is not the repository that provisioned run 5001")
	// Another workflow run of the same repository is not the run either.
	d.refused(bundle.HandlerProvision, d.as(ownRepo, "5002", 1, ask()), mine.Label, "runId:")
	d.unchanged(before, "5001")

	// A re-run of the workflow run that provisioned it (run_attempt 2)
	// joins it, and learns its label.
	var again provisionOut
	d.call(bundle.HandlerProvision, d.as(ownRepo, "5001", 2, ask()), &again)
	if again.Label != mine.Label || len(again.Instances) != 1 || again.Instances[0].InstanceID != mine.Instances[0].InstanceID {
		t.Fatalf("the re-run joined %+v, want the run's %+v", again, mine)
	}
	run, err := d.store.GetRun(ctx, "5001")
	must(t, err)
	if run.RepositoryID != strconv.FormatInt(d.fake.RepositoryID(ownRepo), 10) || run.Repository != ownRepo || run.WorkflowRunID != "5001" || run.RunAttempt != "1" {
		t.Fatalf("the run's binding: %+v", run)
	}
}

func TestAnotherRepositorysWorkflowCannotReleaseARunNotItsOwn(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	var mine provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "5101", "pool": "linux"}, &mine)
	before := d.view("5101")
	rel := func() map[string]any { return map[string]any{"runId": "5101"} }

	d.refused(bundle.HandlerRelease, d.as("acme/evil", "6101", 1, rel()), mine.Label, `runId: "5101" is not a run of the invoking workflow run`)
	d.refused(bundle.HandlerRelease, d.as("acme/evil", "5101", 1, rel()), mine.Label, "idToken: repository_id", "is not the repository that provisioned run 5101")
	d.refused(bundle.HandlerRelease, d.as(ownRepo, "5102", 1, rel()), mine.Label, "runId:")
	d.unchanged(before, "5101")
	if before.runStatus != state.RunReady {
		t.Fatalf("run status %q before the attempts, want ready", before.runStatus)
	}
	// The run's runner still takes its jobs.
	if job := d.job(mine.Label, "echo still mine"); job.ExitCode != 0 {
		t.Fatalf("the run's job after refused releases: %+v", job)
	}
	// Its own workflow run, in a re-run, releases it.
	var out releaseOut
	d.call(bundle.HandlerRelease, d.as(ownRepo, "5101", 3, rel()), &out)
	if len(out.Released) != 1 {
		t.Fatalf("the owner's release: %+v", out)
	}
}

func TestForgedExpiredOrMisdirectedTokensAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	var mine provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "5201", "pool": "linux"}, &mine)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	must(t, err)
	job := func(run string) fakegithub.Workflow { return fakegithub.Workflow{Repository: ownRepo, RunID: run} }
	bad := []struct {
		name  string
		token func(run string) any
		want  string
	}{
		{"no token", nil, "idToken: required: the invoking job's GitHub Actions OIDC token"},
		{"an empty token", func(string) any { return "" }, "idToken: required"},
		{"a number", func(string) any { return 42 }, "idToken: want a string"},
		{"signed by another key", func(r string) any { return d.fake.IDTokenWith(job(r), fakegithub.TokenOptions{Key: other}) }, "idToken: signature: not made by any key"},
		{"expired", func(r string) any {
			return d.fake.IDTokenWith(job(r), fakegithub.TokenOptions{IssuedAt: time.Now().Add(-7 * time.Hour)})
		}, "idToken: expired at"},
		{"for another audience", func(r string) any { return d.fake.IDToken(job(r), "sts.amazonaws.com") }, `idToken: aud ["sts.amazonaws.com"] does not hold "ghrunner"`},
		{"of another issuer", func(r string) any {
			return d.fake.IDTokenWith(job(r), fakegithub.TokenOptions{Issuer: idtoken.GitHubIssuer})
		}, "idToken: iss \"" + idtoken.GitHubIssuer + "\" is not the configured issuer"},
	}
	before := d.view("5201")
	for _, c := range bad {
		for _, call := range []struct {
			handler string
			payload map[string]any
		}{
			{bundle.HandlerProvision, map[string]any{"runId": "5299", "pool": "linux"}}, // a new run
			{bundle.HandlerProvision, map[string]any{"runId": "5201", "pool": "linux"}}, // joining one
			{bundle.HandlerRelease, map[string]any{"runId": "5201"}},
		} {
			if c.token == nil {
				call.payload["idToken"] = nil // sent as null: what a job without id-token: write would send
			} else {
				call.payload["idToken"] = c.token(call.payload["runId"].(string))
			}
			d.refused(call.handler, call.payload, mine.Label, c.want)
		}
	}
	d.unchanged(before, "5201")
}
