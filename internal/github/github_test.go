package github

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fakegithub"
)

var ctx = context.Background()

// sleeper records the waits instead of sleeping.
type sleeper struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *sleeper) Sleep(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waits = append(s.waits, d)
}

func appClient(t *testing.T, fake *fakegithub.Server, base string) (*Client, *sleeper) {
	t.Helper()
	sl := &sleeper{}
	c, err := New(Config{BaseURL: base, AppID: fake.AppID, PrivateKeyPEM: fake.PrivateKeyPEM, Sleep: sl.Sleep, MaxWait: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c, sl
}

func TestAppAuthTokensAndCaching(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	c, _ := appClient(t, fake, fake.URL()+"/")
	tok, exp, err := c.RegistrationToken(ctx, "acme")
	if err != nil || tok == "" || time.Until(exp) < 50*time.Minute {
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
	rm, _, err := c.RemoveToken(ctx, "acme/api")
	if err != nil || rm == "" || rm == tok {
		t.Fatalf("remove token %q %v", rm, err)
	}
	if n := fake.Count("POST /repos/{org}/{repo}/actions/runners/remove-token"); n != 1 {
		t.Fatalf("repo remove-token requests = %d", n)
	}
	if got := c.RunnerURL("acme/api"); got != fake.URL()+"/acme/api" {
		t.Fatalf("RunnerURL = %s", got)
	}
	if c.RateRemaining() <= 0 {
		t.Fatalf("rate remaining = %d", c.RateRemaining())
	}
}

func TestBadCredentialsAreClear(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	other := fakegithub.New("acme") // same App id, another key
	defer other.Close()
	c, err := New(Config{BaseURL: fake.URL(), AppID: fake.AppID, PrivateKeyPEM: other.PrivateKeyPEM})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.RegistrationToken(ctx, "acme")
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "installation") {
		t.Fatalf("wrong key: %v, want a 401 while finding the installation", err)
	}
	if _, _, err := c.RegistrationToken(ctx, "not an owner"); err == nil || !strings.Contains(err.Error(), "owner:") {
		t.Fatalf("bad owner: %v", err)
	}
	for _, cfg := range []Config{{}, {AppID: 1}, {AppID: 1, Token: "x"}, {Token: "x", BaseURL: "ftp://x"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestTokenAuthAndGHESPrefix(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	fake.AddToken("ghp_test")
	c, err := New(Config{BaseURL: fake.URL() + "/api/v3/", Token: "ghp_test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.RegistrationToken(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if got := c.RunnerURL("acme"); got != fake.URL()+"/acme" {
		t.Fatalf("GHES RunnerURL = %s", got)
	}
	bad, _ := New(Config{BaseURL: fake.URL() + "/api/v3/", Token: "ghp_wrong"})
	if _, _, err := bad.RegistrationToken(ctx, "acme"); err == nil || !strings.Contains(err.Error(), "Bad credentials") {
		t.Fatalf("wrong token: %v", err)
	}
}

func TestListRunnersReadsEveryPage(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	for i := 0; i < 250; i++ {
		fake.AddRunner("acme", fmt.Sprintf("ghr-1-i-%05d", i), false, "run-1")
	}
	fake.AddRunner("acme/api", "repo-runner", false)
	c, _ := appClient(t, fake, fake.URL())
	runners, err := c.ListRunners(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(runners) != 250 {
		t.Fatalf("%d runners, want 250", len(runners))
	}
	if n := fake.Count("GET /orgs/{org}/actions/runners"); n != 3 {
		t.Fatalf("%d list pages, want 3", n)
	}
	repo, err := c.ListRunners(ctx, "acme/api")
	if err != nil || len(repo) != 1 || repo[0].Name != "repo-runner" {
		t.Fatalf("repo runners %v %v", repo, err)
	}
	if id, ok := InstanceOf(runners[0].Name); !ok || id != "i-00000" || runners[0].Labels[0] != "run-1" {
		t.Fatalf("runner %+v → instance %q", runners[0], id)
	}
}

func TestGetDeleteBusyAndGroups(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	fake.AddRunnerGroup("acme", "ci")
	c, _ := appClient(t, fake, fake.URL())
	id := fake.AddRunner("acme", RunnerName(3, "i-abc"), true, "r")
	r, err := c.GetRunner(ctx, "acme", id)
	if err != nil || !r.Busy || r.Name != "ghr-3-i-abc" {
		t.Fatalf("get %+v %v", r, err)
	}
	if err := c.DeleteRunner(ctx, "acme", id); !IsBusy(err) {
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
	gid, err := c.RunnerGroupID(ctx, "acme", "ci")
	if err != nil || gid != 2 {
		t.Fatalf("group id %d %v", gid, err)
	}
	if _, err := c.RunnerGroupID(ctx, "acme", "none"); !IsNotFound(err) {
		t.Fatalf("missing group: %v", err)
	}
}

func TestRateLimitsAndServerErrors(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	c, sl := appClient(t, fake, fake.URL())
	if _, err := c.ListRunners(ctx, "acme"); err != nil { // warm up the installation
		t.Fatal(err)
	}

	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 1, Status: http.StatusForbidden, RetryAfter: 30})
	if _, err := c.ListRunners(ctx, "acme"); err != nil {
		t.Fatalf("secondary limit within MaxWait must be waited out: %v", err)
	}
	if len(sl.waits) != 1 || sl.waits[0] != 30*time.Second {
		t.Fatalf("waits %v, want one of 30s (Retry-After)", sl.waits)
	}

	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 2, Status: 502})
	if _, err := c.ListRunners(ctx, "acme"); err != nil {
		t.Fatalf("5xx must be retried: %v", err)
	}
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 10, Status: 503})
	if _, err := c.ListRunners(ctx, "acme"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("exhausted 5xx: %v", err)
	}
	fake.ClearFaults()

	before := len(sl.waits)
	fake.SetRateBudget(0, time.Now().Add(time.Hour))
	_, err := c.ListRunners(ctx, "acme")
	if !IsRateLimited(err) {
		t.Fatalf("primary limit an hour away: %v, want IsRateLimited", err)
	}
	if len(sl.waits) != before {
		t.Fatalf("waited %v for a reset beyond MaxWait", sl.waits[before:])
	}
	if c.RateRemaining() != 0 {
		t.Fatalf("rate remaining = %d, want 0", c.RateRemaining())
	}
}
