package github

import (
	"context"
	"fmt"

	gh "github.com/google/go-github/v62/github"
)

// Runner groups and whom they admit. Every call here reads only: the
// runner-group routes need the App's organization permission "Self-hosted
// runners" (read; ghrunner asks for write, which includes it), a
// repository's visibility its "Metadata" permission, which every App has
// (GitHub's REST docs on self-hosted runner groups and on repositories).

// RunnerGroupID returns the id of an organization's runner group by name
// (runner groups belong to organizations, not repositories).
func (c *Client) RunnerGroupID(ctx context.Context, org, name string) (int64, error) {
	g, err := c.RunnerGroup(ctx, org, name)
	return g.ID, err
}

// RunnerGroup is one runner group of an organization and whom it admits
// (GitHub's runner-groups-org object).
type RunnerGroup struct {
	ID   int64
	Name string
	// Visibility is "all" (every repository of the organization),
	// "selected" (RunnerGroupRepositories) or "private" (private
	// repositories only).
	Visibility               string
	AllowsPublicRepositories bool
	Default                  bool
	// RestrictedToWorkflows limits the group to SelectedWorkflows
	// ("acme/app/.github/workflows/ci.yml@main").
	RestrictedToWorkflows bool
	SelectedWorkflows     []string
}

// RunnerGroup finds an organization's runner group by name (the default
// group when name is empty); github.IsNotFound when it has none of that
// name.
func (c *Client) RunnerGroup(ctx context.Context, org, name string) (RunnerGroup, error) {
	o, err := ParseOwner(org)
	if err != nil {
		return RunnerGroup{}, err
	}
	if o.IsRepo() {
		return RunnerGroup{}, fmt.Errorf("runner group %q: %s is a repository; runner groups belong to organizations", name, o)
	}
	cl, err := c.forOwner(ctx, o)
	if err != nil {
		return RunnerGroup{}, err
	}
	opts := &gh.ListOrgRunnerGroupOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		page, resp, err := cl.Actions.ListOrganizationRunnerGroups(ctx, o.Org, opts)
		if err != nil {
			return RunnerGroup{}, fmt.Errorf("list the runner groups of %s: %w", o, classify(err))
		}
		for _, g := range page.RunnerGroups {
			if g.GetName() == name || name == "" && g.GetDefault() {
				return RunnerGroup{ID: g.GetID(), Name: g.GetName(), Visibility: g.GetVisibility(),
					AllowsPublicRepositories: g.GetAllowsPublicRepositories(), Default: g.GetDefault(),
					RestrictedToWorkflows: g.GetRestrictedToWorkflows(), SelectedWorkflows: g.SelectedWorkflows}, nil
			}
		}
		if resp.NextPage == 0 {
			return RunnerGroup{}, fmt.Errorf("runner group %q of %s: %w", name, o, ErrNotFound)
		}
		opts.Page = resp.NextPage
	}
}

// RunnerGroupRepositories lists the full names ("acme/app") of the
// repositories an organization's "selected" runner group admits.
func (c *Client) RunnerGroupRepositories(ctx context.Context, org string, groupID int64) ([]string, error) {
	o, err := ParseOwner(org)
	if err != nil {
		return nil, err
	}
	cl, err := c.forOwner(ctx, o)
	if err != nil {
		return nil, err
	}
	var out []string
	opts := &gh.ListOptions{PerPage: 100}
	for {
		page, resp, err := cl.Actions.ListRepositoryAccessRunnerGroup(ctx, o.Org, groupID, opts)
		if err != nil {
			return nil, fmt.Errorf("list the repositories of runner group %d of %s: %w", groupID, o, classify(err))
		}
		for _, r := range page.Repositories {
			out = append(out, r.GetFullName())
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// RepositoryPublic says whether a repository ("acme/app") is public.
func (c *Client) RepositoryPublic(ctx context.Context, repo string) (bool, error) {
	o, cl, err := c.owner(ctx, repo)
	if err != nil {
		return false, err
	}
	if !o.IsRepo() {
		return false, fmt.Errorf("repository %q: want owner/name", repo)
	}
	r, _, err := cl.Repositories.Get(ctx, o.Org, o.Repo)
	if err != nil {
		return false, fmt.Errorf("get repository %s: %w", o, classify(err))
	}
	return r.GetVisibility() == "public" || r.Visibility == nil && !r.GetPrivate(), nil
}
