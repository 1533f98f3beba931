package controlplane

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
)

// oneIdentity verifies every token as the same job's; the raw token is
// its jti.
type oneIdentity idtoken.Identity

func (o oneIdentity) Verify(_ context.Context, raw string) (idtoken.Identity, error) {
	id := idtoken.Identity(o)
	id.JTI, id.Expiry = raw, tokenExpiry
	return id, nil
}

// tokenExpiry is when oneIdentity's tokens expire.
var tokenExpiry = time.Now().Add(6 * time.Hour).Truncate(time.Second)

func TestAJobNamesOnlyRunsOfItsOwnWorkflowRun(t *testing.T) {
	d := &Deps{Store: statetest.NewStore(t, env), IDTokens: oneIdentity{RepositoryID: "7", Repository: "acme/app", RunID: "5001", RunAttempt: "2"}}
	for runID, ok := range map[string]bool{
		"5001": true, "5001-2": true, "5001-linux": true, "5001-1-gpu": true,
		"50011": false, "500": false, "5002": false, "x5001": false, "5001_2": false, "5001.2": false,
	} {
		_, err := d.Caller(context.Background(), "provision", "token-"+runID, runID)
		var in *fielderr.Error
		switch {
		case ok && err != nil:
			t.Errorf("runId %s: %v, want it accepted for run_id 5001", runID, err)
		case !ok && (!errors.As(err, &in) || in.Field != "runId"):
			t.Errorf("runId %s: %v, want a runId refusal for run_id 5001", runID, err)
		}
	}
}

func TestWithoutAnIssuerEveryRunIsRefused(t *testing.T) {
	if _, err := (&Deps{}).Caller(context.Background(), "provision", "token", "1"); err == nil || !strings.Contains(err.Error(), "no OIDC issuer configured") {
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

// A token that leaked from the invoking job is replayed within its
// lifetime: for the other operation on its run, or for another run of its
// workflow run. Each is refused, naming why; the same call sent again with
// it (after a lost answer) passes, as does the next call with a token of
// its own.
//
// With the UseToken call removed from Caller, the test reported (tried
// once):
//
//	release of run 5001 with provision's token: <nil>, want "idToken: was already used (jti tok-A), for provision of run 5001"
//	provision of run 5001-2 with provision's token: <nil>, want "idToken: was already used (jti tok-A), for provision of run 5001"
func TestATokenServesOneCallAndItsRetriesNeverAnother(t *testing.T) {
	d := &Deps{Store: statetest.NewStore(t, env), IDTokens: oneIdentity{RepositoryID: "7", Repository: "acme/app", RunID: "5001", RunAttempt: "1"}}
	call := func(op, token, runID string) error {
		_, err := d.Caller(context.Background(), op, token, runID)
		return err
	}
	for _, c := range []struct {
		what, op, token, runID, want string
	}{
		{"provision of run 5001", "provision", "tok-A", "5001", ""},
		{"the same provision sent again", "provision", "tok-A", "5001", ""},
		{"release of run 5001 with provision's token", "release", "tok-A", "5001", "idToken: was already used (jti tok-A), for provision of run 5001"},
		{"provision of run 5001-2 with provision's token", "provision", "tok-A", "5001-2", "idToken: was already used (jti tok-A), for provision of run 5001"},
		{"release of run 5001 with a token of its own", "release", "tok-B", "5001", ""},
		{"that release sent again", "release", "tok-B", "5001", ""},
	} {
		err := call(c.op, c.token, c.runID)
		var in *fielderr.Error
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", c.what, err)
		case c.want != "" && (!errors.As(err, &in) || in.Field != "idToken" || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.what, err, c.want)
		}
	}
	// The use is kept as long as the token is good, and no longer: the
	// table's TTL attribute is the token's expiry.
	got, err := env.Config(t).DynamoDB().GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(d.Store.Table()),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: state.TokenUseKey("tok-A")}}})
	if err != nil {
		t.Fatal(err)
	}
	if exp, ok := got.Item[state.AttrExpiresAt].(*ddbtypes.AttributeValueMemberN); !ok || exp.Value != strconv.FormatInt(tokenExpiry.Unix(), 10) {
		t.Errorf("the use of tok-A expires at %v, want the token's expiry %d", got.Item[state.AttrExpiresAt], tokenExpiry.Unix())
	}
}
