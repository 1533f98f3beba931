// Package fakegithub is a stateful fake of the parts of GitHub ghrunner
// uses, faithful to GitHub's documented REST behaviour: App JWTs verified
// with the App's public key, installations per organization or repository,
// installation tokens with expiry, runner registration and remove tokens
// (1 h), runners with status, busy flag and labels, pagination with Link
// headers, 404 and 422 answers with GitHub's messages, rate-limit headers
// with a decrementing budget, and injectable faults. Nothing public emulates
// GitHub's runner API, so tests use this. It is api.github.com or one GitHub
// Enterprise Server release (Options.Version), and internal/testenv/ghapi
// holds its routes, statuses and answers to GitHub's published REST API
// description of that version.
//
// A fake runner (package fakerunner, installed with InstallRunner) speaks
// to it: config.sh exchanges its token at /actions/runner-registration as
// the real runner does, then uses a private protocol under /_fake/ to
// register, hold a session, take jobs and report them. Tests queue jobs per
// label with EnqueueJob (or, from a repository, EnqueueJobFrom: only a
// runner whose runner group admits the repository takes it,
// groupaccess.go) and wait for them with WaitJob. It also serves the
// Actions service's side of runner scale sets to github.com/actions/scaleset
// (scaleset_routes.go).
package fakegithub

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	mathrand "math/rand/v2"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Options configure a fake GitHub.
type Options struct {
	// Orgs the App is installed on (all their repositories).
	Orgs []string
	// NoDisableUpdate plays a server that does not keep a runner's
	// DisableUpdate flag: it registers the runner without it, and
	// config.sh then fails with "The GitHub server does not support
	// configuring a self-hosted runner with 'DisableUpdate' flag."
	// (ConfigurationManager.cs, after the runner was added or replaced).
	// Which GitHub Enterprise Server releases do this is not documented.
	NoDisableUpdate bool
	// Repos ("acme/api") the App is installed on one by one.
	Repos []string
	// AppID defaults to 4242.
	AppID int64
	// PrivateKey is the App's key; nil: a fresh 2048-bit key.
	PrivateKey *rsa.PrivateKey
	// Now is the server's clock (JWT and token expiry, runner status,
	// rate-limit resets); nil: time.Now. SetClock changes it later.
	Now func() time.Time
	// OfflineAfter is how long a runner stays online without hearing from
	// its listener (default 5 s).
	OfflineAfter time.Duration
	// RateLimit is the hourly request budget (default 5000).
	RateLimit int
	// Seed makes Fault.Fraction reproducible.
	Seed uint64
	// JITUnusedAfter is how long a just-in-time runner may go without a
	// listener before GitHub removes it (default a day: GitHub's docs on
	// removing self-hosted runners say an ephemeral runner that has not
	// connected for more than a day is removed automatically, any other
	// after 14 days).
	JITUnusedAfter time.Duration
	// EphemeralLinger is how long an ephemeral runner stays listed after
	// its one job (default DefaultEphemeralLinger, jit.go: GitHub's time is
	// undocumented; negative: removed at once).
	EphemeralLinger time.Duration
	// JITIdleAfter is how long a just-in-time runner's listener may wait
	// for a job before GitHub removes the runner (default 4 minutes;
	// jit.go, expireJIT). Tests set seconds (or SetJITIdleAfter).
	JITIdleAfter time.Duration
	// SessionRetry is how long a listener waits before it asks again for
	// a session another listener holds, SessionConflictLimit how long it
	// keeps asking before it exits 5, and SessionExpiry how long GitHub
	// keeps the session of a listener it no longer hears from (session.go).
	// Defaults: the real listener's 30 s, then the limit 8 retries (the
	// real 4 minutes) and the expiry five fourths of the limit (5 minutes;
	// undocumented, session.go says why), so a test that sets SessionRetry
	// alone scales all three. The expiry is at least 2 s: longer than a
	// live listener's poll (pollWait).
	SessionRetry, SessionConflictLimit, SessionExpiry time.Duration
	// Version is which GitHub the fake is: APIGitHubCom (the default) or
	// a GitHub Enterprise Server release, "ghes-3.9" to "ghes-3.19",
	// serving only what that release's REST API description has
	// (version.go): no generate-jitconfig before 3.10, no name filter on
	// list runners before 3.11.
	Version string
	// ScaleSet configures the scale set side (scaleset_session.go).
	ScaleSet ScaleSetOptions

	// Test hooks: the conformance suite's own test (internal/testenv/ghapi)
	// drives the fake away from GitHub's description with them and
	// asserts the suite says so.
	//
	// Rewrite changes every REST API answer before it is sent (route is
	// the pattern, as Count takes it; body nil: none).
	Rewrite func(route string, status int, body any) (int, any)
	// ExtraRoutes are served too ("GET /orgs/{org}/actions/xyz"), each
	// answering 200 {} to a valid token.
	ExtraRoutes []string
}

