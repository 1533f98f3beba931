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
