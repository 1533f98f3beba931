package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	gh "github.com/google/go-github/v62/github"
)

// JITConfig is a just-in-time runner GitHub made: the runner (registered,
// offline until its listener starts) and the value `run.sh --jitconfig`
// takes. The runner takes one job and is then removed by GitHub; the value
// registers nothing else.
type JITConfig struct {
	RunnerID int64
	Name     string
	Encoded  string
}

// ErrNameTaken: GitHub refused a just-in-time runner because another runner
// of the owner has its name (409).
var ErrNameTaken = errors.New("a runner of that name exists")

// IsNameTaken reports a 409 from generate-jitconfig.
func IsNameTaken(err error) bool { return errors.Is(err, ErrNameTaken) }

// GenerateJITConfig asks GitHub for a just-in-time runner of owner (an
// organization or a repository) named name, in runner group groupID (1 is
// Default; GitHub requires one), with the given labels (1 to 100: the
// runner has these and no others, not config.sh's self-hosted, OS and
// architecture; fakegithub jit.go). A 422 is bad input, never ErrBusy.
func (c *Client) GenerateJITConfig(ctx context.Context, owner, name string, groupID int64, labels []string) (JITConfig, error) {
	switch {
	case name == "":
		return JITConfig{}, errors.New("generate-jitconfig: name: must not be empty")
	case groupID < 1:
		return JITConfig{}, fmt.Errorf("generate-jitconfig: runner_group_id: %d is not a runner group id (1 is Default)", groupID)
	case len(labels) == 0 || len(labels) > 100:
		return JITConfig{}, fmt.Errorf("generate-jitconfig: labels: want 1 to 100, got %d", len(labels))
	}
	o, cl, err := c.owner(ctx, owner)
	if err != nil {
		return JITConfig{}, err
	}
	req := &gh.GenerateJITConfigRequest{Name: name, RunnerGroupID: groupID, Labels: labels}
	var out *gh.JITRunnerConfig
	if o.IsRepo() {
		out, _, err = cl.Actions.GenerateRepoJITConfig(ctx, o.Org, o.Repo, req)
	} else {
		out, _, err = cl.Actions.GenerateOrgJITConfig(ctx, o.Org, req)
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusConflict:
			return JITConfig{}, fmt.Errorf("generate-jitconfig %s for %s: %w: %w", name, o, ErrNameTaken, err)
		case http.StatusUnprocessableEntity:
			return JITConfig{}, fmt.Errorf("generate-jitconfig %s for %s: GitHub refused the request: %w", name, o, err)
		case http.StatusNotFound:
			// GitHub says the same for a group it does not know and for a
			// route it does not have: name both, and what to do.
			return JITConfig{}, fmt.Errorf("generate-jitconfig %s for %s: not found: either runner group %d is not one it may use "+
				"(set the pool's runner_group), or this server has no just-in-time runners (GitHub Enterprise Server before 3.10: "+
				"set the pool's registration = \"token\"): %w", name, o, groupID, classify(err))
		case http.StatusForbidden:
			if IsRateLimited(classify(err)) {
				break
			}
			// Not a runner-group problem: the App (or token) may not
			// manage this owner's runners.
			return JITConfig{}, fmt.Errorf("generate-jitconfig %s for %s: GitHub refused (403): the App lacks the permission to manage runners here "+
				"(organization pools: Self-hosted runners read & write; repository pools: Administration read & write; a token: admin:org or repo): %w",
				name, o, classify(err))
		}
	}
	if err != nil {
		return JITConfig{}, fmt.Errorf("generate-jitconfig %s for %s: %w", name, o, classify(err))
	}
	if out.GetEncodedJITConfig() == "" || out.Runner == nil {
		return JITConfig{}, fmt.Errorf("generate-jitconfig %s for %s: GitHub answered without a runner or configuration", name, o)
	}
	return JITConfig{RunnerID: out.Runner.GetID(), Name: out.Runner.GetName(), Encoded: out.GetEncodedJITConfig()}, nil
}

// LatestRunnerRelease reads actions/runner's latest release (GET
// /repos/actions/runner/releases/latest) with owner's installation token,
// which reads any public repository: its tag, publication time and notes,
// whose markers carry each tarball's SHA-256 (runnerrelease.FromRelease).
// GitHub Enterprise Server has no actions/runner repository: pools there
// pin their version.
func (c *Client) LatestRunnerRelease(ctx context.Context, owner string) (tag string, published time.Time, body string, err error) {
	_, cl, err := c.owner(ctx, owner)
	if err != nil {
		return "", time.Time{}, "", err
	}
	rel, _, err := cl.Repositories.GetLatestRelease(ctx, "actions", "runner")
	if err != nil {
		return "", time.Time{}, "", fmt.Errorf("read actions/runner's latest release: %w", classify(err))
	}
	return rel.GetTagName(), rel.GetPublishedAt().Time, rel.GetBody(), nil
}
