package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

var ctx = context.Background()

// clock is a settable clock shared by the client and the fake; its sleeper
// records the waits and moves the clock on instead of sleeping.
type clock struct {
	mu    sync.Mutex
	t     time.Time
	waits []time.Duration
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.t = c.t.Add(d)
	return ctx.Err()
}

func (c *clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// world is a fake GitHub and an App client of it sharing one clock.
func world(t *testing.T, opts fakegithub.Options) (*fakegithub.Server, *Client, *clock) {
	t.Helper()
	clk := newClock()
	opts.Now = clk.Now
	fake := fakegithub.NewServer(opts)
	t.Cleanup(fake.Close)
	c, err := New(Config{BaseURL: fake.URL(), AppID: fake.AppID, PrivateKeyPEM: fake.PrivateKeyPEM, Sleep: clk.Sleep, Now: clk.Now, MaxWait: 90 * time.Second, Jitter: func(int64) int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	return fake, c, clk
}

func TestAppAuthEndToEndAndTokenCaching(t *testing.T) {
	fake, c, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	tok, exp, err := c.RegistrationToken(ctx, "acme")
	if err != nil || tok == "" || time.Until(exp) < 59*time.Minute {
		t.Fatalf("registration token %q %v %v", tok, exp, err)
	}
	again, _, err := c.RegistrationToken(ctx, "acme")
	if err != nil || again != tok {
		t.Fatalf("token not cached: %q vs %q (%v)", again, tok, err)
	}
	if n := fake.Count("POST /orgs/{org}/actions/runners/registration-token"); n != 1 {
		t.Fatalf("%d registration-token requests, want 1", n)
	}
	if n := fake.Count("GET /orgs/{org}/installation"); n != 1 {
		t.Fatalf("%d installation lookups, want 1", n)
	}
	// A repository of the same installation: its own lookup, but the same
	// installation token.
	rm, _, err := c.RemoveToken(ctx, "acme/api")
	if err != nil || rm == "" || rm == tok {
		t.Fatalf("remove token %q %v", rm, err)
	}
	if n := fake.Count("POST /repos/{org}/{repo}/actions/runners/remove-token"); n != 1 {
		t.Fatalf("repo remove-token requests = %d", n)
	}
	if n := fake.Count("POST /app/installations/{id}/access_tokens"); n != 1 {
		t.Fatalf("%d installation tokens minted, want 1 (one installation)", n)
	}
	if got := c.RunnerURL("acme/api"); got != fake.URL()+"/acme/api" {
		t.Fatalf("RunnerURL = %s", got)
	}
	if got, want := c.RateRemaining(), int64(fake.RateRemaining()); got != want || got <= 0 {
		t.Fatalf("RateRemaining = %d, fake says %d", got, want)
	}
}

func TestTokenCacheIsSharedAndRenewedBeforeExpiry(t *testing.T) {
	fake, c, clk := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	var wg sync.WaitGroup
	tokens := make([]string, 20)
	for i := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tokens[i], _, _ = c.RegistrationToken(ctx, "acme")
		}()
	}
	wg.Wait()
	for _, tok := range tokens {
		if tok == "" || tok != tokens[0] {
			t.Fatalf("concurrent callers got %q", tokens)
		}
	}
	if n := fake.Count("POST /orgs/{org}/actions/runners/registration-token"); n != 1 {
		t.Fatalf("%d token requests for 20 concurrent callers, want 1", n)
	}
	if n := fake.Count("GET /orgs/{org}/installation"); n != 1 {
		t.Fatalf("%d installation lookups for 20 concurrent callers, want 1", n)
	}
	clk.Advance(54 * time.Minute) // 6 minutes left: still served from the cache
	if tok, _, err := c.RegistrationToken(ctx, "acme"); err != nil || tok != tokens[0] {
		t.Fatalf("at 54 min: %q %v, want the cached token", tok, err)
	}
	clk.Advance(time.Minute + time.Second) // under 5 minutes left: renewed
	tok, exp, err := c.RegistrationToken(ctx, "acme")
	if err != nil || tok == tokens[0] || exp.Sub(clk.Now()) < 59*time.Minute {
		t.Fatalf("at 55 min: %q (expires %v) %v, want a fresh token", tok, exp, err)
	}
	if n := fake.Count("POST /orgs/{org}/actions/runners/registration-token"); n != 2 {
		t.Fatalf("%d token requests, want 2", n)
	}
}

func TestBadCredentialsAreClear(t *testing.T) {
	fake, _, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	other := fakegithub.New("acme") // same App id, another key
	defer other.Close()
	c, err := New(Config{BaseURL: fake.URL(), AppID: fake.AppID, PrivateKeyPEM: other.PrivateKeyPEM})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.RegistrationToken(ctx, "acme")
	if !IsUnauthorized(err) || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "installation") || !strings.Contains(err.Error(), "JSON web token") {
		t.Fatalf("wrong key: %v, want a clear 401 while finding the installation", err)
	}

	// A JWT that has expired by the server's clock.
	late, c2, clk := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	c2, _ = New(Config{BaseURL: late.URL(), AppID: late.AppID, PrivateKeyPEM: late.PrivateKeyPEM})
	clk.Advance(time.Hour)
	if _, err := c2.ListRunners(ctx, "acme"); !IsUnauthorized(err) || !strings.Contains(err.Error(), "Expiration time") {
		t.Fatalf("expired JWT: %v", err)
	}

	// Not installed on that organization: a distinct error, never "not found".
	_, c3, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	_, err = c3.GetRunner(ctx, "elsewhere", 1)
	if !errors.Is(err, ErrNotInstalled) || IsNotFound(err) {
		t.Fatalf("not installed: %v, want ErrNotInstalled and not IsNotFound", err)
	}

	if _, _, err := c.RegistrationToken(ctx, "not an owner"); err == nil || !strings.Contains(err.Error(), "owner:") {
		t.Fatalf("bad owner: %v", err)
	}
	for _, cfg := range []Config{{}, {AppID: 1}, {AppID: 1, Token: "x"}, {Token: "x", BaseURL: "ftp://x"}, {AppID: 1, PrivateKeyPEM: []byte("not a key")}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestRepositoryInstallationIsScoped(t *testing.T) {
	fake, c, _ := world(t, fakegithub.Options{Repos: []string{"solo/api"}})
	if _, _, err := c.RegistrationToken(ctx, "solo/api"); err != nil {
		t.Fatalf("repository installation: %v", err)
	}
	if n := fake.Count("GET /repos/{org}/{repo}/installation"); n != 1 {
		t.Fatalf("%d repository installation lookups", n)
	}
	if _, err := c.ListRunners(ctx, "solo/web"); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("another repository of the account: %v, want ErrNotInstalled", err)
	}
}

func TestTokenAuthAndGHES(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	fake.AddToken("ghp_test")
	c, err := New(Config{BaseURL: fake.APIURL(), Token: "ghp_test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.RegistrationToken(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if n := fake.Count("POST /orgs/{org}/actions/runners/registration-token"); n != 1 {
		t.Fatalf("%d token requests through /api/v3", n)
	}
	if got := c.RunnerURL("acme"); got != fake.URL()+"/acme" {
		t.Fatalf("GHES RunnerURL = %s", got)
	}
	bad, _ := New(Config{BaseURL: fake.APIURL(), Token: "ghp_wrong"})
	if _, _, err := bad.RegistrationToken(ctx, "acme"); !IsUnauthorized(err) || !strings.Contains(err.Error(), "Bad credentials") {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestEndpoints(t *testing.T) {
	for _, c := range []struct{ base, api, web string }{
		{"", "https://api.github.com/", "https://github.com"},
		{"https://api.github.com", "https://api.github.com/", "https://github.com"},
		{"https://ghe.example.com/api/v3/", "https://ghe.example.com/api/v3/", "https://ghe.example.com"},
		{"https://ghe.example.com/api/v3", "https://ghe.example.com/api/v3/", "https://ghe.example.com"},
		{"https://ghe.example.com", "https://ghe.example.com/api/v3/", "https://ghe.example.com"},
		{"https://api.acme.ghe.com/", "https://api.acme.ghe.com/", "https://acme.ghe.com"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080/api/v3/", "http://127.0.0.1:8080"},
	} {
		api, web, err := endpoints(c.base)
		if err != nil || api.String() != c.api || web != c.web {
			t.Errorf("endpoints(%q) = %v %q %v, want %s %s", c.base, api, web, err, c.api, c.web)
		}
	}
	for _, bad := range []string{"ftp://x", "not a url", "https://", "https://x/?a=b"} {
		if _, _, err := endpoints(bad); err == nil {
			t.Errorf("endpoints(%q) accepted", bad)
		}
	}
}

func TestParseOwner(t *testing.T) {
	for in, want := range map[string]Owner{"acme": {Org: "acme"}, "acme/api": {Org: "acme", Repo: "api"}, "a-b/c.d_e": {Org: "a-b", Repo: "c.d_e"}} {
		if got, err := ParseOwner(in); err != nil || got != want || got.String() != in {
			t.Errorf("ParseOwner(%q) = %+v %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "-acme", "acme-", "ac--me", "acme/", "acme/a/b", "acme/..", "acme api", strings.Repeat("a", 40)} {
		if _, err := ParseOwner(bad); err == nil {
			t.Errorf("ParseOwner(%q) accepted", bad)
		}
	}
}

func TestListRunnersReadsEveryPage(t *testing.T) {
	fake, c, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	for i := 0; i < 250; i++ {
		fake.AddRunner("acme", fmt.Sprintf("ghr-1-i-%05d", i), false, "run-1")
	}
	fake.AddRunner("acme/api", "repo-runner", false)
	runners, err := c.ListRunners(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(runners) != 250 || runners[249].Name != "ghr-1-i-00249" {
		t.Fatalf("%d runners, want 250", len(runners))
	}
	if n := fake.Count("GET /orgs/{org}/actions/runners"); n != 3 {
		t.Fatalf("%d list pages, want 3", n)
	}
	repo, err := c.ListRunners(ctx, "acme/api")
	if err != nil || len(repo) != 1 || repo[0].Name != "repo-runner" {
		t.Fatalf("repo runners %v %v", repo, err)
	}
	if r := runners[0]; r.Labels[0] != "run-1" || r.OS != "Linux" || !r.Online() || r.Busy {
		t.Fatalf("runner %+v", r)
	}
}

func TestRunnerNamedAsksGitHubForThatNameOnly(t *testing.T) {
	fake, c, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	for i := 0; i < 150; i++ {
		fake.AddRunner("acme", state.RunnerName(1, fmt.Sprintf("i-%05d", i)), false, "run-1")
	}
	want := fake.AddRunner("acme/api", state.RunnerName(2, "i-00007"), false, "run-2")
	r, err := c.RunnerNamed(ctx, "acme/api", "ghr-2-i-00007")
	if err != nil || r.ID != want || r.Labels[0] != "run-2" {
		t.Fatalf("RunnerNamed = %+v %v, want runner %d", r, err, want)
	}
	r, err = c.RunnerNamed(ctx, "acme", "ghr-1-i-00149")
	if err != nil || r.Name != "ghr-1-i-00149" {
		t.Fatalf("RunnerNamed on the org, past the first page = %+v %v", r, err)
	}
	if n := fake.Count("GET /orgs/{org}/actions/runners"); n != 1 {
		t.Fatalf("%d org list requests, want 1 (the name filter, not a walk through every page)", n)
	}
	if _, err := c.RunnerNamed(ctx, "acme", "ghr-9-i-00001"); !IsNotFound(err) {
		t.Fatalf("no such runner: %v, want IsNotFound", err)
	}
}

func TestGetDeleteBusyAndNotFound(t *testing.T) {
	fake, c, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	id := fake.AddRunner("acme", state.RunnerName(3, "i-abc"), true, "r")
	r, err := c.GetRunner(ctx, "acme", id)
	if err != nil || !r.Busy || r.Name != "ghr-3-i-abc" || r.ID != id {
		t.Fatalf("get %+v %v", r, err)
	}
	err = c.DeleteRunner(ctx, "acme", id)
	if !IsBusy(err) || !strings.Contains(err.Error(), "still running a job") {
		t.Fatalf("delete busy runner: %v, want IsBusy", err)
	}
	fake.SetBusy(id, false)
	if err := c.DeleteRunner(ctx, "acme", id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRunner(ctx, "acme", id); !IsNotFound(err) {
		t.Fatalf("get deleted runner: %v, want IsNotFound", err)
	}
	if err := c.DeleteRunner(ctx, "acme", id); err != nil {
		t.Fatalf("deleting a gone runner must succeed: %v", err)
	}
	if n := fake.Count("DELETE /orgs/{org}/actions/runners/{id}"); n != 3 {
		t.Fatalf("%d deletes sent, want 3 (a 422 is not retried)", n)
	}
	// A runner of another owner is not found through this one.
	other := fake.AddRunner("acme/api", "x", false)
	if _, err := c.GetRunner(ctx, "acme", other); !IsNotFound(err) {
		t.Fatalf("another owner's runner: %v", err)
	}
}

func TestRunnerGroupID(t *testing.T) {
	fake, c, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	for i := 0; i < 120; i++ {
		fake.AddRunnerGroup("acme", fmt.Sprintf("g%d", i))
	}
	gid, err := c.RunnerGroupID(ctx, "acme", "g110")
	if err != nil || gid != 112 { // Default is 1, g0 is 2
		t.Fatalf("group id %d %v", gid, err)
	}
	if n := fake.Count("GET /orgs/{org}/actions/runner-groups"); n != 2 {
		t.Fatalf("%d group pages read, want 2", n)
	}
	if _, err := c.RunnerGroupID(ctx, "acme", "none"); !IsNotFound(err) {
		t.Fatalf("missing group: %v", err)
	}
	if _, err := c.RunnerGroupID(ctx, "acme/api", "g1"); err == nil || !strings.Contains(err.Error(), "organizations") {
		t.Fatalf("repository owner: %v", err)
	}
}

func TestSecondaryRateLimitsAreWaitedOut(t *testing.T) {
	fake, c, clk := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	if _, err := c.ListRunners(ctx, "acme"); err != nil { // warm up the installation
		t.Fatal(err)
	}
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 1, Status: http.StatusForbidden, RetryAfter: 30})
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 1, Status: http.StatusTooManyRequests, RetryAfter: 7})
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 1, Status: http.StatusForbidden, Secondary: true})
	if _, err := c.ListRunners(ctx, "acme"); err != nil {
		t.Fatalf("secondary limits within MaxWait must be waited out: %v", err)
	}
	want := []time.Duration{30 * time.Second, 7 * time.Second, time.Minute}
	if got := clk.Waits(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v (Retry-After, Retry-After, a minute without one)", got, want)
	}
	if n := fake.Count("GET /orgs/{org}/actions/runners"); n != 5 {
		t.Fatalf("%d list requests, want 5", n)
	}

	// A 403 that is no rate limit (a permission problem) is not waited on.
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 1, Status: http.StatusForbidden})
	if _, err := c.ListRunners(ctx, "acme"); err == nil || IsRateLimited(err) || !strings.Contains(err.Error(), "403") {
		t.Fatalf("plain 403: %v", err)
	}
	if len(clk.Waits()) != 3 {
		t.Fatalf("waited on a plain 403: %v", clk.Waits())
	}

	// Repeated secondary limits naming no wait: a minute, then two (beyond
	// the 90 s MaxWait here, so that one is not waited for).
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 2, Status: http.StatusForbidden, Secondary: true})
	_, err := c.ListRunners(ctx, "acme")
	var doubled *RateLimitError
	if !errors.As(err, &doubled) || doubled.Wait != 2*time.Minute || len(clk.Waits()) != 4 || clk.Waits()[3] != time.Minute {
		t.Fatalf("repeated secondary limits: %v, waits %v", err, clk.Waits())
	}

	// A secondary limit longer than MaxWait fails at once.
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 1, Status: http.StatusForbidden, RetryAfter: 600})
	_, err = c.ListRunners(ctx, "acme")
	var rl *RateLimitError
	if !errors.As(err, &rl) || !rl.Secondary || rl.Wait != 10*time.Minute || len(clk.Waits()) != 4 {
		t.Fatalf("long secondary limit: %v, waits %v", err, clk.Waits())
	}
}

