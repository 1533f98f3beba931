package fakegithub

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Repositories, as far as runner-group access needs them: GET
// /repos/{owner}/{repo} (full-repository: private and visibility say
// whether it is public; every App may read a repository's metadata) and
// GET /orgs/{org}/actions/runner-groups/{runner_group_id}/repositories
// (minimal-repository; the App needs the organization's self-hosted
// runners permission, as for every runner-group route: GitHub's REST
// docs, "Self-hosted runner groups"). A repository of an organization
// the fake knows exists (knownOwner), private unless
// SetRepositoryVisibility said otherwise; its id is the fake's own,
// stable for the server's life.

// repoID is the id of org's repository name. Called with s.mu held.
func (s *Server) repoID(org, name string) int64 {
	key := strings.ToLower(org + "/" + name)
	if id, ok := s.repoIDs[key]; ok {
		return id
	}
	id := int64(7000 + len(s.repoIDs))
	s.repoIDs[key] = id
	return id
}

// repositoryJSON is a minimal-repository: every field the description
// requires, and private and visibility.
func (s *Server) repositoryJSON(r *http.Request, org, name string) map[string]any {
	api, web := apiRoot(r), webRoot(r)
	full := org + "/" + name
	base := api + "repos/" + full
	id := s.repoID(org, name)
	visibility := "private"
	if s.public(org, name) {
		visibility = "public"
	}
	m := map[string]any{
		"id": id, "node_id": nodeID("Repository", id), "name": name, "full_name": full,
		"owner": account(r, org, 5000, "Organization"), "private": visibility == "private", "visibility": visibility,
		"html_url": web + full, "description": nil, "fork": false, "url": base,
	}
	for _, f := range []string{"archive_url:/{archive_format}{/ref}", "assignees_url:/assignees{/user}", "blobs_url:/git/blobs{/sha}",
		"branches_url:/branches{/branch}", "collaborators_url:/collaborators{/collaborator}", "comments_url:/comments{/number}",
		"commits_url:/commits{/sha}", "compare_url:/compare/{base}...{head}", "contents_url:/contents/{+path}",
		"contributors_url:/contributors", "deployments_url:/deployments", "downloads_url:/downloads", "events_url:/events",
		"forks_url:/forks", "git_commits_url:/git/commits{/sha}", "git_refs_url:/git/refs{/sha}", "git_tags_url:/git/tags{/sha}",
		"hooks_url:/hooks", "issue_comment_url:/issues/comments{/number}", "issue_events_url:/issues/events{/number}",
		"issues_url:/issues{/number}", "keys_url:/keys{/key_id}", "labels_url:/labels{/name}", "languages_url:/languages",
		"merges_url:/merges", "milestones_url:/milestones{/number}", "notifications_url:/notifications{?since,all,participating}",
		"pulls_url:/pulls{/number}", "releases_url:/releases{/id}", "stargazers_url:/stargazers", "statuses_url:/statuses/{sha}",
		"subscribers_url:/subscribers", "subscription_url:/subscription", "tags_url:/tags", "teams_url:/teams", "trees_url:/git/trees{/sha}",
	} {
		k, path, _ := strings.Cut(f, ":")
		m[k] = base + path
	}
	return m
}

// getRepository: GET /repos/{owner}/{repo}, a full-repository.
func (s *Server) getRepository(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	org, name := r.PathValue("org"), r.PathValue("repo")
	if status, body, ok := s.ownerDenied(r, org+"/"+name); !ok {
		return status, body
	}
	m := s.repositoryJSON(r, org, name)
	web := webRoot(r)
	host := strings.TrimSuffix(strings.TrimPrefix(web, "http://"), "/")
	for k, v := range map[string]any{
		"archived": false, "disabled": false, "default_branch": "main", "homepage": nil, "language": nil, "license": nil, "mirror_url": nil,
		"clone_url": web + org + "/" + name + ".git", "git_url": "git://" + host + "/" + org + "/" + name + ".git",
		"ssh_url": "git@" + host + ":" + org + "/" + name + ".git", "svn_url": web + org + "/" + name,
		"created_at": created, "updated_at": created, "pushed_at": created,
		"has_discussions": false, "has_issues": true, "has_pages": false, "has_projects": false, "has_wiki": false,
		"forks": 0, "forks_count": 0, "network_count": 0, "open_issues": 0, "open_issues_count": 0, "size": 0,
		"stargazers_count": 0, "subscribers_count": 0, "watchers": 0, "watchers_count": 0,
	} {
		m[k] = v
	}
	return http.StatusOK, m
}

// listGroupRepositories: GET /orgs/{org}/actions/runner-groups/{id}/repositories,
// the repositories a "selected" group admits. What GitHub answers for a
// group of another visibility is not documented: the fake answers none.
func (s *Server) listGroupRepositories(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	org := r.PathValue("org")
	if status, body, ok := s.ownerDenied(r, org); !ok {
		return status, body
	}
	name, ok := s.groupName(org, idParam(r, "id"))
	if !ok {
		return notFound()
	}
	var names []string
	if a := s.accessOf(org, name); a.Visibility == "selected" {
		names = slices.Clone(a.Repositories)
	}
	start, end := paginate(w, r, len(names))
	list := []map[string]any{}
	for _, n := range names[start:end] {
		list = append(list, s.repositoryJSON(r, org, n))
	}
	return http.StatusOK, map[string]any{"total_count": len(names), "repositories": list}
}

// groupAccessJSON adds whom a group admits to its runner-groups-org
// object. Called with s.mu held.
func (s *Server) groupAccessJSON(r *http.Request, org string, id int, name string, g map[string]any) {
	a := s.accessOf(org, name)
	g["visibility"], g["allows_public_repositories"] = a.Visibility, a.AllowsPublicRepositories
	g["restricted_to_workflows"], g["selected_workflows"] = a.RestrictedToWorkflows, append([]string{}, a.SelectedWorkflows...)
	if a.Visibility == "selected" {
		g["selected_repositories_url"] = fmt.Sprintf("%sorgs/%s/actions/runner-groups/%d/repositories", apiRoot(r), strings.ToLower(org), id)
	}
}
