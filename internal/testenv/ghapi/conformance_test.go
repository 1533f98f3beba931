package ghapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/ghapi"
)

var ctx = context.Background()

// descriptions loads each version's description once per test binary.
var descriptions = sync.OnceValues(func() (map[string]*ghapi.Description, error) {
	files, err := ghapi.Files()
	if err != nil {
		return nil, err
	}
	out := map[string]*ghapi.Description{}
	for v, f := range files {
		if out[v], err = ghapi.Load(v, f); err != nil {
			return nil, err
		}
	}
	return out, nil
})

func description(t *testing.T, version string) *ghapi.Description {
	t.Helper()
	all, err := descriptions()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := all[version]
	if !ok {
		t.Fatalf("no description of %s in tools/openapi (pin a release of @octokit/openapi that has it in tools/openapi/package.json)", version)
	}
	return d
}

// The versions README claims are those the fake models, and those are
// the ones the pinned descriptions carry: a new pin with a new GHES
// release fails here until the fake (and README) know it.
func TestTheFakeModelsEveryVersionThePinnedDescriptionsCarry(t *testing.T) {
	all, err := descriptions()
	if err != nil {
		t.Fatal(err)
	}
	described := slices.Sorted(maps.Keys(all))
	modelled := slices.Sorted(slices.Values(fakegithub.Versions()))
	if !slices.Equal(described, modelled) {
		t.Fatalf("descriptions of %v, the fake models %v", described, modelled)
	}
}

// Issue 31: the fake GitHub held to GitHub's published API. For
// api.github.com and each GHES release: the routes the fake serves and
// the query parameters it reads are the description's; every answer it
// gave our client's calls (and a few direct requests) has a documented
// (or allow-listed) status and validates against the operation's
// schema; every request our client sent validates against the
// operation's parameters and body.
func TestTheFakeAndOurClientAgreeWithEachVersionsDescription(t *testing.T) {
	for _, version := range fakegithub.Versions() {
		t.Run(version, func(t *testing.T) {
			for _, p := range conformance(t, fakegithub.Options{Version: version}) {
				t.Error(p)
			}
		})
	}
}

// conformance starts a fake (opts, with organizations of its own), runs
// the scenario against it and returns what disagrees with the
// description of its version.
func conformance(t *testing.T, opts fakegithub.Options) []string {
	t.Helper()
	version := cmp.Or(opts.Version, fakegithub.APIGitHubCom)
	d := description(t, version)
	reference := fakegithub.NewServer(fakegithub.Options{})
	reference.Close()
	opts.Orgs = []string{"acme", "other"}
	fake := fakegithub.NewServer(opts)
	defer fake.Close()
	problems := checkRoutes(d, fake.Routes(), reference.Routes())
	jitOp, err := d.Operation("POST", "/orgs/{org}/actions/runners/generate-jitconfig")
	if err != nil {
		t.Fatal(err)
	}
	exchanges := drive(t, fake, jitOp != nil)
	for _, x := range exchanges {
		problems = append(problems, checkExchange(d, x)...)
	}
	if len(exchanges) < 30 {
		t.Fatalf("only %d exchanges recorded: the scenario did not run", len(exchanges))
	}
	return problems
}