func TestPrimaryRateLimit(t *testing.T) {
	fake, c, clk := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	if _, err := c.ListRunners(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	// A reset within MaxWait is waited for; the budget is back afterwards.
	reset := clk.Now().Add(20 * time.Second).Truncate(time.Second)
	fake.SetRateBudget(0, reset)
	if _, err := c.ListRunners(ctx, "acme"); err != nil {
		t.Fatalf("primary limit resetting in 20 s: %v", err)
	}
	if w := clk.Waits(); len(w) != 1 || w[0] < 20*time.Second || w[0] > 22*time.Second {
		t.Fatalf("waits %v, want one until the reset", w)
	}
	if c.RateRemaining() < 4000 {
		t.Fatalf("RateRemaining after the reset = %d", c.RateRemaining())
	}

	// A reset an hour away: a typed error at once, saying when.
	reset = clk.Now().Add(time.Hour).Truncate(time.Second)
	fake.SetRateBudget(0, reset)
	_, err := c.ListRunners(ctx, "acme")
	var rl *RateLimitError
	if !errors.As(err, &rl) || !IsRateLimited(err) || rl.Secondary || rl.ResetAt.Before(reset) || rl.ResetAt.After(reset.Add(2*time.Second)) {
		t.Fatalf("primary limit an hour away: %v, want a RateLimitError at %v", err, reset)
	}
	if !strings.Contains(err.Error(), reset.UTC().Format("2006-01-02T15:04")) {
		t.Fatalf("error does not say when: %v", err)
	}
	if len(clk.Waits()) != 1 {
		t.Fatalf("waited %v for a reset beyond MaxWait", clk.Waits()[1:])
	}
	if c.RateRemaining() != 0 {
		t.Fatalf("RateRemaining = %d, want 0", c.RateRemaining())
	}
}

func TestServerErrorsAreRetriedWithBackoff(t *testing.T) {
	fake, c, clk := world(t, fakegithub.Options{Orgs: []string{"acme"}})
	if _, err := c.ListRunners(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 2, Status: http.StatusBadGateway})
	if _, err := c.ListRunners(ctx, "acme"); err != nil {
		t.Fatalf("5xx must be retried: %v", err)
	}
	// Jitter 0: the waits are the lower bounds, 125 ms then 250 ms.
	if w := clk.Waits(); fmt.Sprint(w) != "[125ms 250ms]" {
		t.Fatalf("backoff waits %v", w)
	}
	before := fake.Count("GET /orgs/{org}/actions/runners")
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 10, Status: http.StatusServiceUnavailable})
	if _, err := c.ListRunners(ctx, "acme"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("exhausted 5xx: %v", err)
	}
	if n := fake.Count("GET /orgs/{org}/actions/runners") - before; n != 4 {
		t.Fatalf("%d attempts, want MaxAttempts = 4", n)
	}
	// Token POSTs are retried too.
	fake.ClearFaults()
	fake.Inject(fakegithub.Fault{Path: "/registration-token", Count: 1, Status: http.StatusInternalServerError})
	if _, _, err := c.RegistrationToken(ctx, "acme"); err != nil {
		t.Fatalf("registration token after a 500: %v", err)
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	rt := &retrying{jitter: defaultJitter}
	for attempt := 1; attempt <= 9; attempt++ {
		base := 250 * time.Millisecond << min(attempt-1, 6)
		for i := 0; i < 50; i++ {
			if d := rt.backoff(attempt); d < base/2 || d >= base*3/2 {
				t.Fatalf("attempt %d: %v outside [%v, %v)", attempt, d, base/2, base*3/2)
			}
		}
	}
}

