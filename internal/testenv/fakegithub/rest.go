package fakegithub

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// tokenTTL: registration, remove and installation tokens all live an hour.
const tokenTTL = time.Hour

func (s *Server) getApp(w http.ResponseWriter, r *http.Request) (int, any) {
	return http.StatusOK, s.appJSON(r)
}

// findInstallation: GET /orgs/{org}/installation and
// GET /repos/{owner}/{repo}/installation.
func (s *Server) findInstallation(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner := ownerOf(r)
	var found *installation
	for _, in := range s.installations {
		if r.PathValue("repo") == "" && sameOwner(in.account, owner) || r.PathValue("repo") != "" && in.covers(owner) {
			found = in
			break
		}
	}
	if found == nil {
		return notFound()
	}
	return http.StatusOK, s.installationJSON(r, found)
}

// accessToken: POST /app/installations/{id}/access_tokens.
func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) (int, any) {
	id := idParam(r, "id")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.installations {
		if in.id != id {
			continue
		}
		tok := randomToken("ghs_")
		exp := s.now().Add(tokenTTL)
		s.instTokens[tok] = tokenInfo{owner: in.account, purpose: "installation", install: in, expires: exp}
		selection := "all"
		if in.repos != nil {
			selection = "selected"
		}
		return http.StatusCreated, map[string]any{
			"token":                tok,
			"expires_at":           exp.UTC().Format(time.RFC3339),
			"permissions":          s.permissions(),
			"repository_selection": selection,
		}
	}
	return notFound()
}

// knownOwner: the organization exists (repositories of an existing
// organization are taken to exist).
func (s *Server) knownOwner(owner string) bool {
	org, _, _ := strings.Cut(owner, "/")
	return s.orgs[strings.ToLower(org)]
}

// createRunnerToken: POST .../actions/runners/registration-token and
// .../remove-token → 201 {token, expires_at}.
func (s *Server) createRunnerToken(purpose string) handler {
	return func(w http.ResponseWriter, r *http.Request) (int, any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		owner := ownerOf(r)
		if status, body, ok := s.ownerDenied(r, owner); !ok {
			return status, body
		}
		if status, body, ok := s.runnersDenied(r, owner); !ok {
			return status, body
		}
		tok := randomToken("A")[:29]
		exp := s.now().Add(tokenTTL)
		s.runnerTokens[tok] = tokenInfo{owner: owner, purpose: purpose, expires: exp}
		return http.StatusCreated, map[string]any{"token": tok, "expires_at": exp.UTC().Format(time.RFC3339)}
	}
}

func (s *Server) runnerJSON(rn *runner) map[string]any {
	labels := make([]map[string]any, len(rn.labels))
	for i, l := range rn.labels {
		kind := "custom"
		if l == "self-hosted" || l == "Linux" || l == "X64" {
			kind = "read-only"
		}
		labels[i] = map[string]any{"id": i + 1, "name": l, "type": kind}
	}
	status := "offline"
	if s.online(rn) {
		status = "online"
	}
	return map[string]any{"id": rn.id, "name": rn.name, "os": rn.os, "status": status, "busy": rn.busy, "labels": labels, "runner_group_id": s.groupID(rn), "ephemeral": rn.jit}
}