// Server is one fake GitHub. It is safe for concurrent use.
type Server struct {
	srv      *httptest.Server
	version  string
	features features
	rewrite  func(route string, status int, body any) (int, any)
	extra    []string
	served   []Route // the REST API routes

	// AppID identifies the App whose key PrivateKeyPEM (PKCS#1) is.
	AppID         int64
	PrivateKeyPEM []byte
	appKey        *rsa.PublicKey

	mu              sync.Mutex
	now             func() time.Time
	rng             *mathrand.Rand
	nextID          int64
	orgs            map[string]bool // organizations that exist
	installations   []*installation
	instTokens      map[string]tokenInfo
	pats            map[string]bool
	runnerTokens    map[string]tokenInfo // registration and remove tokens
	tenantTokens    map[string]tokenInfo // what /actions/runner-registration hands a runner
	runners         map[int64]*runner
	history         []Registration
	onRegister      func(Registration)
	groups          map[string][]string    // organization → runner group names
	groupAccess     map[string]GroupAccess // "org/name" (lower case) → who it admits; none: all, no public
	repoVisibility  map[string]string      // "org/repo" (lower case) → "public"; none: private
	repoIDs         map[string]int64       // "org/repo" (lower case) → its id (repos.go)
	jobs            map[int64]*Job
	jobWake         chan struct{}
	faults          []*Fault
	releases        map[string][]byte // actions/runner release asset name → bytes (ServeRunnerRelease)
	assetDelay      time.Duration     // DelayReleaseAssets
	published       []published       // actions/runner releases (PublishRunnerRelease), releases.go
	minimumRunner   string            // the lowest runner version registered ("": runnerrelease.Minimum)
	noDisableUpdate bool              // Options.NoDisableUpdate
	updates         []UpdateMessage   // update messages sent (releases.go)
	counts          map[string]int
	rateLimit       int
	rateUsed        int
	rateReset       time.Time
	offlineAfter    time.Duration
	jitUnusedAfter  time.Duration
	jitIdleAfter    time.Duration // Options.JITIdleAfter
	ephemeralLinger time.Duration // Options.EphemeralLinger
	sessionRetry    time.Duration // Options.SessionRetry
	conflictLimit   time.Duration // Options.SessionConflictLimit
	sessionExpiry   time.Duration // Options.SessionExpiry
	// RefuseListeners: how many more listeners to turn away, and why.
	refuseListeners int
	refusal         string
	idp             oidcIssuer // the Actions OIDC issuer (oidc.go)
	ss              *scaleSetState
	withheld        map[string]bool // App permissions taken away (rerun.go)
}

type installation struct {
	id      int64
	account string
	repos   []string // nil: every repository of the account
}

// covers says whether an installation token may act on owner ("org" or
// "org/repo").
func (in *installation) covers(owner string) bool {
	org, repo, isRepo := strings.Cut(owner, "/")
	if !strings.EqualFold(org, in.account) {
		return false
	}
	if in.repos == nil {
		return true
	}
	return isRepo && slices.ContainsFunc(in.repos, func(r string) bool { return strings.EqualFold(r, repo) })
}

