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
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	mathrand "math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
)

// The server itself: its options, state and the records it keeps (the App's
// installations, tokens, runners), and starting it. What tests set and
// read of it is in controls.go, runners.go and jobs.go.

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
