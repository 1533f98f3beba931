package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TokenVerifier checks the GitHub Actions OIDC token of the job that
// invokes provision or release (idtoken.Verifier in the bundle).
type TokenVerifier interface {
	Verify(ctx context.Context, raw string) (idtoken.Identity, error)
}

// Caller verifies a payload's idToken and applies the runId rule: a job
// may name only runs of its own workflow run, runId being the token's
// run_id or run_id-<suffix> (run_id-run_attempt for re-runs, run_id-linux
// for a second pool). GitHub's run ids are numbers unique per GitHub
// instance, so no other workflow run's runId can take either form, and a
// re-run (same run_id, next run_attempt) still names its run's runs.
// Every refusal is a payload refusal (IsInput) naming idToken or runId.
//
// A token serves one purpose: op (provision, release) of runID. Its use is
// recorded in the state table until it expires (state.UseToken), and the
// same token for any other operation or run is refused: a token that
// leaks from the invoking job (a log, a step that prints its payload)
// cannot release the run it provisioned, nor provision or release another
// run of its workflow run, for the hours it is valid. The same purpose
// again passes: the invoking job asks for one token per call (invoke.sh),
// and sends that call again with it after Lambda's 429 (the function did
// not run: nothing recorded) or when the CLI retries after a lost answer
// (the function ran: the same op of the same run). Provision and release
// are idempotent per run, so such a second use does what the first did,
// and nothing more: provision joins the run it started (or is refused a
// released one), release finds the run released.
func (d *Deps) Caller(ctx context.Context, op, raw, runID string) (idtoken.Identity, error) {
	if d.IDTokens == nil {
		// Fail closed: a function without an issuer trusts no one.
		return idtoken.Identity{}, errors.New("idToken: this function has no OIDC issuer configured (GHRUNNER_OIDC_ISSUER); it refuses every run")
	}
	id, err := d.IDTokens.Verify(ctx, raw)
	var refused *idtoken.Error
	switch {
	case errors.As(err, &refused):
		return id, Invalid("idToken", "%s", refused.Rule)
	case err != nil:
		return id, fmt.Errorf("idToken: cannot be checked now: %w", err)
	}
	if runID != id.RunID && !strings.HasPrefix(runID, id.RunID+"-") {
		return id, Invalid("runId", "%s is not a run of the invoking workflow run: with its token (run_id %s) runId must be %s or %s-<suffix>, such as %s-%s", Quote(runID), id.RunID, id.RunID, id.RunID, id.RunID, id.RunAttempt)
	}
	err = d.Store.UseToken(ctx, id.JTI, op+" of run "+runID, id.Expiry)
	var used *state.TokenUsedError
	switch {
	case errors.As(err, &used):
		return id, Invalid("idToken", "was already used (jti %s), for %s at %s: a token serves one call (and its retries), never another operation or run; request a fresh token for each call (invoke.sh does)",
			used.JTI, used.Purpose, time.Unix(used.UsedAt, 0).UTC().Format(time.RFC3339))
	case err != nil:
		return id, fmt.Errorf("idToken: cannot be checked now: %w", err)
	}
	return id, nil
}

// Owns refuses a caller other than the workflow run that provisioned the
// run: another repository (by repository_id, which survives renames), or
// another workflow run of the same repository. Any attempt of the
// provisioning workflow run may go on (a re-run joins or releases what
// its first attempt made). A run item written before runs were bound
// carries no binding: the runId rule (Caller) alone guards it.
func Owns(run *state.Run, id idtoken.Identity) error {
	if run.RepositoryID == "" {
		return nil
	}
	if run.RepositoryID != id.RepositoryID {
		return Invalid("idToken", "repository_id %s (%s) is not the repository that provisioned run %s: a run's label, runners and release belong to the workflow run that provisioned it", id.RepositoryID, id.Repository, run.ID)
	}
	if run.WorkflowRunID != id.RunID {
		return Invalid("idToken", "run_id %s is not the workflow run that provisioned run %s: a run's label, runners and release belong to the workflow run that provisioned it", id.RunID, run.ID)
	}
	return nil
}