type tokenInfo struct {
	owner   string // organization, or organization/repository
	purpose string // installation, register, remove
	install *installation
	expires time.Time
}

type runner struct {
	id        int64
	owner     string
	name      string
	os        string
	labels    []string
	group     string
	busy      bool
	secret    string // what the runner's listener authenticates with
	session   string // the listener's current session, "" when none
	lastSeen  time.Time
	permanent bool // added by AddRunner: no listener, status as tests set it
	// A just-in-time runner (generate-jitconfig) is ephemeral: it takes
	// one job and is then removed; one that never had a listener is
	// removed jitUnusedAfter after it was made, one whose listener took
	// no job jitIdleAfter after it first listened (listenedAt); its
	// configuration starts one listener only.
	jit        bool
	created    time.Time
	listened   bool
	listenedAt time.Time
	// updateSession is the listener session last sent an update message
	// (releases.go: one per session); relaunches counts the listeners a
	// just-in-time configuration may still start after an update.
	updateSession string
	relaunches    int
	// doneAt: when an ephemeral runner's one job ended; it is still
	// listed for the linger (jit.go, jobDone).
	doneAt time.Time
}

// Job states.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobCompleted = "completed" // the runner reported a result
	JobFailed    = "failed"    // the runner was lost during the job
)

// Job is a queued unit of work for runners with its label.
type Job struct {
	ID    int64
	Label string
	// Owner is the organization of the job's repository Repo (its name);
	// "" for EnqueueJob's jobs, taken for a repository of the runner's
	// own organization (groupaccess.go). Workflow is its workflow ref
	// ("": none).
	Owner, Repo, Workflow string
	Script                string
	// Post runs after Script however it ended, cancelled too, as an
	// action's post step does (EnqueueJobWithPost).
	Post     string
	State    string // JobQueued, JobRunning, JobCompleted, JobFailed
	RunnerID int64
	Runner   string // the name of the runner that took it
	// RunnerVersion is the version the listener that took it announced
	// in its poll (runnerVersion): what the real runner prints first in
	// the job's log, "Current runner version: '<v>'"
	// (src/Runner.Worker/JobExtension.cs, InitializeJob).
	RunnerVersion string
	ExitCode      int
	Result        string // succeeded, failed or cancelled, once completed
	ScaleSetID    int    // the scale set the job is for (0: any runner with its label)
	// WorkflowRun is the id of the job's workflow run (0: the job's own
	// id); RerunOf is the job a re-run copied, RerunAs the job that
	// re-ran this one (0: none), rerun.go.
	WorkflowRun, RerunOf, RerunAs int64
	Output                        string
	// When it was queued, handed to a runner (zero again if the runner
	// never confirmed it and it went back to the queue) and settled:
	// wall-clock times, for the timings the sandbox and benchmarks show.
	Queued, Started, Finished time.Time
	done                      chan struct{}
	session                   string // the listener session that took it
	acked                     bool   // the runner confirmed it started the job
}

// Fault makes matching requests fail or slow down. It applies to the REST
// API (and to the runner protocol only when Path names /_fake/).
type Fault struct {
	Method string // "" any
	Path   string // a substring of the request path ("" any)
	// Count is how many requests it hits; 0: no bound (until ClearFaults).
	Count int
	// Fraction, when set, is the probability that a matching request is
	// hit; 0: every one.
	Fraction float64

	Status     int           // 500-599; 403 or 429 for rate limits; 0: latency only
	Primary    bool          // rate limit: the hourly budget (x-ratelimit-remaining 0)
	Secondary  bool          // rate limit: a secondary limit
	RetryAfter int           // seconds, sent as Retry-After (implies Secondary)
	Latency    time.Duration // added before answering
}

// New starts a fake GitHub whose App is installed on the given
// organizations.
func New(orgs ...string) *Server { return NewServer(Options{Orgs: orgs}) }

