// Package fakegithub is a stateful fake of the parts of GitHub ghrunner
// uses, faithful to GitHub's documented REST behaviour: App JWTs verified
// with the App's public key, installation tokens with expiry, runner
// registration and remove tokens (1 h), runners with status, busy flag and
// labels, pagination with Link headers, 404 and 422 answers, rate-limit
// headers, and injectable faults. Nothing public emulates GitHub's runner
// API, so tests use this; a fake runner (fakerunner) speaks to it through a
// private protocol under /_fake/, and tests queue jobs per label.
package fakegithub

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is one fake GitHub.
type Server struct {
	srv *httptest.Server

	// AppID identifies the App whose key PrivateKeyPEM is.
	AppID         int64
	PrivateKeyPEM []byte
	appKey        *rsa.PublicKey

	mu            sync.Mutex
	now           func() time.Time
	nextID        int64
	installations map[string]int64 // organization → installation id
	instTokens    map[string]tokenInfo
	pats          map[string]bool
	regTokens     map[string]tokenInfo
	removeTokens  map[string]tokenInfo
	runners       map[int64]*runner
	groups        map[string][]string // organization → runner group names
	jobs          map[int64]*Job
	jobWake       chan struct{}
	faults        []*Fault
	counts        map[string]int
	rateLimit     int
	rateUsed      int
	rateReset     time.Time
	// OfflineAfter is how long a runner stays online without polling.
	OfflineAfter time.Duration
}

type tokenInfo struct {
	owner   string // organization, or organization/repository
	install int64
	expires time.Time
}

type runner struct {
	id         int64
	owner      string
	name       string
	os         string
	labels     []string
	busy       bool
	lastSeen   time.Time
	credential string
	group      string
}

// Job is a queued unit of work for runners with its label.
type Job struct {
	ID       int64
	Label    string
	Repo     string
	Script   string
	State    string // queued, running, completed, failed
	RunnerID int64
	Runner   string
	ExitCode int
	Output   string
	done     chan struct{}
	session  string // the run.sh session that took it
	acked    bool   // the runner confirmed it started the job
}

// Fault makes the next Count requests whose path contains Path fail.
type Fault struct {
	Path       string
	Count      int
	Status     int           // 500-599, or 403/429 for rate limits
	Primary    bool          // 403 with x-ratelimit-remaining 0
	RetryAfter int           // seconds, for secondary limits
	Latency    time.Duration // added before answering (with or without a failure)
}

// New starts a fake GitHub with one App installed on the given
// organizations.
func New(orgs ...string) *Server {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	s := &Server{
		AppID:         4242,
		PrivateKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		appKey:        &key.PublicKey,
		now:           time.Now,
		nextID:        100,
		installations: map[string]int64{},
		instTokens:    map[string]tokenInfo{},
		pats:          map[string]bool{},
		regTokens:     map[string]tokenInfo{},
		removeTokens:  map[string]tokenInfo{},
		runners:       map[int64]*runner{},
		groups:        map[string][]string{},
		jobs:          map[int64]*Job{},
		jobWake:       make(chan struct{}),
		counts:        map[string]int{},
		rateLimit:     5000,
		OfflineAfter:  5 * time.Second,
	}
	for i, org := range orgs {
		s.installations[org] = int64(1000 + i)
		s.groups[org] = []string{"Default"}
	}
	s.rateReset = s.now().Add(time.Hour)
	s.srv = httptest.NewServer(s.routes())
	return s
}

// URL is the server's root; as a GHES base URL use URL()+"/api/v3/".
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// SetClock replaces the server's clock (token expiry, online status).
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// AddToken makes a personal access token valid for every organization.
func (s *Server) AddToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pats[token] = true
}

// AddRunnerGroup adds a runner group to an organization.
func (s *Server) AddRunnerGroup(org, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[org] = append(s.groups[org], name)
}

// Inject adds a fault.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes the faults not used up yet.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// SetRateBudget sets the primary rate limit's remaining requests.
func (s *Server) SetRateBudget(remaining int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateUsed = s.rateLimit - remaining
	s.rateReset = reset
}

// Count returns how many requests matched a route pattern, e.g.
// "GET /orgs/{org}/actions/runners".
func (s *Server) Count(pattern string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[pattern]
}

// RunnerInfo is a runner as tests see it.
type RunnerInfo struct {
	ID     int64
	Owner  string
	Name   string
	Labels []string
	Online bool
	Busy   bool
}

// Runners lists the registered runners, by id.
func (s *Server) Runners() []RunnerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []RunnerInfo
	for _, r := range s.runners {
		out = append(out, RunnerInfo{ID: r.id, Owner: r.owner, Name: r.name, Labels: append([]string(nil), r.labels...), Online: s.online(r), Busy: r.busy})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// AddRunner registers a runner directly (no fake runner process), for tests
// of the REST side; it polls never, so it shows offline after OfflineAfter.
func (s *Server) AddRunner(owner, name string, busy bool, labels ...string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.runners[s.nextID] = &runner{id: s.nextID, owner: owner, name: name, os: "Linux", labels: labels, busy: busy, lastSeen: s.now(), credential: randomToken("cred")}
	return s.nextID
}

// SetBusy sets a runner's busy flag.
func (s *Server) SetBusy(id int64, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runners[id]; ok {
		r.busy = busy
	}
}

// EnqueueJob queues a job for runners with label; script runs under bash.
func (s *Server) EnqueueJob(label, script string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.jobs[s.nextID] = &Job{ID: s.nextID, Label: label, Repo: "repo", Script: script, State: "queued", done: make(chan struct{})}
	s.wake()
	return s.nextID
}

// Job returns a copy of a job.
func (s *Server) Job(id int64) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return Job{}, false
	}
	return *j, true
}