// flaky fails the first n round trips with a network error.
type flaky struct {
	mu   sync.Mutex
	n    int
	seen []string
	next http.RoundTripper
}

func (f *flaky) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.seen = append(f.seen, req.Method+" "+req.URL.Path)
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return nil, errors.New("connection reset by peer")
	}
	return f.next.RoundTrip(req)
}

func TestNetworkErrorsAndWhatIsRetried(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	fake.AddToken("ghp_test")
	clk := newClock()
	tr := &flaky{n: 2, next: http.DefaultTransport}
	c, err := New(Config{BaseURL: fake.URL(), Token: "ghp_test", Transport: tr, Sleep: clk.Sleep, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListRunners(ctx, "acme"); err != nil || len(tr.seen) != 3 {
		t.Fatalf("after two network errors: %v (%d attempts)", err, len(tr.seen))
	}
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"GET", "/orgs/a/actions/runners", true},
		{"DELETE", "/orgs/a/actions/runners/1", true},
		{"POST", "/api/v3/orgs/a/actions/runners/registration-token", true},
		{"POST", "/repos/a/b/actions/runners/remove-token", true},
		{"POST", "/app/installations/1/access_tokens", true},
		{"POST", "/orgs/a/actions/runners/generate-jitconfig", false},
		{"PATCH", "/orgs/a/actions/runner-groups/1", false},
	} {
		req, _ := http.NewRequest(c.method, "https://api.github.com"+c.path, nil)
		if got := retryable(req); got != c.want {
			t.Errorf("retryable(%s %s) = %v", c.method, c.path, got)
		}
	}
}