// drive makes the calls the product makes, through our client, and a few
// direct requests for the answers it never provokes; it returns every
// exchange. jit: the version has just-in-time runners.
func drive(t *testing.T, fake *fakegithub.Server, jit bool) []ghapi.Exchange {
	t.Helper()
	rec := &ghapi.Recorder{}
	c, err := github.New(github.Config{BaseURL: fake.APIURL(), AppID: fake.AppID, PrivateKeyPEM: fake.PrivateKeyPEM, Transport: rec,
		MaxAttempts: 2, MaxWait: time.Second, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	for _, owner := range []string{"acme", "acme/api"} {
		_, _, err := c.RegistrationToken(ctx, owner)
		must("registration token "+owner, err)
		_, _, err = c.RemoveToken(ctx, owner)
		must("remove token "+owner, err)
	}
	// Runners: two pages of the organization's, one of the repository's.
	for i := range 120 {
		fake.AddRunner("acme", fmt.Sprintf("ghr-1-i-%05d", i), false, "run-1")
	}
	idle := fake.AddRunner("acme", "ghr-1-i-idle", false, "run-1")
	busy := fake.AddRunner("acme", "ghr-1-i-busy", true, "run-1")
	repoRunner := fake.AddRunner("acme/api", "ghr-1-i-repo", false, "run-1")
	list, err := c.ListRunners(ctx, "acme")
	must("list runners", err)
	if len(list) != 122 {
		t.Fatalf("listed %d runners, want 122", len(list))
	}
	_, err = c.ListRunners(ctx, "acme/api")
	must("list repository runners", err)
	_, err = c.RunnerNamed(ctx, "acme", "ghr-1-i-idle")
	must("runner named", err)
	if _, err := c.RunnerNamed(ctx, "acme", "ghr-9-i-none"); !github.IsNotFound(err) {
		t.Fatalf("runner named (none): %v", err)
	}
	_, err = c.GetRunner(ctx, "acme", idle)
	must("get runner", err)
	_, err = c.GetRunner(ctx, "acme/api", repoRunner)
	must("get repository runner", err)
	if _, err := c.GetRunner(ctx, "acme", 999999); !github.IsNotFound(err) {
		t.Fatalf("get a runner that is gone: %v", err)
	}
	must("delete runner", c.DeleteRunner(ctx, "acme", idle))
	must("delete a runner that is gone", c.DeleteRunner(ctx, "acme", idle))
	must("delete repository runner", c.DeleteRunner(ctx, "acme/api", repoRunner))
	if err := c.DeleteRunner(ctx, "acme", busy); !github.IsBusy(err) {
		t.Fatalf("delete a busy runner: %v", err)
	}
	fake.AddRunnerGroup("acme", "large")
	fake.SetRunnerGroupAccess("acme", "large", fakegithub.GroupAccess{Visibility: "selected", Repositories: []string{"api", "site"},
		RestrictedToWorkflows: true, SelectedWorkflows: []string{"acme/api/.github/workflows/ci.yml@main"}})
	fake.SetRepositoryVisibility("acme/site", "public")
	group, err := c.RunnerGroupID(ctx, "acme", "large")
	must("runner group", err)
	repos, err := c.RunnerGroupRepositories(ctx, "acme", group)
	must("runner group repositories", err)
	if len(repos) != 2 {
		t.Fatalf("runner group repositories: %v, want acme/api and acme/site", repos)
	}
	for repo, want := range map[string]bool{"acme/api": false, "acme/site": true} {
		public, err := c.RepositoryPublic(ctx, repo)
		must("repository "+repo, err)
		if public != want {
			t.Fatalf("repository %s public: %v, want %v", repo, public, want)
		}
	}
	// Just-in-time runners, where the version has them (a 404 where not).
	_, err = c.GenerateJITConfig(ctx, "acme", "ghr-2-1-i-jit", group, []string{"run-2"})
	if jit {
		must("generate-jitconfig", err)
		if _, err := c.GenerateJITConfig(ctx, "acme", "ghr-2-1-i-jit", group, []string{"run-2"}); !github.IsNameTaken(err) {
			t.Fatalf("generate-jitconfig, name taken: %v", err)
		}
		_, err = c.GenerateJITConfig(ctx, "acme/api", "ghr-2-1-i-repo", 1, []string{"run-2"})
		must("generate-jitconfig for a repository", err)
	}
	if _, err := c.GenerateJITConfig(ctx, "acme", "ghr-2-2-i-jit", 99, []string{"run-2"}); jit && !github.IsNotFound(err) {
		t.Fatalf("generate-jitconfig, unknown group (or no such route): %v", err)
	}
	// An organization the App is not installed on.
	if _, _, err := c.RegistrationToken(ctx, "nosuch"); err == nil {
		t.Fatal("a registration token for an organization without the App")
	}
	// actions/runner's latest release (refresh learns versions from it):
	// on github.com only; a GitHub Enterprise Server has no such
	// repository.
	fake.PublishRunnerRelease("2.340.0", []byte("tarball"), time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	tag, _, _, err := c.LatestRunnerRelease(ctx, "acme")
	if fake.Version() == fakegithub.APIGitHubCom && (err != nil || tag != "v2.340.0") {
		t.Fatalf("latest runner release on github.com: %q, %v", tag, err)
	}
	if fake.Version() != fakegithub.APIGitHubCom && !github.IsNotFound(err) {
		t.Fatalf("latest runner release on %s: %q, %v; want not found", fake.Version(), tag, err)
	}
	// A server error, then a secondary and a primary rate limit.
	fake.Inject(fakegithub.Fault{Path: "/remove-token", Status: 502, Count: 1})
	_, _, err = c.RemoveToken(ctx, "acme/web")
	must("remove token after a 502", err)
	fake.Inject(fakegithub.Fault{Method: "GET", Path: "/actions/runners", Status: 429, RetryAfter: 1, Count: 1})
	_, err = c.ListRunners(ctx, "acme/web")
	must("list runners after a secondary rate limit", err)
	fake.Inject(fakegithub.Fault{Method: "GET", Path: "/actions/runners", Status: 403, Primary: true, Count: 2})
	if _, err := c.ListRunners(ctx, "acme/web"); !github.IsRateLimited(err) {
		t.Fatalf("list runners at an exhausted rate limit: %v", err)
	}
	return append(rec.Exchanges(), direct(t, fake, jit)...)
}

// direct sends what our client never sends: GET /app, a bad token, a
// token of another installation, a just-in-time request GitHub refuses.
func direct(t *testing.T, fake *fakegithub.Server, jit bool) []ghapi.Exchange {
	t.Helper()
	rec := &ghapi.Recorder{Direct: true}
	hc := &http.Client{Transport: rec}
	do := func(method, path, auth string, body any) *http.Response {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			raw, _ := json.Marshal(body)
			rd = bytes.NewReader(raw)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequest(method, fake.APIURL()+strings.TrimPrefix(path, "/"), rd)
		req.Header.Set("Authorization", auth)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM(fake.PrivateKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	signed, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": fmt.Sprint(fake.AppID), "iat": now.Add(-time.Minute).Unix(), "exp": now.Add(5 * time.Minute).Unix()}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	do("GET", "/app", "Bearer "+signed, nil)
	do("GET", "/orgs/acme/installation", "Bearer "+signed, nil)
	do("GET", "/repos/acme/api/installation", "Bearer "+signed, nil)
	do("GET", "/orgs/acme/installation", "Bearer not-a-jwt", nil)
	do("GET", "/orgs/acme/actions/runners", "Bearer ghs_nope", nil)
	// A token of acme's installation, used on another organization.
	inst := fake.AddInstallation("acme-2")
	resp := do("POST", fmt.Sprintf("/app/installations/%d/access_tokens", inst), "Bearer "+signed, nil)
	if resp.StatusCode != 201 {
		t.Fatalf("access token: %d", resp.StatusCode)
	}
	tok := lastToken(t, rec)
	do("POST", "/orgs/acme/actions/runners/registration-token", "Bearer "+tok, nil)
	if jit {
		do("POST", "/orgs/acme/actions/runners/generate-jitconfig", "Bearer "+tok, map[string]any{"name": "x", "runner_group_id": 1, "labels": []string{"l"}})
		do("POST", "/orgs/acme-2/actions/runners/generate-jitconfig", "Bearer "+tok, map[string]any{"name": "x", "runner_group_id": 1, "labels": []string{}})
	}
	return rec.Exchanges()
}

// lastToken reads the token of the last answer recorded.
func lastToken(t *testing.T, rec *ghapi.Recorder) string {
	t.Helper()
	xs := rec.Exchanges()
	var body struct{ Token string }
	if err := json.Unmarshal(xs[len(xs)-1].ResponseBody, &body); err != nil || body.Token == "" {
		t.Fatalf("no token in %s (%v)", xs[len(xs)-1].ResponseBody, err)
	}
	return body.Token
}
