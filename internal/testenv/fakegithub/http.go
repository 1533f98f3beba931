package fakegithub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// handler answers one request: a status and a JSON body (nil for none).
type handler func(w http.ResponseWriter, r *http.Request) (int, any)

// Authentication a route needs.
const (
	authNone   = ""
	authJWT    = "jwt"    // the App's JWT
	authToken  = "token"  // an installation token or a PAT
	authRemote = "remote" // a runner registration or remove token ("RemoteAuth")
	authRunner = "runner" // the private runner protocol: what the route checks itself
)

type prefixKey struct{}

// routeKey holds the Route a request came in on.
type routeKey struct{}

// query reads a query parameter the request's route declared.
func query(r *http.Request, name string) string {
	rt, _ := r.Context().Value(routeKey{}).(Route)
	if !slices.Contains(rt.Query, name) {
		panic(fmt.Sprintf("fakegithub: route %q reads query parameter %q, which it does not declare", rt.Pattern, name))
	}
	return r.URL.Query().Get(name)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// query lists the query parameters a route reads (query() refuses
	// any other), so the conformance suite can hold them to the
	// description.
	route := func(pattern, auth string, h handler, query ...string) {
		rt := Route{Pattern: pattern, Query: query}
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			s.serve(pattern, auth, h, w, r.WithContext(context.WithValue(r.Context(), routeKey{}, rt)))
		})
		if auth == authJWT || auth == authToken {
			s.served = append(s.served, rt)
		}
	}
	listQuery := []string{"per_page", "page"}
	if s.features.nameFilter {
		listQuery = append(listQuery, "name")
	}
	route("GET /app", authJWT, s.getApp)
	route("GET /orgs/{org}/installation", authJWT, s.findInstallation)
	route("GET /repos/{org}/{repo}/installation", authJWT, s.findInstallation)
	route("POST /app/installations/{id}/access_tokens", authJWT, s.accessToken)
	for _, scope := range []string{"/orgs/{org}", "/repos/{org}/{repo}"} {
		route("POST "+scope+"/actions/runners/registration-token", authToken, s.createRunnerToken("register"))
		route("POST "+scope+"/actions/runners/remove-token", authToken, s.createRunnerToken("remove"))
		route("GET "+scope+"/actions/runners", authToken, s.listRunners, listQuery...)
		route("GET "+scope+"/actions/runners/{id}", authToken, s.getRunner)
		route("DELETE "+scope+"/actions/runners/{id}", authToken, s.deleteRunner)
		if s.features.jit {
			route("POST "+scope+"/actions/runners/generate-jitconfig", authToken, s.generateJITConfig)
		}
	}
	route("GET /orgs/{org}/actions/runner-groups", authToken, s.listGroups, "per_page", "page")
	route("GET /orgs/{org}/actions/runner-groups/{id}/repositories", authToken, s.listGroupRepositories, "per_page", "page")
	route("GET /repos/{org}/{repo}", authToken, s.getRepository)
	route("POST /repos/{org}/{repo}/actions/runs/{run_id}/rerun-failed-jobs", authToken, s.rerunFailedJobs)
	route(CountLatestRelease, authToken, s.latestRelease)
	for _, pattern := range s.extra {
		route(pattern, authToken, func(http.ResponseWriter, *http.Request) (int, any) { return http.StatusOK, map[string]any{} })
	}
	// The endpoint config.sh exchanges its token at.
	route("POST /actions/runner-registration", authRemote, s.runnerRegistration)
	// The private runner protocol.
	route("POST /_fake/runners", authRunner, s.runnerAdd)
	route("DELETE /_fake/runners/{id}", authRunner, s.runnerDelete)
	route("POST /_fake/runners/{id}/session", authRunner, s.sessionCreate)
	route("DELETE /_fake/runners/{id}/session", authRunner, s.sessionDelete)
	route("POST /_fake/runners/{id}/heartbeat", authRunner, s.heartbeat)
	route("POST /_fake/runners/{id}/poll", authRunner, s.poll)
	route("POST /_fake/jobs/{id}/start", authRunner, s.jobStart)
	route("POST /_fake/jobs/{id}/complete", authRunner, s.jobComplete)
	// The Actions service side of runner scale sets (scaleset_routes.go).
	s.scaleSetRoutes(route)
	// The Actions OIDC issuer and the runtime's token endpoint (oidc.go).
	s.oidcRoutes(mux)
	// Release downloads, on github.com's paths (releases.go).
	mux.HandleFunc("GET /actions/runner/releases/download/{tag}/{asset}", s.releaseDownload)
	mux.HandleFunc("GET /_fake/release-assets/{tag}/{asset}", s.releaseAsset)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, apiError(http.StatusNotFound, "Not Found"))
	})
	// GitHub Enterprise Server serves the same API under /api/v3.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/api/v3"); ok && (rest == "" || rest[0] == '/') {
			r = r.WithContext(context.WithValue(r.Context(), prefixKey{}, "/api/v3"))
			r.URL.Path = rest
			r.URL.RawPath = ""
		}
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) serve(pattern, auth string, h handler, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-GitHub-Request-Id", strings.ToUpper(randomToken("")[:20]))
	api := !strings.Contains(pattern, " /_fake/")
	s.mu.Lock()
	s.counts[pattern]++
	fault := s.takeFault(r, api)
	s.mu.Unlock()
	if fault != nil && fault.Latency > 0 {
		select {
		case <-time.After(fault.Latency):
		case <-r.Context().Done():
			return
		}
	}
	if fault != nil && fault.Status != 0 {
		s.writeFault(w, fault)
		return
	}
	if api {
		s.mu.Lock()
		s.rollRateWindow()
		s.rateUsed++
		exhausted := s.rateUsed > s.rateLimit
		s.rateHeaders(w, exhausted)
		s.mu.Unlock()
		if exhausted {
			writeJSON(w, http.StatusForbidden, map[string]any{
				"message":           "API rate limit exceeded for installation. If you reach out to GitHub Support for help, please include the request ID.",
				"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
				"status":            "403",
			})
			return
		}
	}
	var authErr string
	switch auth {
	case authJWT:
		authErr = s.checkJWT(r)
	case authToken:
		authErr = s.checkToken(r)
	}
	if authErr != "" {
		writeJSON(w, http.StatusUnauthorized, apiError(http.StatusUnauthorized, authErr))
		return
	}
	status, body := h(w, r)
	if s.rewrite != nil && api {
		status, body = s.rewrite(pattern, status, body)
	}
	if body == nil {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, body)
}

