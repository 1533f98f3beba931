// Package github is ghrunner's GitHub layer on go-github: App or token auth,
// GitHub Enterprise Server, owners that are organizations or repositories,
// runner registration and remove tokens (cached), runner listing, lookup and
// deletion, runner groups, and rate-limit and fault handling in the HTTP
// transport under go-github.
package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v62/github"
	// ghinstallation's own go-github, for its token request's options.
	ghtoken "github.com/google/go-github/v88/github"
	"golang.org/x/sync/singleflight"
)

// Config says how to reach GitHub.
type Config struct {
	// BaseURL is the REST API root: empty for github.com, or a GitHub
	// Enterprise Server's "https://ghe.example.com/api/v3/" ("/api/v3/" is
	// added when missing, as go-github does for Enterprise URLs).
	BaseURL string
	// Either a GitHub App (AppID and PrivateKeyPEM) or a Token.
	AppID         int64
	PrivateKeyPEM []byte
	Token         string

	// MaxWait is the longest rate-limit wait taken before failing with a
	// *RateLimitError (default 60 s; an App JWT lives 90 s after signing, so
	// much longer waits would retry with an expired JWT).
	MaxWait time.Duration
	// MaxAttempts bounds the attempts of one request (default 4).
	MaxAttempts int
	// Timeout bounds one attempt (default 30 s).
	Timeout time.Duration

	// For tests: the HTTP transport, the sleep between attempts, the clock
	// (token cache, rate-limit resets) and the backoff jitter (a uniform
	// pick in [0, n)).
	Transport http.RoundTripper
	Sleep     func(ctx context.Context, d time.Duration) error
	Now       func() time.Time
	Jitter    func(n int64) int64
}

// Client talks to one GitHub (github.com, or one GHES). It is safe for
// concurrent use.
type Client struct {
	cfg    Config
	api    *url.URL
	web    string
	rt     *retrying
	app    *gh.Client         // authenticated as the App (JWT); nil with a token
	pat    *gh.Client         // authenticated with the token; nil with an App
	flight singleflight.Group // one installation lookup, one token request at a time per key

	mu         sync.Mutex
	installIDs map[string]int64       // owner → App installation id
	installs   map[int64]*gh.Client   // installation id → its client
	tokens     map[string]cachedToken // kind + owner → token
}

type cachedToken struct {
	token   string
	expires time.Time
}

