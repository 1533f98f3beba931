package fakegithub

import (
	"slices"
	"strings"
	"time"
)

// Runner-group access: which repositories' jobs the runners of an
// organization's group may take. The facts, and where each comes from:
//
//   - The group's fields are GitHub's runner-groups-org object
//     (@octokit/openapi, components/schemas/runner-groups-org): visibility,
//     allows_public_repositories, restricted_to_workflows,
//     selected_workflows, and selected_repositories_url, "not present
//     unless visibility was set to `selected`". Creating a group
//     (POST /orgs/{org}/actions/runner-groups) takes visibility "all" (the
//     default), "selected" or "private": "select all repositories, select
//     individual repositories, or limit access to private repositories";
//     allows_public_repositories defaults to false. A selected workflow is
//     "octo-org/octo-repo/.github/workflows/deploy.yaml@main": "a ref, tag,
//     or long SHA is required".
//   - A selected group's repositories are listed by
//     GET /orgs/{org}/actions/runner-groups/{runner_group_id}/repositories
//     (repos.go).
//   - Every organization has one default group, "Default"; a runner
//     registered without a group joins it; by default only private
//     repositories may use a group's runners ("Managing access to
//     self-hosted runners using groups", GitHub's docs). The Default
//     group's visibility is "all".
//   - A repository's own runners serve that repository alone; runner
//     groups belong to organizations.
//   - A job no runner will take stays queued, waiting for a matching runner
//     to come online, and fails after 24 hours queued ("Choosing the runner
//     for a job", routing of self-hosted runner jobs). The docs do not say
//     that a job no runner group admits is treated the same way; the fake
//     keeps it queued, and its 24-hour failure is not modelled.
//   - How GitHub compares a job's workflow ref with selected_workflows
//     (refs/heads/main against main, letter case) is not documented: the
//     fake compares the workflow path without regard to case and the ref
//     after dropping refs/heads/ or refs/tags/.

// GroupAccess is whom a runner group admits.
type GroupAccess struct {
	// Visibility: "all" (every repository of the organization), "selected"
	// (Repositories) or "private" (private repositories only).
	Visibility               string
	AllowsPublicRepositories bool
	// Repositories are the names, without the organization, of the
	// repositories a "selected" group admits.
	Repositories []string
	// RestrictedToWorkflows limits the group to SelectedWorkflows
	// ("org/repo/.github/workflows/ci.yml@main").
	RestrictedToWorkflows bool
	SelectedWorkflows     []string
}

// defaultAccess is a group's access until SetRunnerGroupAccess: every
// repository of the organization, no public one.
var defaultAccess = GroupAccess{Visibility: "all"}

// Admits says whether the group admits a job of repository repo (its
// name, without the organization), public or not, from workflow (a
// workflow ref; "": the job names none, and workflow restrictions are not
// applied to it).
func (a GroupAccess) Admits(repo string, public bool, workflow string) bool {
	switch {
	case public && (!a.AllowsPublicRepositories || a.Visibility == "private"):
		return false
	case a.Visibility == "selected" && !slices.ContainsFunc(a.Repositories, func(r string) bool { return strings.EqualFold(r, repo) }):
		return false
	case a.RestrictedToWorkflows && workflow != "" && !slices.ContainsFunc(a.SelectedWorkflows, func(w string) bool { return sameWorkflow(w, workflow) }):
		return false
	}
	return true
}

// sameWorkflow compares two workflow refs (see the package's notes above).
func sameWorkflow(a, b string) bool {
	pa, ra, _ := strings.Cut(a, "@")
	pb, rb, _ := strings.Cut(b, "@")
	short := func(ref string) string {
		ref, _ = strings.CutPrefix(ref, "refs/heads/")
		ref, _ = strings.CutPrefix(ref, "refs/tags/")
		return ref
	}
	return strings.EqualFold(pa, pb) && short(ra) == short(rb)
}

// SetRunnerGroupAccess sets whom org's runner group name admits (the
// Default group is named "Default").
func (s *Server) SetRunnerGroupAccess(org, name string, a GroupAccess) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(org)
	if _, ok := s.groups[key]; !ok {
		s.groups[key] = []string{"Default"}
	}
	a.Repositories, a.SelectedWorkflows = slices.Clone(a.Repositories), slices.Clone(a.SelectedWorkflows)
	s.groupAccess[strings.ToLower(org+"/"+name)] = a
}

// accessOf is whom org's group admits. Called with s.mu held.
func (s *Server) accessOf(org, group string) GroupAccess {
	if a, ok := s.groupAccess[strings.ToLower(org+"/"+group)]; ok {
		return a
	}
	return defaultAccess
}

// SetRepositoryVisibility makes repository repo ("acme/site") "public" or
// "private" (what every repository is until said otherwise).
func (s *Server) SetRepositoryVisibility(repo, visibility string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repoVisibility[strings.ToLower(repo)] = visibility
}

// public says whether org's repository repo is public. Called with s.mu
// held.
func (s *Server) public(org, repo string) bool {
	return s.repoVisibility[strings.ToLower(org+"/"+repo)] == "public"
}

// admits says whether a runner of owner ("acme", or "acme/api" for a
// repository's runners) in group may take job j. A job queued by
// EnqueueJob names no organization: it is taken for one of repository
// j.Repo of the runner's own organization. Called with s.mu held.
func (s *Server) admits(owner, group string, j *Job) bool {
	org, repo, isRepo := strings.Cut(owner, "/")
	switch {
	case j.Owner == "" && isRepo:
		return true
	case j.Owner != "" && !strings.EqualFold(j.Owner, org):
		return false
	case isRepo:
		return strings.EqualFold(j.Repo, repo)
	}
	return s.accessOf(org, group).Admits(j.Repo, s.public(org, j.Repo), j.Workflow)
}

// JobFrom is where a job comes from: its repository ("acme/web") and
// workflow ref ("": acme/web/.github/workflows/ci.yml@refs/heads/main).
type JobFrom struct {
	Repo, Workflow string
}

// EnqueueJobFrom queues a job as EnqueueJob does, from a repository of an
// organization: only a runner whose group admits that repository (and
// workflow) takes it, and, for a scale set's label, only a scale set
// whose group does. A job nothing admits stays queued.
func (s *Server) EnqueueJobFrom(from JobFrom, label, script string) int64 {
	org, repo, _ := strings.Cut(from.Repo, "/")
	if from.Workflow == "" {
		from.Workflow = defaultWorkflow(org, repo)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	j := &Job{ID: s.nextID, Label: label, Owner: org, Repo: repo, Workflow: from.Workflow, Script: script, State: JobQueued, Queued: time.Now(), done: make(chan struct{})}
	s.jobs[j.ID] = j
	s.routeToScaleSet(j)
	s.wake()
	return j.ID
}

// defaultWorkflow is the workflow ref of a job that names none.
func defaultWorkflow(org, repo string) string {
	return org + "/" + repo + "/.github/workflows/ci.yml@refs/heads/main"
}