// takeFault finds the fault that hits this request, if any, and uses it up.
func (s *Server) takeFault(r *http.Request, api bool) *Fault {
	for i, f := range s.faults {
		if f.Method != "" && !strings.EqualFold(f.Method, r.Method) {
			continue
		}
		if !api && !strings.Contains(f.Path, "/_fake") || !strings.Contains(r.URL.Path, f.Path) {
			continue
		}
		if f.Fraction > 0 && s.rng.Float64() >= f.Fraction {
			continue
		}
		if f.Count > 0 {
			f.Count--
			if f.Count == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
		}
		return f
	}
	return nil
}

func (s *Server) writeFault(w http.ResponseWriter, f *Fault) {
	s.mu.Lock()
	s.rollRateWindow()
	s.rateHeaders(w, f.Primary)
	s.mu.Unlock()
	if f.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
	}
	msg := http.StatusText(f.Status)
	doc := "https://docs.github.com/rest"
	switch {
	case f.Primary:
		msg = "API rate limit exceeded for installation. If you reach out to GitHub Support for help, please include the request ID."
		doc = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
	case f.Secondary || f.RetryAfter > 0:
		msg = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID."
		doc = "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
	}
	writeJSON(w, f.Status, map[string]any{"message": msg, "documentation_url": doc, "status": strconv.Itoa(f.Status)})
}