// New returns a client. It makes no request.
func New(cfg Config) (*Client, error) {
	if (cfg.AppID == 0) == (cfg.Token == "") {
		return nil, errors.New("github: configure either an App (appId and privateKey) or a token")
	}
	if cfg.AppID != 0 && len(cfg.PrivateKeyPEM) == 0 {
		return nil, errors.New("github: privateKey: required with appId")
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = time.Minute
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleepContext
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Jitter == nil {
		cfg.Jitter = defaultJitter
	}
	api, web, err := endpoints(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, api: api, web: web, installIDs: map[string]int64{}, installs: map[int64]*gh.Client{}, tokens: map[string]cachedToken{}}
	c.rt = &retrying{next: cfg.Transport, maxAttempts: cfg.MaxAttempts, maxWait: cfg.MaxWait, timeout: cfg.Timeout, sleep: cfg.Sleep, now: cfg.Now, jitter: cfg.Jitter}
	c.rt.remaining.Store(-1)
	if cfg.Token != "" {
		c.pat = c.newClient(&bearer{token: cfg.Token, next: c.rt})
		return c, nil
	}
	atr, err := c.appsTransport()
	if err != nil {
		return nil, err
	}
	c.app = c.newClient(atr)
	return c, nil
}

// endpoints derives the API root and the web root runners register at:
// api.github.com → github.com; api.<tenant>.ghe.com → <tenant>.ghe.com;
// https://ghe.example.com/api/v3/ → https://ghe.example.com.
func endpoints(base string) (*url.URL, string, error) {
	if base == "" {
		base = "https://api.github.com/"
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" {
		return nil, "", fmt.Errorf("github: baseUrl: %q is not an http(s) URL of a GitHub API", base)
	}
	web := *u
	if host, ok := strings.CutPrefix(u.Host, "api."); ok {
		u.Path = "/"
		web.Host, web.Path = host, ""
		return u, strings.TrimSuffix(web.String(), "/"), nil
	}
	path := strings.TrimSuffix(u.Path, "/")
	path = strings.TrimSuffix(path, "/api/v3")
	u.Path = path + "/api/v3/"
	web.Path = path
	return u, strings.TrimSuffix(web.String(), "/"), nil
}

func (c *Client) appsTransport() (*ghinstallation.AppsTransport, error) {
	atr, err := ghinstallation.NewAppsTransport(c.rt, c.cfg.AppID, c.cfg.PrivateKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("github: privateKey: %w", err)
	}
	atr.BaseURL = strings.TrimSuffix(c.api.String(), "/")
	return atr, nil
}

func (c *Client) newClient(rt http.RoundTripper) *gh.Client {
	cl := gh.NewClient(&http.Client{Transport: rt})
	cl.BaseURL = c.api
	cl.UploadURL = c.api
	return cl
}

// APIURL is the REST API root the client talks to.
func (c *Client) APIURL() string { return c.api.String() }

// RunnerURL is the URL `config.sh --url` takes for a runner of owner:
// https://github.com/acme, https://github.com/acme/api, or the GHES web
// address in their place.
func (c *Client) RunnerURL(owner string) string { return c.web + "/" + strings.Trim(owner, "/") }

// RateRemaining is the last x-ratelimit-remaining GitHub sent (-1: none
// yet), for metrics.
func (c *Client) RateRemaining() int64 { return c.rt.remaining.Load() }

// Owner is an organization ("acme") or a repository ("acme/api").
type Owner struct {
	Org  string
	Repo string // empty for an organization
}

func (o Owner) String() string {
	if o.Repo == "" {
		return o.Org
	}
	return o.Org + "/" + o.Repo
}

// IsRepo says whether the owner is a single repository.
func (o Owner) IsRepo() bool { return o.Repo != "" }

var (
	// GitHub logins: alphanumerics and single inner hyphens, at most 39.
	loginRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38}$`)
	repoRE  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// ParseOwner validates an owner: an organization (acme) or a repository
// (acme/api).
func ParseOwner(s string) (Owner, error) {
	org, repo, isRepo := strings.Cut(s, "/")
	if !loginRE.MatchString(org) || len(org) > 39 || isRepo && (!repoRE.MatchString(repo) || repo == "." || repo == "..") {
		return Owner{}, fmt.Errorf("owner: %q must be an organization (acme) or a repository (acme/api)", s)
	}
	return Owner{Org: org, Repo: repo}, nil
}

// forOwner returns a go-github client authenticated for owner: the token
// client, or the client of the App's installation on the organization (or
// repository). Installations are looked up once per owner and shared by the
// owners they cover; concurrent first calls make one lookup.
func (c *Client) forOwner(ctx context.Context, o Owner) (*gh.Client, error) {
	if c.pat != nil {
		return c.pat, nil
	}
	c.mu.Lock()
	id, ok := c.installIDs[o.String()]
	cl := c.installs[id]
	c.mu.Unlock()
	if ok {
		return cl, nil
	}
	v, err, _ := c.flight.Do("installation "+o.String(), func() (any, error) {
		var inst *gh.Installation
		var err error
		if o.IsRepo() {
			inst, _, err = c.app.Apps.FindRepositoryInstallation(ctx, o.Org, o.Repo)
		} else {
			inst, _, err = c.app.Apps.FindOrganizationInstallation(ctx, o.Org)
		}
		if err != nil {
			err = classify(err)
			if IsNotFound(err) {
				return nil, fmt.Errorf("GitHub App %d is not installed on %s: %w (%v)", c.cfg.AppID, o, ErrNotInstalled, err)
			}
			return nil, fmt.Errorf("find the GitHub App installation for %s: %w", o, err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		cl, ok := c.installs[inst.GetID()]
		if !ok {
			atr, err := c.appsTransport()
			if err != nil {
				return nil, err
			}
			itr := ghinstallation.NewFromAppsTransport(atr, inst.GetID())
			// Without options ghinstallation sends the body "null" (a nil
			// pointer in an interface), which the description of
			// create-an-installation-access-token does not allow (an
			// object, if any): ask with {} (internal/testenv/ghapi).
			itr.InstallationTokenOptions = &ghtoken.InstallationTokenOptions{}
			cl = c.newClient(itr)
			c.installs[inst.GetID()] = cl
		}
		c.installIDs[o.String()] = inst.GetID()
		return cl, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*gh.Client), nil
}

// owner parses an owner and returns its client.
func (c *Client) owner(ctx context.Context, owner string) (Owner, *gh.Client, error) {
	o, err := ParseOwner(owner)
	if err != nil {
		return Owner{}, nil, err
	}
	cl, err := c.forOwner(ctx, o)
	return o, cl, err
}

// tokenMargin: a cached token is replaced this long before it expires, so
// an instance that boots for minutes still gets a valid one.
const tokenMargin = 5 * time.Minute

// RegistrationToken returns a runner registration token for owner (1 h
// validity), cached until 5 minutes before it expires.
func (c *Client) RegistrationToken(ctx context.Context, owner string) (string, time.Time, error) {
	return c.token(ctx, owner, "registration")
}

// RemoveToken returns a runner remove token for owner, cached likewise.
func (c *Client) RemoveToken(ctx context.Context, owner string) (string, time.Time, error) {
	return c.token(ctx, owner, "remove")
}

func (c *Client) token(ctx context.Context, owner, kind string) (string, time.Time, error) {
	o, err := ParseOwner(owner)
	if err != nil {
		return "", time.Time{}, err
	}
	key := kind + " " + o.String()
	if t, ok := c.cachedToken(key); ok {
		return t.token, t.expires, nil
	}
	v, err, _ := c.flight.Do(key, func() (any, error) {
		if t, ok := c.cachedToken(key); ok { // filled while we queued
			return t, nil
		}
		cl, err := c.forOwner(ctx, o)
		if err != nil {
			return nil, err
		}
		var t *gh.RegistrationToken
		switch {
		case kind == "registration" && o.IsRepo():
			t, _, err = cl.Actions.CreateRegistrationToken(ctx, o.Org, o.Repo)
		case kind == "registration":
			t, _, err = cl.Actions.CreateOrganizationRegistrationToken(ctx, o.Org)
		case o.IsRepo():
			var rt *gh.RemoveToken
			rt, _, err = cl.Actions.CreateRemoveToken(ctx, o.Org, o.Repo)
			t = removeAsRegistration(rt)
		default:
			var rt *gh.RemoveToken
			rt, _, err = cl.Actions.CreateOrganizationRemoveToken(ctx, o.Org)
			t = removeAsRegistration(rt)
		}
		if err != nil {
			return nil, fmt.Errorf("create a runner %s token for %s: %w", kind, o, classify(err))
		}
		ct := cachedToken{token: t.GetToken(), expires: t.GetExpiresAt().Time}
		if ct.token == "" {
			return nil, fmt.Errorf("create a runner %s token for %s: GitHub answered without a token", kind, o)
		}
		c.mu.Lock()
		c.tokens[key] = ct
		c.mu.Unlock()
		return ct, nil
	})
	if err != nil {
		return "", time.Time{}, err
	}
	ct := v.(cachedToken)
	return ct.token, ct.expires, nil
}

func removeAsRegistration(t *gh.RemoveToken) *gh.RegistrationToken {
	if t == nil {
		return nil
	}
	return &gh.RegistrationToken{Token: t.Token, ExpiresAt: t.ExpiresAt}
}

func (c *Client) cachedToken(key string) (cachedToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tokens[key]
	return t, ok && t.expires.Sub(c.cfg.Now()) > tokenMargin
}

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
		var page *gh.Runners
		var resp *gh.Response
		if o.IsRepo() {
			page, resp, err = cl.Actions.ListRunners(ctx, o.Org, o.Repo, opts)
		} else {
			page, resp, err = cl.Actions.ListOrganizationRunners(ctx, o.Org, opts)
		}
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
		var page *gh.Runners
		var resp *gh.Response
		if o.IsRepo() {
			page, resp, err = cl.Actions.ListRunners(ctx, o.Org, o.Repo, opts)
		} else {
			page, resp, err = cl.Actions.ListOrganizationRunners(ctx, o.Org, opts)
		}
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
