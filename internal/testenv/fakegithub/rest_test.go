package fakegithub_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// do sends a request to the fake and decodes its JSON answer.
func do(t *testing.T, method, url, auth string, out any) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, raw)
		}
	}
	return resp
}

func appJWT(t *testing.T, pemKey []byte, appID int64, iat, exp time.Time) string {
	t.Helper()
	block, _ := pem.Decode(pemKey)
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": strconv.FormatInt(appID, 10), "iat": iat.Unix(), "exp": exp.Unix()}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + s
}

type apiMessage struct {
	Message string `json:"message"`
	Token   string `json:"token"`
	Expires string `json:"expires_at"`
	ID      int64  `json:"id"`
}

func TestAppJWTIsVerified(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	fake := fakegithub.NewServer(fakegithub.Options{Orgs: []string{"acme"}, PrivateKey: key, AppID: 77, Now: func() time.Time { return now }})
	defer fake.Close()
	if fake.AppID != 77 || !strings.Contains(string(fake.PrivateKeyPEM), "RSA PRIVATE KEY") {
		t.Fatalf("app %d %q", fake.AppID, fake.PrivateKeyPEM[:30])
	}
	good := appJWT(t, fake.PrivateKeyPEM, 77, now.Add(-30*time.Second), now.Add(2*time.Minute))
	var inst apiMessage
	if resp := do(t, "GET", fake.URL()+"/orgs/acme/installation", good, &inst); resp.StatusCode != 200 || inst.ID == 0 {
		t.Fatalf("good JWT: %d %+v", resp.StatusCode, inst)
	}
	other := fakegithub.New()
	defer other.Close()
	for name, c := range map[string]struct {
		auth, msg string
	}{
		"none":        {"", "could not be decoded"},
		"other key":   {appJWT(t, other.PrivateKeyPEM, 77, now.Add(-30*time.Second), now.Add(time.Minute)), "could not be decoded"},
		"other app":   {appJWT(t, fake.PrivateKeyPEM, 78, now.Add(-30*time.Second), now.Add(time.Minute)), "Integration not found"},
		"expired":     {appJWT(t, fake.PrivateKeyPEM, 77, now.Add(-10*time.Minute), now.Add(-time.Second)), "'Expiration time'"},
		"too long":    {appJWT(t, fake.PrivateKeyPEM, 77, now.Add(-30*time.Second), now.Add(11*time.Minute)), "too far in the future"},
		"future iat":  {appJWT(t, fake.PrivateKeyPEM, 77, now.Add(time.Minute), now.Add(5*time.Minute)), "'Issued at'"},
		"not a token": {"Bearer abc.def.ghi", "could not be decoded"},
	} {
		var msg apiMessage
		if resp := do(t, "GET", fake.URL()+"/orgs/acme/installation", c.auth, &msg); resp.StatusCode != 401 || !strings.Contains(msg.Message, c.msg) {
			t.Errorf("%s: %d %q, want 401 %q", name, resp.StatusCode, msg.Message, c.msg)
		}
	}
	if resp := do(t, "GET", fake.URL()+"/orgs/nobody/installation", good, nil); resp.StatusCode != 404 {
		t.Fatalf("no installation: %d", resp.StatusCode)
	}

	// The installation token: 201, an hour, and required by the runner API.
	var tok apiMessage
	resp := do(t, "POST", fake.URL()+fmt.Sprintf("/app/installations/%d/access_tokens", inst.ID), good, &tok)
	exp, _ := time.Parse(time.RFC3339, tok.Expires)
	if resp.StatusCode != 201 || !strings.HasPrefix(tok.Token, "ghs_") || exp.Sub(now) < 59*time.Minute {
		t.Fatalf("access token: %d %+v", resp.StatusCode, tok)
	}
	if resp := do(t, "GET", fake.URL()+"/orgs/acme/actions/runners", "", nil); resp.StatusCode != 401 {
		t.Fatalf("runners without a token: %d", resp.StatusCode)
	}
	if resp := do(t, "GET", fake.URL()+"/orgs/acme/actions/runners", good, nil); resp.StatusCode != 401 {
		t.Fatalf("runners with the App JWT: %d", resp.StatusCode)
	}
	for _, scheme := range []string{"token ", "Bearer "} {
		if resp := do(t, "GET", fake.URL()+"/orgs/acme/actions/runners", scheme+tok.Token, nil); resp.StatusCode != 200 {
			t.Fatalf("runners with %q: %d", scheme, resp.StatusCode)
		}
	}
	// An hour later the installation token has expired.
	now = now.Add(time.Hour)
	var msg apiMessage
	if resp := do(t, "GET", fake.URL()+"/orgs/acme/actions/runners", "token "+tok.Token, &msg); resp.StatusCode != 401 || msg.Message != "Bad credentials" {
		t.Fatalf("expired installation token: %d %q", resp.StatusCode, msg.Message)
	}
}

