// Package github is ghrunner's GitHub layer on go-github: App or token auth,
// GitHub Enterprise Server, owners that are organizations or repositories,
// runner registration and remove tokens (cached), runner listing, lookup and
// deletion, runner groups, and rate-limit handling.
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
)

// Config says how to reach GitHub.
type Config struct {
	// BaseURL is the REST API root: empty for github.com, or a GitHub
	// Enterprise Server's "https://ghe.example.com/api/v3/".
	BaseURL string
	// A GitHub App (AppID and PrivateKeyPEM) or a Token.
	AppID         int64
	PrivateKeyPEM []byte
	Token         string
	// MaxWait is the longest rate-limit wait taken before failing (default 60 s).
	MaxWait time.Duration
	// MaxAttempts bounds retries of one request (default 4).
	MaxAttempts int
	// Transport and Sleep are for tests.
	Transport http.RoundTripper
	Sleep     func(time.Duration)
}

// Client talks to one GitHub (github.com or one GHES).
type Client struct {
	cfg   Config
	base  *url.URL
	web   string
	rt    *retrying
	app   *gh.Client // authenticated as the App (JWT), nil with a token
	plain *gh.Client // authenticated with the token

	mu       sync.Mutex
	installs map[string]*gh.Client // per organization (or owner of a repo)
	tokens   map[string]cachedToken
}