// NewServer starts a fake GitHub.
func NewServer(o Options) *Server {
	key := o.PrivateKey
	if key == nil {
		var err error
		if key, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	}
	if o.AppID == 0 {
		o.AppID = 4242
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OfflineAfter <= 0 {
		o.OfflineAfter = 5 * time.Second
	}
	if o.RateLimit <= 0 {
		o.RateLimit = 5000
	}
	if o.SessionRetry <= 0 {
		o.SessionRetry = 30 * time.Second
	}
	if o.SessionConflictLimit <= 0 {
		o.SessionConflictLimit = 8 * o.SessionRetry
	}
	if o.SessionExpiry <= 0 {
		o.SessionExpiry = max(o.SessionConflictLimit*5/4, 2*time.Second)
	}
	if o.JITUnusedAfter <= 0 {
		o.JITUnusedAfter = 24 * time.Hour
	}
	if o.EphemeralLinger == 0 {
		o.EphemeralLinger = DefaultEphemeralLinger
	}
	if o.JITIdleAfter <= 0 {
		o.JITIdleAfter = DefaultJITIdleAfter
	}
	s := &Server{
		AppID:           o.AppID,
		PrivateKeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		appKey:          &key.PublicKey,
		now:             o.Now,
		rng:             mathrand.New(mathrand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
		nextID:          100,
		orgs:            map[string]bool{},
		instTokens:      map[string]tokenInfo{},
		pats:            map[string]bool{},
		runnerTokens:    map[string]tokenInfo{},
		tenantTokens:    map[string]tokenInfo{},
		runners:         map[int64]*runner{},
		groups:          map[string][]string{},
		groupAccess:     map[string]GroupAccess{},
		repoVisibility:  map[string]string{},
		repoIDs:         map[string]int64{},
		jobs:            map[int64]*Job{},
		withheld:        map[string]bool{},
		jobWake:         make(chan struct{}),
		counts:          map[string]int{},
		rateLimit:       o.RateLimit,
		offlineAfter:    o.OfflineAfter,
		jitUnusedAfter:  o.JITUnusedAfter,
		jitIdleAfter:    o.JITIdleAfter,
		ephemeralLinger: o.EphemeralLinger,
		noDisableUpdate: o.NoDisableUpdate,
		sessionRetry:    o.SessionRetry,
		conflictLimit:   o.SessionConflictLimit,
		sessionExpiry:   o.SessionExpiry,
		rewrite:         o.Rewrite,
		extra:           o.ExtraRoutes,
		ss:              newScaleSetState(o.ScaleSet),
	}
	if o.Version == "" {
		o.Version = APIGitHubCom
	}
	feat, err := featuresOf(o.Version)
	if err != nil {
		panic(err)
	}
	s.version, s.features = o.Version, feat
	for _, org := range o.Orgs {
		s.install(org, nil)
	}
	for _, repo := range o.Repos {
		org, name, _ := strings.Cut(repo, "/")
		s.install(org, []string{name})
	}
	s.rateReset = s.now().Add(time.Hour)
	s.srv = httptest.NewServer(s.routes())
	return s
}

func (s *Server) install(account string, repos []string) int64 {
	s.orgs[strings.ToLower(account)] = true
	if _, ok := s.groups[strings.ToLower(account)]; !ok {
		s.groups[strings.ToLower(account)] = []string{"Default"}
	}
	in := &installation{id: int64(1000 + len(s.installations)), account: account, repos: repos}
	s.installations = append(s.installations, in)
	return in.id
}

// AddInstallation installs the App on an organization ("acme") or on one
// repository ("acme/api") and returns the installation id.
func (s *Server) AddInstallation(owner string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	org, repo, isRepo := strings.Cut(owner, "/")
	if isRepo {
		return s.install(org, []string{repo})
	}
	return s.install(org, nil)
}

// URL is the server's root, usable as a github.com-like base URL (the
// GitHub layer adds /api/v3/ for such hosts, which the fake serves too).
func (s *Server) URL() string { return s.srv.URL }

// APIURL is the GitHub Enterprise Server style API root, URL()+"/api/v3/".
func (s *Server) APIURL() string { return s.srv.URL + "/api/v3/" }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// SetClock replaces the server's clock.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetOfflineAfter sets how long a runner stays online without hearing from
// its listener.
func (s *Server) SetOfflineAfter(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offlineAfter = d
}

// RefuseListeners makes the next n listeners that connect end at once,
// without a job: their session is refused with message (HTTP 403), and
// the fake listener exits 1 saying "An error occurred: <message>", as a
// real one does for a version GitHub no longer accepts or a library it
// lacks. The registration stays.
func (s *Server) RefuseListeners(n int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuseListeners, s.refusal = n, message
}

// AddToken makes a personal access token valid for every organization of
// the fake.
func (s *Server) AddToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pats[token] = true
}

// AddRunnerGroup adds a runner group to an organization.
func (s *Server) AddRunnerGroup(org, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(org)
	if _, ok := s.groups[key]; !ok {
		s.groups[key] = []string{"Default"}
	}
	s.groups[key] = append(s.groups[key], name)
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

// SetRateBudget sets the primary rate limit's remaining requests and its
// reset time.
func (s *Server) SetRateBudget(remaining int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateUsed = s.rateLimit - remaining
	s.rateReset = reset
}

// RateRemaining is what the next answer's x-ratelimit-remaining will be
// before it is counted.
func (s *Server) RateRemaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rollRateWindow()
	return max(s.rateLimit-s.rateUsed, 0)
}

// Count returns how many requests matched a route pattern, e.g.
// "GET /orgs/{org}/actions/runners" (GHES-prefixed requests count under the
// same pattern).
func (s *Server) Count(pattern string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[pattern]
}

// IssuedTokens lists every installation, registration and remove token
// the server ever issued: what must never reach an instance of a
// just-in-time pool.
func (s *Server) IssuedTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for t := range s.instTokens {
		out = append(out, t)
	}
	for t := range s.runnerTokens {
		out = append(out, t)
	}
	return out
}