// rollRateWindow starts a new hour once the reset time has passed.
func (s *Server) rollRateWindow() {
	if now := s.now(); !now.Before(s.rateReset) {
		s.rateUsed = 0
		s.rateReset = now.Add(time.Hour)
	}
}

func (s *Server) rateHeaders(w http.ResponseWriter, exhausted bool) {
	remaining := max(s.rateLimit-s.rateUsed, 0)
	if exhausted {
		remaining = 0
	}
	h := w.Header()
	h.Set("X-Ratelimit-Limit", strconv.Itoa(s.rateLimit))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-Ratelimit-Used", strconv.Itoa(s.rateLimit-remaining))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(s.rateReset.Unix(), 10))
	h.Set("X-Ratelimit-Resource", "core")
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

func apiError(status int, msg string) map[string]any {
	return map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(status)}
}

func notFound() (int, any) { return http.StatusNotFound, apiError(http.StatusNotFound, "Not Found") }

// checkJWT verifies an App JWT as GitHub does: RS256, signed with the App's
// key, issuer = App id, issued in the past, expiring in the future and at
// most 10 minutes after it was issued. The fake's clock decides.
func (s *Server) checkJWT(r *http.Request) string {
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return "A JSON web token could not be decoded"
	}
	claims := jwt.MapClaims{}
	parser := jwt.NewParser(jwt.WithoutClaimsValidation(), jwt.WithValidMethods([]string{"RS256"}))
	if _, err := parser.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return s.appKey, nil }); err != nil {
		return "A JSON web token could not be decoded"
	}
	var iss string
	switch v := claims["iss"].(type) {
	case string:
		iss = v
	case float64:
		iss = strconv.FormatInt(int64(v), 10)
	}
	if iss != strconv.FormatInt(s.AppID, 10) {
		return "Integration not found"
	}
	iat, iatOK := claims["iat"].(float64)
	exp, expOK := claims["exp"].(float64)
	s.mu.Lock()
	now := s.now()
	s.mu.Unlock()
	switch {
	case !iatOK || time.Unix(int64(iat), 0).After(now):
		return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued."
	case !expOK || time.Unix(int64(exp), 0).Before(now):
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires."
	case exp-iat > 600:
		return "'Expiration time' claim ('exp') is too far in the future."
	}
	return ""
}

// checkToken accepts a personal access token, or an unexpired installation
// token of an installation covering the path's owner.
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
	if !ok || !info.expires.After(s.now()) {
		return "Bad credentials"
	}
	return ""
}

// authorized says whether the request's token may act on owner; GitHub
// answers 403 "Resource not accessible by integration" otherwise.
func (s *Server) authorized(r *http.Request, owner string) bool {
	tok := strings.TrimPrefix(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), "token ")
	if s.pats[tok] {
		return true
	}
	info, ok := s.instTokens[tok]
	return ok && info.install.covers(owner)
}

// ownerDenied answers a request about owner as GitHub does when the owner
// is unknown (404) or the credentials do not cover it (403); ok when
// neither. The caller holds s.mu.
func (s *Server) ownerDenied(r *http.Request, owner string) (status int, body any, ok bool) {
	if !s.knownOwner(owner) {
		status, body = notFound()
		return status, body, false
	}
	if !s.authorized(r, owner) {
		status, body = forbidden()
		return status, body, false
	}
	return 0, nil, true
}

func forbidden() (int, any) {
	return http.StatusForbidden, apiError(http.StatusForbidden, "Resource not accessible by integration")
}

// ownerOf is the owner a request's path is about: "org" or "org/repo".
func ownerOf(r *http.Request) string {
	if repo := r.PathValue("repo"); repo != "" {
		return r.PathValue("org") + "/" + repo
	}
	return r.PathValue("org")
}

// sameOwner compares owners as GitHub compares logins: without regard to case.
func sameOwner(a, b string) bool { return strings.EqualFold(a, b) }

func idParam(r *http.Request, name string) int64 {
	id, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil {
		return -1
	}
	return id
}

func decode(r *http.Request, v any) error {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return fmt.Errorf("Problems parsing JSON: %v", err)
	}
	return nil
}
