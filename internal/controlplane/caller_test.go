package controlplane

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// oneIdentity verifies every token as the same job's.
type oneIdentity idtoken.Identity

func (o oneIdentity) Verify(context.Context, string) (idtoken.Identity, error) {
	return idtoken.Identity(o), nil
}

func TestAJobNamesOnlyRunsOfItsOwnWorkflowRun(t *testing.T) {
	d := &Deps{IDTokens: oneIdentity{RepositoryID: "7", Repository: "acme/app", RunID: "5001", RunAttempt: "2"}}
	for runID, ok := range map[string]bool{
		"5001": true, "5001-2": true, "5001-linux": true, "5001-1-gpu": true,
		"50011": false, "500": false, "5002": false, "x5001": false, "5001_2": false, "5001.2": false,
	} {
		_, err := d.Caller(context.Background(), "token", runID)
		var in *InputError
		switch {
		case ok && err != nil:
			t.Errorf("runId %s: %v, want it accepted for run_id 5001", runID, err)
		case !ok && (!errors.As(err, &in) || in.Field != "runId"):
			t.Errorf("runId %s: %v, want a runId refusal for run_id 5001", runID, err)
		}
	}
}

func TestWithoutAnIssuerEveryRunIsRefused(t *testing.T) {
	if _, err := (&Deps{}).Caller(context.Background(), "token", "1"); err == nil || !strings.Contains(err.Error(), "no OIDC issuer configured") {
		t.Fatalf("%v, want a refusal", err)
	}
}

func TestARunAnswersOnlyTheWorkflowRunThatProvisionedIt(t *testing.T) {
	run := &state.Run{ID: "5001", RepositoryID: "7", Repository: "acme/app", WorkflowRunID: "5001", RunAttempt: "1"}
	for _, c := range []struct {
		id   idtoken.Identity
		want string
	}{
		{idtoken.Identity{RepositoryID: "7", RunID: "5001", RunAttempt: "3"}, ""},
		{idtoken.Identity{RepositoryID: "8", Repository: "acme/app", RunID: "5001"}, "idToken: repository_id 8 (acme/app) is not the repository that provisioned run 5001"},
		{idtoken.Identity{RepositoryID: "7", RunID: "5002"}, "idToken: run_id 5002 is not the workflow run that provisioned run 5001"},
	} {
		err := Owns(run, c.id)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.id, err, c.want)
		}
	}
	// A run item from before runs were bound: the runId rule alone.
	if err := Owns(&state.Run{ID: "5001"}, idtoken.Identity{RepositoryID: "8", RunID: "5001"}); err != nil {
		t.Errorf("an unbound run: %v", err)
	}
}