func TestInstallationTokensAreScoped(t *testing.T) {
	fake := fakegithub.NewServer(fakegithub.Options{Orgs: []string{"acme"}, Repos: []string{"solo/api"}})
	defer fake.Close()
	jwtAuth := appJWT(t, fake.PrivateKeyPEM, fake.AppID, time.Now().Add(-30*time.Second), time.Now().Add(time.Minute))
	token := func(owner string) string {
		var inst, tok apiMessage
		path := "/orgs/" + owner + "/installation"
		if strings.Contains(owner, "/") {
			path = "/repos/" + owner + "/installation"
		}
		do(t, "GET", fake.URL()+path, jwtAuth, &inst)
		do(t, "POST", fake.URL()+fmt.Sprintf("/app/installations/%d/access_tokens", inst.ID), jwtAuth, &tok)
		return "token " + tok.Token
	}
	acme, solo := token("acme"), token("solo/api")
	for _, c := range []struct {
		auth, path string
		want       int
	}{
		{acme, "/orgs/acme/actions/runners", 200},
		{acme, "/repos/acme/anything/actions/runners", 200},
		{acme, "/orgs/solo/actions/runners", 403},
		{solo, "/repos/solo/api/actions/runners", 200},
		{solo, "/repos/solo/web/actions/runners", 403},
		{solo, "/orgs/solo/actions/runners", 403},
		{acme, "/orgs/ghost/actions/runners", 404},
	} {
		if resp := do(t, "GET", fake.URL()+c.path, c.auth, nil); resp.StatusCode != c.want {
			t.Errorf("GET %s: %d, want %d", c.path, resp.StatusCode, c.want)
		}
	}
	if resp := do(t, "GET", fake.URL()+"/repos/solo/web/installation", jwtAuth, nil); resp.StatusCode != 404 {
		t.Fatalf("installation of an uncovered repository: %d", resp.StatusCode)
	}
}