func TestWaitsStopWithTheContext(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	fake.AddToken("ghp_test")
	c, err := New(Config{BaseURL: fake.URL(), Token: "ghp_test"}) // real sleeps
	if err != nil {
		t.Fatal(err)
	}
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 1, Status: http.StatusTooManyRequests, RetryAfter: 30})
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.ListRunners(short, "acme"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled wait: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("the wait ignored the context: %v", time.Since(start))
	}
}

func TestRunnerNames(t *testing.T) {
	name := state.RunnerName(3, "i-0abc123")
	if name != "ghr-3-i-0abc123" {
		t.Fatalf("RunnerName = %s", name)
	}
	for in, want := range map[string]string{name: "i-0abc123", "ghr-12-i-00000": "i-00000", "ghr-x-i-1": "", "runner-i-1": "", "ghr-1-j-1": "", "ghr-1-i-": ""} {
		got, ok := InstanceOf(in)
		if got != want || ok != (want != "") {
			t.Errorf("InstanceOf(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	if !NameMatchesInstance("ghr-9-i-1", "i-1") || NameMatchesInstance("ghr-9-i-11", "i-1") {
		t.Fatal("NameMatchesInstance matches a different instance")
	}
	runners := []Runner{{ID: 1, Name: "ghr-1-i-aa"}, {ID: 2, Name: "ghr-2-i-bb"}, {ID: 3, Name: "other"}}
	if r, ok := FindRunner(runners, 3, "i-aa"); !ok || r.ID != 3 {
		t.Fatalf("by id: %+v %v", r, ok)
	}
	if r, ok := FindRunner(runners, 99, "i-bb"); !ok || r.ID != 2 {
		t.Fatalf("by name when the id is gone: %+v %v", r, ok)
	}
	if _, ok := FindRunner(runners, 0, "i-cc"); ok {
		t.Fatal("found a runner for an unknown instance")
	}
}

// Issue 31, item 7: every function maps a runner name to its instance with
// this one parser, token pools' and just-in-time names alike; scale-down
// read only the first form, so a busy just-in-time runner did not keep
// its instance.
func TestARunnerNameOfOursIsReadInBothForms(t *testing.T) {
	for _, c := range []struct {
		name string
		want RunnerNameParts
		ok   bool
	}{
		{"ghr-3-i-0abc", RunnerNameParts{Uses: 3, InstanceID: "i-0abc"}, true},
		{"ghr-0-i-0abc", RunnerNameParts{Uses: 0, InstanceID: "i-0abc"}, true},
		{"ghr-3-12-i-0abc", RunnerNameParts{Uses: 3, Seq: 12, InstanceID: "i-0abc"}, true},
		{"ghr-03-i-0abc", RunnerNameParts{}, false},  // not a number we write
		{"ghr-3-0-i-0abc", RunnerNameParts{}, false}, // just-in-time numbers start at 1
		{"ghr-x-i-0abc", RunnerNameParts{}, false},
		{"ghr-3-i-0abc-extra", RunnerNameParts{}, false},
		{"someone-elses-runner", RunnerNameParts{}, false},
	} {
		got, ok := ParseRunnerName(c.name)
		if ok != c.ok || got != c.want {
			t.Errorf("ParseRunnerName(%q) = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// Issue 31, item 2: GitHub Enterprise Server before 3.11 has no name filter
// on list runners and answers an unfiltered page; reading only that page,
// RunnerNamed called a runner past it gone, and a given-up instance's
// runner stayed registered. When the answer holds other names, every page
// is read.
func TestRunnerNamedReadsEveryPageWhereTheServerHasNoNameFilter(t *testing.T) {
	fake, c, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}, Version: "ghes-3.10"})
	for i := 0; i < 250; i++ {
		fake.AddRunner("acme", state.RunnerName(1, fmt.Sprintf("i-%05d", i)), false, "run-1")
	}
	r, err := c.RunnerNamed(ctx, "acme", "ghr-1-i-00230")
	if err != nil || r.Name != "ghr-1-i-00230" {
		t.Fatalf("a runner on the third page: %+v %v", r, err)
	}
	if _, err := c.RunnerNamed(ctx, "acme", "ghr-9-i-00001"); !IsNotFound(err) {
		t.Fatalf("no such runner: %v, want IsNotFound", err)
	}
	if n := fake.Count("GET /orgs/{org}/actions/runners"); n != 6 {
		t.Fatalf("%d list requests, want 6 (three pages each)", n)
	}
}