type cachedToken struct {
	token   string
	expires time.Time
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

// Owner is an organization ("acme") or a repository ("acme/api").
type Owner struct {
	Org  string
	Repo string
}

func (o Owner) String() string {
	if o.Repo == "" {
		return o.Org
	}
	return o.Org + "/" + o.Repo
}

var ownerRE = regexp.MustCompile(`^([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))(?:/([A-Za-z0-9._-]{1,100}))?$`)

// ParseOwner validates an owner.
func ParseOwner(s string) (Owner, error) {
	m := ownerRE.FindStringSubmatch(s)
	if m == nil {
		return Owner{}, fmt.Errorf("owner: %q must be an organization (acme) or a repository (acme/api)", s)
	}
	return Owner{Org: m[1], Repo: m[2]}, nil
}

// New returns a client. It makes no request.
func New(cfg Config) (*Client, error) {
	if (cfg.AppID == 0) == (cfg.Token == "") {
		return nil, errors.New("github: configure either an App (appId and privateKey) or a token")
	}
	if cfg.AppID != 0 && len(cfg.PrivateKeyPEM) == 0 {
		return nil, errors.New("github: privateKey: required with appId")
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = time.Minute
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = 4
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	if cfg.Sleep == nil {
		cfg.Sleep = time.Sleep
	}
	base := "https://api.github.com/"
	if cfg.BaseURL != "" {
		base = strings.TrimSuffix(cfg.BaseURL, "/") + "/"
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("github: baseUrl: %q is not an http(s) URL", cfg.BaseURL)
	}
	c := &Client{cfg: cfg, base: u, installs: map[string]*gh.Client{}, tokens: map[string]cachedToken{}}
	c.web = webURL(u)
	c.rt = &retrying{next: cfg.Transport, maxAttempts: cfg.MaxAttempts, maxWait: cfg.MaxWait, sleep: cfg.Sleep, now: time.Now}
	c.rt.remaining.Store(-1)
	if cfg.Token != "" {
		c.plain = c.newClient(&bearer{token: cfg.Token, next: c.rt})
		return c, nil
	}
	atr, err := ghinstallation.NewAppsTransport(c.rt, cfg.AppID, cfg.PrivateKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("github: privateKey: %w", err)
	}
	atr.BaseURL = strings.TrimSuffix(u.String(), "/")
	c.app = c.newClient(atr)
	return c, nil
}

// webURL derives the web address runners register at from the API root:
// api.github.com → github.com, https://ghe/api/v3/ → https://ghe.
func webURL(api *url.URL) string {
	if api.Host == "api.github.com" {
		return "https://github.com"
	}
	u := *api
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v3")
	return strings.TrimSuffix(u.String(), "/")
}

func (c *Client) newClient(rt http.RoundTripper) *gh.Client {
	cl := gh.NewClient(&http.Client{Transport: rt, Timeout: 30 * time.Second})
	if c.base.Host != "api.github.com" {
		cl.BaseURL = c.base
		cl.UploadURL = c.base
	}
	return cl
}

// RunnerURL is the URL `config.sh --url` takes for a runner of owner.
func (c *Client) RunnerURL(owner string) string { return c.web + "/" + owner }

// RateRemaining is the last x-ratelimit-remaining GitHub sent (-1: none yet).
func (c *Client) RateRemaining() int64 { return c.rt.remaining.Load() }

// forOwner returns a client authenticated for owner: the token client, or
// the App's installation on the organization (or repository).
func (c *Client) forOwner(ctx context.Context, o Owner) (*gh.Client, error) {
	if c.plain != nil {
		return c.plain, nil
	}
	c.mu.Lock()
	cl, ok := c.installs[o.String()]
	c.mu.Unlock()
	if ok {
		return cl, nil
	}
	var inst *gh.Installation
	var err error
	if o.Repo == "" {
		inst, _, err = c.app.Apps.FindOrganizationInstallation(ctx, o.Org)
	} else {
		inst, _, err = c.app.Apps.FindRepositoryInstallation(ctx, o.Org, o.Repo)
	}
	if err != nil {
		return nil, fmt.Errorf("find the GitHub App installation for %s: %w", o, err)
	}
	atr, err := ghinstallation.NewAppsTransport(c.rt, c.cfg.AppID, c.cfg.PrivateKeyPEM)
	if err != nil {
		return nil, err
	}
	atr.BaseURL = strings.TrimSuffix(c.base.String(), "/")
	itr := ghinstallation.NewFromAppsTransport(atr, inst.GetID())
	cl = c.newClient(itr)
	c.mu.Lock()
	c.installs[o.String()] = cl
	c.mu.Unlock()
	return cl, nil
}

// tokenMargin: a cached token is replaced this long before it expires, so
// an instance that boots for minutes still gets a valid one.
const tokenMargin = 5 * time.Minute

// RegistrationToken returns a runner registration token for owner, cached
// until tokenMargin before it expires.
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
	c.mu.Lock()
	if t, ok := c.tokens[key]; ok && time.Until(t.expires) > tokenMargin {
		c.mu.Unlock()
		return t.token, t.expires, nil
	}
	c.mu.Unlock()
	cl, err := c.forOwner(ctx, o)
	if err != nil {
		return "", time.Time{}, err
	}
	var tok string
	var exp gh.Timestamp
	switch {
	case kind == "registration" && o.Repo == "":
		t, _, e := cl.Actions.CreateOrganizationRegistrationToken(ctx, o.Org)
		tok, exp, err = t.GetToken(), t.GetExpiresAt(), e
	case kind == "registration":
		t, _, e := cl.Actions.CreateRegistrationToken(ctx, o.Org, o.Repo)
		tok, exp, err = t.GetToken(), t.GetExpiresAt(), e
	case o.Repo == "":
		t, _, e := cl.Actions.CreateOrganizationRemoveToken(ctx, o.Org)
		tok, exp, err = t.GetToken(), t.GetExpiresAt(), e
	default:
		t, _, e := cl.Actions.CreateRemoveToken(ctx, o.Org, o.Repo)
		tok, exp, err = t.GetToken(), t.GetExpiresAt(), e
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("create %s token for %s: %w", kind, o, classify(err))
	}
	c.mu.Lock()
	c.tokens[key] = cachedToken{token: tok, expires: exp.Time}
	c.mu.Unlock()
	return tok, exp.Time, nil
}

// ListRunners returns every runner of owner (all pages, 100 per page).
func (c *Client) ListRunners(ctx context.Context, owner string) ([]Runner, error) {
	o, err := ParseOwner(owner)
	if err != nil {
		return nil, err
	}
	cl, err := c.forOwner(ctx, o)
	if err != nil {
		return nil, err
	}
	var all []Runner
	opts := &gh.ListRunnersOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		var page *gh.Runners
		var resp *gh.Response
		if o.Repo == "" {
			page, resp, err = cl.Actions.ListOrganizationRunners(ctx, o.Org, opts)
		} else {
			page, resp, err = cl.Actions.ListRunners(ctx, o.Org, o.Repo, opts)
		}
		if err != nil {
			return nil, fmt.Errorf("list runners of %s: %w", o, classify(err))
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

// GetRunner returns one runner; IsNotFound tells a runner that is gone.
func (c *Client) GetRunner(ctx context.Context, owner string, id int64) (Runner, error) {
	o, err := ParseOwner(owner)
	if err != nil {
		return Runner{}, err
	}
	cl, err := c.forOwner(ctx, o)
	if err != nil {
		return Runner{}, err
	}
	var r *gh.Runner
	if o.Repo == "" {
		r, _, err = cl.Actions.GetOrganizationRunner(ctx, o.Org, id)
	} else {
		r, _, err = cl.Actions.GetRunner(ctx, o.Org, o.Repo, id)
	}
	if err != nil {
		return Runner{}, fmt.Errorf("get runner %d of %s: %w", id, o, classify(err))
	}
	return fromGitHub(r), nil
}

// DeleteRunner removes a runner. A runner that is gone is no error; one that
// runs a job gives an error IsBusy recognises (GitHub answers 422).
func (c *Client) DeleteRunner(ctx context.Context, owner string, id int64) error {
	o, err := ParseOwner(owner)
	if err != nil {
		return err
	}
	cl, err := c.forOwner(ctx, o)
	if err != nil {
		return err
	}
	if o.Repo == "" {
		_, err = cl.Actions.RemoveOrganizationRunner(ctx, o.Org, id)
	} else {
		_, err = cl.Actions.RemoveRunner(ctx, o.Org, o.Repo, id)
	}
	err = classify(err)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete runner %d of %s: %w", id, o, err)
	}
	return nil
}

// RunnerGroupID returns the id of an organization's runner group by name.
func (c *Client) RunnerGroupID(ctx context.Context, org, name string) (int64, error) {
	cl, err := c.forOwner(ctx, Owner{Org: org})
	if err != nil {
		return 0, err
	}
	opts := &gh.ListOrgRunnerGroupOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		page, resp, err := cl.Actions.ListOrganizationRunnerGroups(ctx, org, opts)
		if err != nil {
			return 0, fmt.Errorf("list runner groups of %s: %w", org, classify(err))
		}
		for _, g := range page.RunnerGroups {
			if g.GetName() == name {
				return g.GetID(), nil
			}
		}
		if resp.NextPage == 0 {
			return 0, fmt.Errorf("runner group %q of %s: %w", name, org, ErrNotFound)
		}
		opts.Page = resp.NextPage
	}
}

func fromGitHub(r *gh.Runner) Runner {
	out := Runner{ID: r.GetID(), Name: r.GetName(), OS: r.GetOS(), Status: r.GetStatus(), Busy: r.GetBusy()}
	for _, l := range r.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	return out
}

// RunnerName is the name of the runner of an instance at its nth use; it ends
// with the instance id, so a runner can be matched to its instance by name.
func RunnerName(uses int, instanceID string) string {
	return fmt.Sprintf("ghr-%d-%s", uses, instanceID)
}

// InstanceOf returns the instance id a runner name ends with, if it is one of ours.
func InstanceOf(runnerName string) (string, bool) {
	if !strings.HasPrefix(runnerName, "ghr-") {
		return "", false
	}
	i := strings.LastIndex(runnerName, "-i-")
	if i < 0 {
		return "", false
	}
	return runnerName[i+1:], true
}

// Errors.
var (
	ErrNotFound = errors.New("not found on GitHub")
	ErrBusy     = errors.New("runner is running a job")
)

// IsNotFound reports a 404.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsBusy reports GitHub refusing to delete a runner that runs a job (422).
func IsBusy(err error) bool { return errors.Is(err, ErrBusy) }

// classify maps go-github errors to ours, keeping the original text.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %v", ErrNotFound, err)
		case http.StatusUnprocessableEntity:
			return fmt.Errorf("%w: %v", ErrBusy, err)
		}
	}
	var rl *gh.RateLimitError
	if errors.As(err, &rl) {
		return &RateLimitError{ResetAt: rl.Rate.Reset.Time}
	}
	var ab *gh.AbuseRateLimitError
	if errors.As(err, &ab) {
		return &RateLimitError{ResetAt: time.Now().Add(ab.GetRetryAfter()), Secondary: true}
	}
	return err
}