// WaitJob waits until a job completed and returns it.
func (s *Server) WaitJob(id int64, timeout time.Duration) (Job, error) {
	s.mu.Lock()
	j, ok := s.jobs[id]
	s.mu.Unlock()
	if !ok {
		return Job{}, fmt.Errorf("no job %d", id)
	}
	select {
	case <-j.done:
		got, _ := s.Job(id)
		return got, nil
	case <-time.After(timeout):
		got, _ := s.Job(id)
		return got, fmt.Errorf("job %d still %s after %s", id, got.State, timeout)
	}
}

func (s *Server) wake() {
	close(s.jobWake)
	s.jobWake = make(chan struct{})
}

func (s *Server) online(r *runner) bool { return s.now().Sub(r.lastSeen) < s.OfflineAfter }

func randomToken(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + "_" + strings.ToUpper(hex.EncodeToString(b[:]))
}

// --- HTTP plumbing -------------------------------------------------------

type handler func(w http.ResponseWriter, r *http.Request) (int, any)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(pattern string, auth string, h handler) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			s.serve(pattern, auth, h, w, r)
		})
	}
	api("GET /orgs/{org}/installation", "jwt", s.findInstallation)
	api("GET /repos/{org}/{repo}/installation", "jwt", s.findInstallation)
	api("POST /app/installations/{id}/access_tokens", "jwt", s.accessToken)
	for _, scope := range []string{"/orgs/{org}", "/repos/{org}/{repo}"} {
		api("POST "+scope+"/actions/runners/registration-token", "token", s.createToken(true))
		api("POST "+scope+"/actions/runners/remove-token", "token", s.createToken(false))
		api("GET "+scope+"/actions/runners", "token", s.listRunners)
		api("GET "+scope+"/actions/runners/{id}", "token", s.getRunner)
		api("DELETE "+scope+"/actions/runners/{id}", "token", s.deleteRunner)
	}
	api("GET /orgs/{org}/actions/runner-groups", "token", s.listGroups)
	mux.HandleFunc("POST /_fake/runners/register", s.runnerRegister)
	mux.HandleFunc("POST /_fake/runners/remove", s.runnerRemove)
	mux.HandleFunc("POST /_fake/runners/{id}/poll", s.runnerPoll)
	mux.HandleFunc("POST /_fake/jobs/{id}/start", s.jobStart)
	mux.HandleFunc("POST /_fake/jobs/{id}/complete", s.jobComplete)
	// GitHub Enterprise Server serves the same API under /api/v3.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, "/api/v3"); ok {
			r.URL.Path = rest
		}
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) serve(pattern, auth string, h handler, w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.counts[pattern]++
	fault := s.takeFault(r.URL.Path)
	s.mu.Unlock()
	if fault != nil && fault.Latency > 0 {
		time.Sleep(fault.Latency)
	}
	s.mu.Lock()
	if fault != nil && fault.Status != 0 {
		s.rateHeaders(w, fault.Primary)
		if fault.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(fault.RetryAfter))
		}
		s.mu.Unlock()
		msg := "Server Error"
		if fault.Primary {
			msg = "API rate limit exceeded"
		} else if fault.RetryAfter > 0 {
			msg = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
		}
		writeJSON(w, fault.Status, map[string]string{"message": msg, "documentation_url": "https://docs.github.com/rest"})
		return
	}
	s.rateUsed++
	exhausted := s.rateUsed > s.rateLimit
	s.rateHeaders(w, false)
	s.mu.Unlock()
	if exhausted {
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "API rate limit exceeded"})
		return
	}
	var authErr string
	switch auth {
	case "jwt":
		authErr = s.checkJWT(r)
	case "token":
		authErr = s.checkToken(r)
	}
	if authErr != "" {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": authErr, "documentation_url": "https://docs.github.com/rest"})
		return
	}
	status, body := h(w, r)
	if status == http.StatusNoContent {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, body)
}

func (s *Server) takeFault(path string) *Fault {
	for i, f := range s.faults {
		if f.Count > 0 && strings.Contains(path, f.Path) {
			f.Count--
			if f.Count == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
			return f
		}
	}
	return nil
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

func notFound() (int, any) {
	return http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
}

// ownerOf is the owner a request's path is about: "org" or "org/repo".
func ownerOf(r *http.Request) string {
	if repo := r.PathValue("repo"); repo != "" {
		return r.PathValue("org") + "/" + repo
	}
	return r.PathValue("org")
}

func orgOf(owner string) string {
	org, _, _ := strings.Cut(owner, "/")
	return org
}
