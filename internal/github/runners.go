package github

import (
	"context"
	"fmt"
	"regexp"
	"strconv"

	gh "github.com/google/go-github/v62/github"
)

// Self-hosted runners as GitHub reports them, and the names ghrunner gives
// its own.

// Runner is a self-hosted runner as GitHub reports it.
type Runner struct {
	ID     int64
	Name   string
	OS     string
	Status string // "online" or "offline"
	Busy   bool
	Labels []string
}

// Online says whether GitHub sees the runner's listener.
func (r Runner) Online() bool { return r.Status == "online" }

// ListRunners returns every runner of owner (all pages, 100 per page).
func (c *Client) ListRunners(ctx context.Context, owner string) ([]Runner, error) {
	o, cl, err := c.owner(ctx, owner)
	if err != nil {
		return nil, err
	}
	var all []Runner
	opts := &gh.ListRunnersOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		page, resp, err := listRunnersPage(ctx, cl, o, opts)
		if err != nil {
			return nil, fmt.Errorf("list the runners of %s: %w", o, classify(err))
		}
		for _, r := range page.Runners {
			all = append(all, fromGitHub(r))
		}
		if resp.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.NextPage
	}
}

// listRunnersPage reads one page of the owner's runners: a repository's or
// an organisation's, which GitHub serves on two routes.
func listRunnersPage(ctx context.Context, cl *gh.Client, o Owner, opts *gh.ListRunnersOptions) (*gh.Runners, *gh.Response, error) {
	if o.IsRepo() {
		return cl.Actions.ListRunners(ctx, o.Org, o.Repo, opts)
	}
	return cl.Actions.ListOrganizationRunners(ctx, o.Org, opts)
}

// RunnerNamed returns owner's runner of this name (GitHub's name filter of
// the list endpoint); IsNotFound when there is none. Names are unique per
// owner: config.sh refuses a second runner of the same name. GitHub
// Enterprise Server before 3.11 has no name filter (the parameter is absent
// from the ghes-3.8 to 3.10 descriptions) and answers an unfiltered page:
// when an answer holds other names, the filter was ignored, and every page
// is read before the runner is called gone.
func (c *Client) RunnerNamed(ctx context.Context, owner, name string) (Runner, error) {
	o, cl, err := c.owner(ctx, owner)
	if err != nil {
		return Runner{}, err
	}
	opts := &gh.ListRunnersOptions{Name: gh.String(name), ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		page, resp, err := listRunnersPage(ctx, cl, o, opts)
		if err != nil {
			return Runner{}, fmt.Errorf("find runner %s of %s: %w", name, o, classify(err))
		}
		filtered := true
		for _, r := range page.Runners {
			if r.GetName() == name {
				return fromGitHub(r), nil
			}
			filtered = false
		}
		if filtered || resp.NextPage == 0 {
			return Runner{}, fmt.Errorf("find runner %s of %s: %w", name, o, ErrNotFound)
		}
		opts.Page = resp.NextPage
	}
}

// GetRunner returns one runner; IsNotFound tells a runner that is gone.
func (c *Client) GetRunner(ctx context.Context, owner string, id int64) (Runner, error) {
	o, cl, err := c.owner(ctx, owner)
	if err != nil {
		return Runner{}, err
	}
	var r *gh.Runner
	if o.IsRepo() {
		r, _, err = cl.Actions.GetRunner(ctx, o.Org, o.Repo, id)
	} else {
		r, _, err = cl.Actions.GetOrganizationRunner(ctx, o.Org, id)
	}
	if err != nil {
		return Runner{}, fmt.Errorf("get runner %d of %s: %w", id, o, classify(err))
	}
	return fromGitHub(r), nil
}

// DeleteRunner removes a runner. A runner that is gone already is no error
// (the callers want it gone; GitHub answers 404); one that runs a job gives
// an error IsBusy recognises (GitHub answers 422 "still running a job").
func (c *Client) DeleteRunner(ctx context.Context, owner string, id int64) error {
	o, cl, err := c.owner(ctx, owner)
	if err != nil {
		return err
	}
	if o.IsRepo() {
		_, err = cl.Actions.RemoveRunner(ctx, o.Org, o.Repo, id)
	} else {
		_, err = cl.Actions.RemoveOrganizationRunner(ctx, o.Org, id)
	}
	err = classify(err)
	if err == nil || IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("delete runner %d of %s: %w", id, o, err)
}

func fromGitHub(r *gh.Runner) Runner {
	out := Runner{ID: r.GetID(), Name: r.GetName(), OS: r.GetOS(), Status: r.GetStatus(), Busy: r.GetBusy()}
	for _, l := range r.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out
}

// ghr-<uses>-<instanceId>, or ghr-<uses>-<n>-<instanceId> for the nth
// just-in-time runner of a use (numbers without leading zeros).
var runnerNameRE = regexp.MustCompile(`^ghr-(0|[1-9][0-9]*)-(?:([1-9][0-9]*)-)?(i-[0-9A-Za-z]+)$`)

// RunnerNameParts is a runner name of ours, read: the instance's use it
// was registered for, its number in that use (just-in-time runners; 0 for
// a runner registered with a token), and the instance.
type RunnerNameParts struct {
	Uses, Seq  int
	InstanceID string
}

// ParseRunnerName reads a runner name of ours (state.RunnerName,
// state.JITRunnerName). It is the one parser every function maps runner
// names to instances with.
func ParseRunnerName(runnerName string) (RunnerNameParts, bool) {
	m := runnerNameRE.FindStringSubmatch(runnerName)
	if m == nil {
		return RunnerNameParts{}, false
	}
	uses, err := strconv.Atoi(m[1])
	if err != nil {
		return RunnerNameParts{}, false
	}
	seq := 0
	if m[2] != "" {
		if seq, err = strconv.Atoi(m[2]); err != nil {
			return RunnerNameParts{}, false
		}
	}
	return RunnerNameParts{Uses: uses, Seq: seq, InstanceID: m[3]}, true
}

// InstanceOf returns the instance id a runner name of ours
// (state.RunnerName) ends with.
func InstanceOf(runnerName string) (string, bool) {
	p, ok := ParseRunnerName(runnerName)
	return p.InstanceID, ok
}

// NameMatchesInstance says whether a runner name is one of ours for the
// instance (any use).
func NameMatchesInstance(runnerName, instanceID string) bool {
	id, ok := InstanceOf(runnerName)
	return ok && id == instanceID
}

// FindRunner finds an instance's runner in a listing: by the runner id the
// instance recorded (when not 0) first, by name suffix second.
func FindRunner(runners []Runner, runnerID int64, instanceID string) (Runner, bool) {
	if runnerID != 0 {
		for _, r := range runners {
			if r.ID == runnerID {
				return r, true
			}
		}
	}
	for _, r := range runners {
		if NameMatchesInstance(r.Name, instanceID) {
			return r, true
		}
	}
	return Runner{}, false
}