func TestRunnerEndpoints(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	fake.AddToken("pat")
	auth := "token pat"
	for _, prefix := range []string{"", "/api/v3"} {
		for _, scope := range []string{"/orgs/acme", "/repos/acme/api"} {
			var tok apiMessage
			resp := do(t, "POST", fake.URL()+prefix+scope+"/actions/runners/registration-token", auth, &tok)
			exp, _ := time.Parse(time.RFC3339, tok.Expires)
			if resp.StatusCode != 201 || len(tok.Token) != 29 || time.Until(exp) < 59*time.Minute {
				t.Fatalf("%s%s registration token: %d %+v", prefix, scope, resp.StatusCode, tok)
			}
			if resp := do(t, "POST", fake.URL()+prefix+scope+"/actions/runners/remove-token", auth, &tok); resp.StatusCode != 201 || tok.Token == "" {
				t.Fatalf("remove token: %d", resp.StatusCode)
			}
		}
	}
	busy := fake.AddRunner("acme", "ghr-1-i-1", true, "run-1")
	var runner struct {
		ID     int64  `json:"id"`
		Name   string `json:"name"`
		OS     string `json:"os"`
		Status string `json:"status"`
		Busy   bool   `json:"busy"`
		Labels []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"labels"`
	}
	url := fmt.Sprintf("%s/orgs/acme/actions/runners/%d", fake.URL(), busy)
	if resp := do(t, "GET", url, auth, &runner); resp.StatusCode != 200 || runner.Name != "ghr-1-i-1" || runner.Status != "online" || !runner.Busy || runner.OS != "Linux" || len(runner.Labels) != 1 || runner.Labels[0].Name != "run-1" || runner.Labels[0].Type != "custom" {
		t.Fatalf("get runner: %d %+v", resp.StatusCode, runner)
	}
	if resp := do(t, "GET", fmt.Sprintf("%s/repos/acme/api/actions/runners/%d", fake.URL(), busy), auth, nil); resp.StatusCode != 404 {
		t.Fatalf("an org runner through a repository: %d", resp.StatusCode)
	}
	var msg apiMessage
	if resp := do(t, "DELETE", url, auth, &msg); resp.StatusCode != 422 || msg.Message != `Bad request - Runner "ghr-1-i-1" is still running a job"` {
		t.Fatalf("delete busy: %d %q", resp.StatusCode, msg.Message)
	}
	fake.SetBusy(busy, false)
	if resp := do(t, "DELETE", url, auth, nil); resp.StatusCode != 204 {
		t.Fatalf("delete idle: %d", resp.StatusCode)
	}
	if resp := do(t, "DELETE", url, auth, &msg); resp.StatusCode != 404 || msg.Message != "Not Found" {
		t.Fatalf("delete again: %d %q", resp.StatusCode, msg.Message)
	}
	// Offline once the runner has been silent for OfflineAfter.
	quiet := fake.AddRunner("acme", "quiet", false, "x")
	fake.SetOnline(quiet, false)
	if r, _ := fake.Runner(quiet); r.Online {
		t.Fatal("a silent runner is online")
	}
	fake.SetOnline(quiet, true)
	fake.SetOfflineAfter(50 * time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if r, _ := fake.Runner(quiet); r.Online {
		t.Fatal("still online after OfflineAfter")
	}
}

func TestPaginationAndGroups(t *testing.T) {
	fake := fakegithub.New("acme")
	defer fake.Close()
	fake.AddToken("pat")
	for i := 0; i < 250; i++ {
		fake.AddRunner("acme", fmt.Sprintf("r%03d", i), false)
	}
	var page struct {
		Total   int `json:"total_count"`
		Runners []struct {
			Name string `json:"name"`
		} `json:"runners"`
	}
	resp := do(t, "GET", fake.URL()+"/api/v3/orgs/acme/actions/runners?per_page=500&page=2", "token pat", &page)
	link := resp.Header.Get("Link")
	if page.Total != 250 || len(page.Runners) != 100 || page.Runners[0].Name != "r100" {
		t.Fatalf("page 2: total %d, %d runners, first %+v", page.Total, len(page.Runners), page.Runners[:1])
	}
	for _, want := range []string{`/api/v3/orgs/acme/actions/runners?page=3&per_page=100>; rel="next"`, `page=3&per_page=100>; rel="last"`, `page=1&per_page=100>; rel="prev"`, `rel="first"`} {
		if !strings.Contains(link, want) {
			t.Fatalf("Link %q lacks %q", link, want)
		}
	}
	resp = do(t, "GET", fake.URL()+"/orgs/acme/actions/runners?page=3&per_page=100", "token pat", &page)
	if len(page.Runners) != 50 || strings.Contains(resp.Header.Get("Link"), `rel="next"`) {
		t.Fatalf("last page: %d runners, Link %q", len(page.Runners), resp.Header.Get("Link"))
	}
	resp = do(t, "GET", fake.URL()+"/orgs/acme/actions/runners", "token pat", &page)
	if len(page.Runners) != 30 {
		t.Fatalf("default page size: %d", len(page.Runners))
	}
	do(t, "GET", fake.URL()+"/orgs/acme/actions/runners?name=r042", "token pat", &page)
	if page.Total != 1 || page.Runners[0].Name != "r042" {
		t.Fatalf("name filter: %+v", page)
	}

	fake.AddRunnerGroup("acme", "ci")
	var groups struct {
		Total  int `json:"total_count"`
		Groups []struct {
			ID      int64  `json:"id"`
			Name    string `json:"name"`
			Default bool   `json:"default"`
		} `json:"runner_groups"`
	}
	do(t, "GET", fake.URL()+"/orgs/acme/actions/runner-groups", "token pat", &groups)
	if groups.Total != 2 || groups.Groups[0].Name != "Default" || !groups.Groups[0].Default || groups.Groups[1].Name != "ci" || groups.Groups[1].ID != 2 {
		t.Fatalf("groups %+v", groups)
	}
	if resp := do(t, "GET", fake.URL()+"/repos/acme/api/actions/runner-groups", "token pat", nil); resp.StatusCode != 404 {
		t.Fatalf("repository runner groups: %d", resp.StatusCode)
	}
}

func TestRateLimitHeadersAndFaults(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	fake := fakegithub.NewServer(fakegithub.Options{Orgs: []string{"acme"}, Now: clock, RateLimit: 3, Seed: 1})
	defer fake.Close()
	fake.AddToken("pat")
	url := fake.URL() + "/orgs/acme/actions/runners"
	for i, want := range []string{"2", "1", "0"} {
		resp := do(t, "GET", url, "token pat", nil)
		h := resp.Header
		if resp.StatusCode != 200 || h.Get("X-Ratelimit-Remaining") != want || h.Get("X-Ratelimit-Limit") != "3" || h.Get("X-Ratelimit-Used") != strconv.Itoa(i+1) || h.Get("X-Ratelimit-Resource") != "core" || h.Get("X-Ratelimit-Reset") == "" {
			t.Fatalf("request %d: %d %v", i, resp.StatusCode, h)
		}
	}
	var msg apiMessage
	resp := do(t, "GET", url, "token pat", &msg)
	if resp.StatusCode != 403 || resp.Header.Get("X-Ratelimit-Remaining") != "0" || !strings.Contains(msg.Message, "rate limit exceeded") {
		t.Fatalf("over budget: %d %v %q", resp.StatusCode, resp.Header, msg.Message)
	}
	mu.Lock()
	now = now.Add(time.Hour) // the window rolls over
	mu.Unlock()
	if resp := do(t, "GET", url, "token pat", nil); resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Remaining") != "2" {
		t.Fatalf("after the reset: %d %v", resp.StatusCode, resp.Header)
	}

	fake.SetRateBudget(1000, now.Add(time.Hour))
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 1, Status: 429, RetryAfter: 9})
	resp = do(t, "GET", url, "token pat", &msg)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "9" || !strings.Contains(msg.Message, "secondary rate limit") {
		t.Fatalf("secondary fault: %d %v %q", resp.StatusCode, resp.Header, msg.Message)
	}
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 1, Status: 403, Primary: true})
	if resp := do(t, "GET", url, "token pat", nil); resp.StatusCode != 403 || resp.Header.Get("X-Ratelimit-Remaining") != "0" {
		t.Fatalf("primary fault: %d %v", resp.StatusCode, resp.Header)
	}
	fake.Inject(fakegithub.Fault{Method: "POST", Count: 2, Status: 502})
	if resp := do(t, "GET", url, "token pat", nil); resp.StatusCode != 200 {
		t.Fatalf("a POST fault hit a GET: %d", resp.StatusCode)
	}
	for i := 0; i < 2; i++ {
		if resp := do(t, "POST", fake.URL()+"/orgs/acme/actions/runners/remove-token", "token pat", nil); resp.StatusCode != 502 {
			t.Fatalf("POST fault %d: %d", i, resp.StatusCode)
		}
	}
	if resp := do(t, "POST", fake.URL()+"/orgs/acme/actions/runners/remove-token", "token pat", nil); resp.StatusCode != 201 {
		t.Fatalf("fault not used up: %d", resp.StatusCode)
	}

	// A fraction of requests, reproducibly.
	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Fraction: 0.5, Status: 500})
	failed := 0
	for i := 0; i < 200; i++ {
		if resp := do(t, "GET", url, "token pat", nil); resp.StatusCode == 500 {
			failed++
		}
	}
	if failed < 70 || failed > 130 {
		t.Fatalf("%d of 200 failed with Fraction 0.5", failed)
	}
	fake.ClearFaults()

	fake.Inject(fakegithub.Fault{Path: "/actions/runners", Count: 1, Latency: 300 * time.Millisecond})
	start := time.Now()
	if resp := do(t, "GET", url, "token pat", nil); resp.StatusCode != 200 || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("latency fault: %d after %v", resp.StatusCode, time.Since(start))
	}
	if n := fake.Count("GET /orgs/{org}/actions/runners"); n != 209 {
		t.Fatalf("count = %d, want 209", n)
	}
	if n := fake.Counts()["POST /orgs/{org}/actions/runners/remove-token"]; n != 3 {
		t.Fatalf("Counts = %d", n)
	}
}