// pageParams reads GitHub's pagination parameters: per_page (default 30,
// at most 100) and page (from 1).
func pageParams(r *http.Request) (perPage, page int) {
	perPage, page = 30, 1
	if v, err := strconv.Atoi(query(r, "per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(query(r, "page")); err == nil && v > 0 {
		page = v
	}
	return perPage, page
}

// paginate returns the page's slice bounds and writes the Link header.
func paginate(w http.ResponseWriter, r *http.Request, total int) (start, end int) {
	perPage, page := pageParams(r)
	start = min((page-1)*perPage, total)
	end = min(start+perPage, total)
	last := max((total+perPage-1)/perPage, 1)
	prefix, _ := r.Context().Value(prefixKey{}).(string)
	link := func(p int, rel string) string {
		q := r.URL.Query()
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(perPage))
		u := url.URL{Scheme: "http", Host: r.Host, Path: prefix + r.URL.Path, RawQuery: q.Encode()}
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var parts []string
	if page > 1 {
		parts = append(parts, link(page-1, "prev"))
	}
	if page < last {
		parts = append(parts, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		parts = append(parts, link(1, "first"))
	}
	if len(parts) > 0 {
		w.Header().Set("Link", strings.Join(parts, ", "))
	}
	return start, end
}

// listRunners: GET .../actions/runners?name=&per_page=&page=.
func (s *Server) listRunners(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner := ownerOf(r)
	if status, body, ok := s.ownerDenied(r, owner); !ok {
		return status, body
	}
	s.expireJIT()
	name := ""
	if s.features.nameFilter {
		name = query(r, "name")
	}
	var mine []*runner
	for _, rn := range s.runners {
		if sameOwner(rn.owner, owner) && (name == "" || rn.name == name) {
			mine = append(mine, rn)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].id < mine[j].id })
	start, end := paginate(w, r, len(mine))
	list := make([]map[string]any, 0, end-start)
	for _, rn := range mine[start:end] {
		list = append(list, s.runnerJSON(rn))
	}
	return http.StatusOK, map[string]any{"total_count": len(mine), "runners": list}
}

func (s *Server) findRunner(r *http.Request) *runner {
	rn, ok := s.runners[idParam(r, "id")]
	if !ok || !sameOwner(rn.owner, ownerOf(r)) {
		return nil
	}
	return rn
}

// runnerOf finds the runner a request names, or the answer GitHub gives
// when it cannot: 404 for an unknown owner or runner, 403 for a token of
// another installation. The caller holds s.mu.
func (s *Server) runnerOf(r *http.Request) (*runner, int, any) {
	if !s.knownOwner(ownerOf(r)) {
		status, body := notFound()
		return nil, status, body
	}
	if !s.authorized(r, ownerOf(r)) {
		status, body := forbidden()
		return nil, status, body
	}
	s.expireJIT()
	if rn := s.findRunner(r); rn != nil {
		return rn, 0, nil
	}
	status, body := notFound()
	return nil, status, body
}

// getRunner: GET .../actions/runners/{id}.
func (s *Server) getRunner(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, status, body := s.runnerOf(r)
	if rn == nil {
		return status, body
	}
	return http.StatusOK, s.runnerJSON(rn)
}

// busyRunner is GitHub's answer to deleting a runner with a job under way
// (its message's stray quote included); config.sh remove gets it too.
func busyRunner(rn *runner) (int, any) {
	return http.StatusUnprocessableEntity, map[string]any{
		"message":           fmt.Sprintf("Bad request - Runner %q is still running a job\"", rn.name),
		"documentation_url": "https://docs.github.com/rest/actions/self-hosted-runners#delete-a-self-hosted-runner-from-an-organization",
		"status":            "422",
	}
}

// deleteRunner: DELETE .../actions/runners/{id} → 204; 404 unknown; 422
// while the runner runs a job, with GitHub's message (quote included).
func (s *Server) deleteRunner(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, status, body := s.runnerOf(r)
	if rn == nil {
		return status, body
	}
	if rn.busy {
		return busyRunner(rn)
	}
	delete(s.runners, rn.id)
	s.unregistered(rn.id, "api")
	s.wake() // a listener long-polling for this runner learns at once
	return http.StatusNoContent, nil
}

// listGroups: GET /orgs/{org}/actions/runner-groups.
func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	org := r.PathValue("org")
	if status, body, ok := s.ownerDenied(r, org); !ok {
		return status, body
	}
	names := s.groups[strings.ToLower(org)]
	start, end := paginate(w, r, len(names))
	list := []map[string]any{}
	for i := start; i < end; i++ {
		g := runnerGroupJSON(r, org, i+1, names[i])
		s.groupAccessJSON(r, org, i+1, names[i], g)
		list = append(list, g)
	}
	return http.StatusOK, map[string]any{"total_count": len(names), "runner_groups": list}
}