// Counts returns a copy of every route's count.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// RunnerInfo is a runner as tests see it.
type RunnerInfo struct {
	ID     int64
	Owner  string
	Name   string
	Labels []string
	Group  string
	Online bool
	Busy   bool
	JIT    bool // made by generate-jitconfig: ephemeral
}

// Registration is one registration of a runner through config.sh, from
// the registration (or a --replace) until its deletion or replacement.
type Registration struct {
	RunnerID int64
	Name     string
	Labels   []string
	From, To time.Time // To is zero while it lasts
	// Online is when the runner's first listener session began (zero if
	// none did): the moment GitHub could hand it a job.
	Online time.Time
	// EndedBy says what ended it: "api" (DELETE through the REST API, as
	// the control plane deletes runners), "runner" (config.sh remove, as
	// the agent deregisters) or "replaced" (a later config.sh --replace).
	EndedBy string
}

// History returns every registration made through config.sh, in order.
func (s *Server) History() []Registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Registration, len(s.history))
	for i, r := range s.history {
		r.Labels = slices.Clone(r.Labels)
		out[i] = r
	}
	return out
}

// registered and unregistered keep the history. Called with s.mu held.
func (s *Server) registered(rn *runner) {
	s.unregistered(rn.id, "replaced")
	reg := Registration{RunnerID: rn.id, Name: rn.name, Labels: slices.Clone(rn.labels), From: time.Now()}
	s.history = append(s.history, reg)
	if s.onRegister != nil {
		s.onRegister(reg)
	}
}

// OnRegister calls f for every registration config.sh makes, before
// config.sh hears that it succeeded: a test can act at that very moment
// (nothing the runner or its agent does next can come first). f must not
// call the server.
func (s *Server) OnRegister(f func(Registration)) {
	s.mu.Lock()
	s.onRegister = f
	s.mu.Unlock()
}

func (s *Server) unregistered(id int64, by string) {
	for i := len(s.history) - 1; i >= 0; i-- {
		if s.history[i].RunnerID == id && s.history[i].To.IsZero() {
			s.history[i].To, s.history[i].EndedBy = time.Now(), by
		}
	}
}

