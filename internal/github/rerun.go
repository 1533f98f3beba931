package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	gh "github.com/google/go-github/v62/github"
)

// RerunFailedJobs asks GitHub to re-run the failed jobs of workflow run
// runID of repository repo (acme/api), and their dependent jobs (POST
// /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs, 201). It
// needs the App's actions: write. GitHub refuses while the run is still in
// progress, with a 403 the description does not document
// (RerunRefusedError); callers try again once the run has completed.
func (c *Client) RerunFailedJobs(ctx context.Context, repo string, runID int64) error {
	o, cl, err := c.owner(ctx, repo)
	if err != nil {
		return err
	}
	if !o.IsRepo() {
		return fmt.Errorf("re-run workflow run %d: %q is no repository (acme/api)", runID, repo)
	}
	_, err = cl.Actions.RerunFailedJobsByID(ctx, o.Org, o.Repo, runID)
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusForbidden && !IsRateLimited(err) {
		return &RerunRefusedError{Message: er.Message}
	}
	if err = classify(err); err != nil {
		return fmt.Errorf("re-run the failed jobs of workflow run %d of %s: %w", runID, o, err)
	}
	return nil
}

// RerunRefusedError is GitHub's 403 to a re-run: the run still in
// progress ("This workflow is already running", as users report it), a
// run that cannot be re-run, or an App without actions: write ("Resource
// not accessible by integration"). Which message means what is not
// documented: Message is GitHub's, for the record.
type RerunRefusedError struct{ Message string }

func (e *RerunRefusedError) Error() string { return "GitHub refused the re-run (403): " + e.Message }
