package fakegithub

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// checkJWT verifies an App JWT as GitHub does: RS256 signed by the App's
// key, issuer = App id, issued in the past, expiring within 10 minutes.
func (s *Server) checkJWT(r *http.Request) string {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "A JSON web token could not be decoded"
	}
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
		if _, ok := t.Method.(*jwt.SigningMethodRSA); !ok {
			return nil, fmt.Errorf("unexpected signing method %v", t.Header["alg"])
		}
		return s.appKey, nil
	})
	if err != nil {
		return "A JSON web token could not be decoded: " + err.Error()
	}
	s.mu.Lock()
	now := s.now()
	s.mu.Unlock()
	if claims.Issuer != strconv.FormatInt(s.AppID, 10) {
		return "Integration not found"
	}
	if claims.ExpiresAt == nil || claims.IssuedAt == nil || claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 10*time.Minute+time.Second {
		return "'Expiration time' claim ('exp') is too far in the future"
	}
	if claims.ExpiresAt.Before(now) {
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	}
	return ""
}

// checkToken accepts an unexpired installation token of the owner's
// organization, or a personal access token.
func (s *Server) checkToken(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		tok, ok = strings.CutPrefix(auth, "token ")
	}
	if !ok || tok == "" {
		return "Requires authentication"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pats[tok] {
		return ""
	}
	info, ok := s.instTokens[tok]
	if !ok || info.expires.Before(s.now()) {
		return "Bad credentials"
	}
	if org := r.PathValue("org"); org != "" && org != info.owner {
		return "Resource not accessible by integration"
	}
	return ""
}

func (s *Server) findInstallation(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.installations[r.PathValue("org")]
	if !ok {
		return notFound()
	}
	return http.StatusOK, map[string]any{"id": id, "app_id": s.AppID, "account": map[string]any{"login": r.PathValue("org")}}
}

func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) (int, any) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	for org, inst := range s.installations {
		if inst == id {
			tok := randomToken("ghs")
			exp := s.now().Add(time.Hour)
			s.instTokens[tok] = tokenInfo{owner: org, install: id, expires: exp}
			return http.StatusCreated, map[string]any{"token": tok, "expires_at": exp.UTC().Format(time.RFC3339)}
		}
	}
	return notFound()
}

func (s *Server) createToken(registration bool) handler {
	return func(w http.ResponseWriter, r *http.Request) (int, any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		owner := ownerOf(r)
		if _, ok := s.installations[orgOf(owner)]; !ok && len(s.pats) == 0 {
			return notFound()
		}
		tok := randomToken("A")
		exp := s.now().Add(time.Hour)
		if registration {
			s.regTokens[tok] = tokenInfo{owner: owner, expires: exp}
		} else {
			s.removeTokens[tok] = tokenInfo{owner: owner, expires: exp}
		}
		return http.StatusCreated, map[string]any{"token": tok, "expires_at": exp.UTC().Format(time.RFC3339)}
	}
}

func (s *Server) runnerJSON(rn *runner) map[string]any {
	labels := make([]map[string]any, len(rn.labels))
	for i, l := range rn.labels {
		labels[i] = map[string]any{"id": i + 1, "name": l, "type": "custom"}
	}
	status := "offline"
	if s.online(rn) {
		status = "online"
	}
	return map[string]any{"id": rn.id, "name": rn.name, "os": rn.os, "status": status, "busy": rn.busy, "labels": labels}
}

// pageParams reads GitHub's pagination parameters: per_page (default 30,
// at most 100) and page (from 1).
func pageParams(r *http.Request) (perPage, page int) {
	perPage, page = 30, 1
	if v, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && v > 0 {
		page = v
	}
	return perPage, page
}

func (s *Server) listRunners(w http.ResponseWriter, r *http.Request) (int, any) {
	perPage, page := pageParams(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	owner := ownerOf(r)
	var mine []*runner
	for _, rn := range s.runners {
		if rn.owner == owner {
			mine = append(mine, rn)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].id < mine[j].id })
	start := min((page-1)*perPage, len(mine))
	end := min(start+perPage, len(mine))
	list := make([]map[string]any, 0, end-start)
	for _, rn := range mine[start:end] {
		list = append(list, s.runnerJSON(rn))
	}
	last := max((len(mine)+perPage-1)/perPage, 1)
	setLinks(w, r, page, last, perPage)
	return http.StatusOK, map[string]any{"total_count": len(mine), "runners": list}
}

// setLinks writes GitHub's pagination Link header.
func setLinks(w http.ResponseWriter, r *http.Request, page, last, perPage int) {
	link := func(p int, rel string) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		u.RawQuery = url.Values{"page": {strconv.Itoa(p)}, "per_page": {strconv.Itoa(perPage)}}.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var parts []string
	if page < last {
		parts = append(parts, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		parts = append(parts, link(page-1, "prev"), link(1, "first"))
	}
	if len(parts) > 0 {
		w.Header().Set("Link", strings.Join(parts, ", "))
	}
}

func (s *Server) findRunner(r *http.Request) *runner {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	rn, ok := s.runners[id]
	if !ok || rn.owner != ownerOf(r) {
		return nil
	}
	return rn
}

func (s *Server) getRunner(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.findRunner(r)
	if rn == nil {
		return notFound()
	}
	return http.StatusOK, s.runnerJSON(rn)
}

func (s *Server) deleteRunner(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn := s.findRunner(r)
	if rn == nil {
		return notFound()
	}
	if rn.busy {
		return http.StatusUnprocessableEntity, map[string]any{
			"message":           fmt.Sprintf("Bad request - Runner \"%s\" is still running a job\"", rn.name),
			"documentation_url": "https://docs.github.com/rest/actions/self-hosted-runners#delete-a-self-hosted-runner-from-an-organization",
		}
	}
	delete(s.runners, rn.id)
	return http.StatusNoContent, nil
}

func (s *Server) listGroups(w http.ResponseWriter, r *http.Request) (int, any) {
	perPage, page := pageParams(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	names := s.groups[r.PathValue("org")]
	start := min((page-1)*perPage, len(names))
	end := min(start+perPage, len(names))
	list := []map[string]any{}
	for i := start; i < end; i++ {
		list = append(list, map[string]any{"id": i + 1, "name": names[i], "visibility": "all", "default": i == 0})
	}
	setLinks(w, r, page, max((len(names)+perPage-1)/perPage, 1), perPage)
	return http.StatusOK, map[string]any{"total_count": len(names), "runner_groups": list}
}