// cameOnline notes a registration's first listener. Called with s.mu held.
func (s *Server) cameOnline(id int64) {
	for i := len(s.history) - 1; i >= 0; i-- {
		if s.history[i].RunnerID == id && s.history[i].To.IsZero() && s.history[i].Online.IsZero() {
			s.history[i].Online = time.Now()
		}
	}
}

// Runners lists the registered runners, by id.
func (s *Server) Runners() []RunnerInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireJIT()
	out := make([]RunnerInfo, 0, len(s.runners))
	for _, r := range s.runners {
		out = append(out, s.info(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *Server) info(r *runner) RunnerInfo {
	return RunnerInfo{ID: r.id, Owner: r.owner, Name: r.name, Labels: slices.Clone(r.labels), Group: r.group, Online: s.online(r), Busy: r.busy, JIT: r.jit}
}

// Runner returns one runner.
func (s *Server) Runner(id int64) (RunnerInfo, bool) {
	for _, r := range s.Runners() {
		if r.ID == id {
			return r, true
		}
	}
	return RunnerInfo{}, false
}

// AddRunner registers a runner directly, with no listener behind it, for
// tests of the REST side. It is online until OfflineAfter passes (or as
// SetOnline says).
func (s *Server) AddRunner(owner, name string, busy bool, labels ...string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.runners[s.nextID] = &runner{id: s.nextID, owner: owner, name: name, os: "Linux", labels: labels, group: "Default", busy: busy, lastSeen: s.now(), secret: randomToken("cred"), permanent: true}
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

// SetOnline marks a runner as just heard from (true) or silent (false).
func (s *Server) SetOnline(id int64, online bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runners[id]; ok {
		r.lastSeen = time.Time{}
		if online {
			r.lastSeen = s.now()
		}
	}
}

// HoldSession plays a listener that holds a session of runner id and was
// heard from just now, taking no job: what whoever holds a runner's
// credentials can do without running its listener.
func (s *Server) HoldSession(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.runners[id]; ok {
		if r.session == "" {
			r.session = randomToken("held")
		}
		r.lastSeen = s.now()
	}
}

// EnqueueJob queues a job for runners with label (compared without regard
// to case, as GitHub does); script runs under bash -c in the runner's
// <work>/repo/repo folder. A label naming a scale set makes it a job of
// that scale set (scaleset_jobs.go).
func (s *Server) EnqueueJob(label, script string) int64 {
	return s.EnqueueJobWithPost(label, script, "")
}

// EnqueueJobWithPost queues a job with a post step: post runs after
// script however it ended, cancelled by a stopping runner too (a job's
// post steps and always() steps run after a cancellation: actions/runner
// src/Runner.Worker/StepsRunner.cs), its output appended to the job's.
func (s *Server) EnqueueJobWithPost(label, script, post string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.jobs[s.nextID] = &Job{ID: s.nextID, Label: label, Repo: "repo", Script: script, Post: post, State: JobQueued, Queued: time.Now(), done: make(chan struct{})}
	s.routeToScaleSet(s.jobs[s.nextID])
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

// WaitJob waits until a job completed (or failed) and returns it.
func (s *Server) WaitJob(id int64, timeout time.Duration) (Job, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.WaitJobContext(ctx, id)
}

// WaitJobContext waits until a job completed (or failed), or ctx ends.
func (s *Server) WaitJobContext(ctx context.Context, id int64) (Job, error) {
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
	case <-ctx.Done():
		got, _ := s.Job(id)
		return got, fmt.Errorf("job %d still %s: %w", id, got.State, ctx.Err())
	}
}

func (s *Server) wake() {
	close(s.jobWake)
	s.jobWake = make(chan struct{})
}

// online: a listener was heard from recently (or, for an AddRunner runner,
// the test said so).
func (s *Server) online(r *runner) bool {
	if !r.permanent && r.session == "" {
		return false
	}
	return !r.lastSeen.IsZero() && s.now().Sub(r.lastSeen) < s.offlineAfter
}

func randomToken(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + strings.ToUpper(hex.EncodeToString(b[:]))
}
