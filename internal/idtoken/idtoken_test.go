package idtoken_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

var ctx = context.Background()

func verifier(t *testing.T, gh *fakegithub.Server) *idtoken.Verifier {
	t.Helper()
	v, err := idtoken.New(gh.Issuer(), "ghrunner", idtoken.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var job = fakegithub.Workflow{Repository: "acme/app", RunID: "4242", RunAttempt: 2}

func TestAJobsTokenNamesItsRepositoryAndWorkflowRun(t *testing.T) {
	gh := fakegithub.New("acme")
	defer gh.Close()
	id, err := verifier(t, gh).Verify(ctx, gh.IDToken(job, "ghrunner"))
	if err != nil {
		t.Fatal(err)
	}
	want := idtoken.Identity{RepositoryID: "700000", Repository: "acme/app", RunID: "4242", RunAttempt: "2", JTI: id.JTI, Expiry: id.Expiry}
	if id != want {
		t.Fatalf("identity %+v, want %+v", id, want)
	}
	// The token's own id and when it stops being accepted: what the
	// control plane keeps its use by (controlplane.Caller).
	if len(id.JTI) != 32 || time.Until(id.Expiry) < 6*time.Hour || time.Until(id.Expiry) > 6*time.Hour+idtoken.Leeway+time.Minute {
		t.Fatalf("jti %q, expiry %s: want the token's jti, and its exp (6 h) with the leeway", id.JTI, id.Expiry)
	}
}

func TestATokenIsRefusedWithTheRuleItBreaks(t *testing.T) {
	gh := fakegithub.New("acme")
	defer gh.Close()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": gh.Issuer(), "aud": "ghrunner"})
	hsToken, _ := hs.SignedString([]byte("guess"))
	none := strings.Join(strings.Split(gh.IDToken(job, "ghrunner"), ".")[:2], ".") + "."
	for _, c := range []struct{ name, token, want string }{
		{"missing", "", "required: the invoking job's GitHub Actions OIDC token"},
		{"not a JWT", "abc", "not a JWT"},
		{"oversized", strings.Repeat("a.", 9000), "not a GitHub Actions OIDC token"},
		{"signed by another key", gh.IDTokenWith(job, fakegithub.TokenOptions{Key: other}), "signature: not made by any key"},
		{"signed by another key under the issuer's key id", gh.IDTokenWith(job, fakegithub.TokenOptions{Key: other, KeyID: kidOf(t, gh.IDToken(job, ""))}), "signature: not made by any key"},
		{"HS256 with a guessed secret", hsToken, "alg must be RS256"},
		{"with an empty signature", none, "signature: not made by any key"},
		{"expired", gh.IDTokenWith(job, fakegithub.TokenOptions{IssuedAt: time.Now().Add(-7 * time.Hour)}), "expired at"},
		{"from the future", gh.IDTokenWith(job, fakegithub.TokenOptions{IssuedAt: time.Now().Add(10 * time.Minute)}), "not valid before"},
		{"for another audience", gh.IDToken(job, "sts.amazonaws.com"), `does not hold "ghrunner"`},
		{"from another issuer", gh.IDTokenWith(job, fakegithub.TokenOptions{Issuer: idtoken.GitHubIssuer}), "is not the configured issuer"},
		{"without run_id", gh.IDToken(fakegithub.Workflow{Repository: "acme/app"}, "ghrunner"), "claim run_id: required"},
	} {
		_, err := verifier(t, gh).Verify(ctx, c.token)
		var refused *idtoken.Error
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal containing %q", c.name, err, c.want)
		}
		if c.token != "" && len(c.token) > 20 && err != nil && strings.Contains(err.Error(), c.token[len(c.token)-20:]) {
			t.Errorf("%s: the refusal repeats the token", c.name)
		}
	}
}

func kidOf(t *testing.T, token string) string {
	t.Helper()
	p, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Header["kid"].(string)
}

func TestTheKeysAreFetchedOnceAndAgainForAnUnknownKeyID(t *testing.T) {
	gh := fakegithub.New("acme")
	defer gh.Close()
	v := verifier(t, gh)
	for range 3 {
		if _, err := v.Verify(ctx, gh.IDToken(job, "ghrunner")); err != nil {
			t.Fatal(err)
		}
	}
	if n := gh.JWKSFetches(); n != 1 {
		t.Fatalf("%d key set fetches for three tokens of one key, want 1", n)
	}
	gh.RotateIDTokenKey()
	if _, err := v.Verify(ctx, gh.IDToken(job, "ghrunner")); err != nil {
		t.Fatalf("a token of the rotated key: %v", err)
	}
	if n := gh.JWKSFetches(); n != 2 {
		t.Fatalf("%d key set fetches after a rotation, want 2", n)
	}
}

func TestTheKeysAreReadAfreshHourlyAndServeMeanwhileWhenTheIssuerIsDown(t *testing.T) {
	gh := fakegithub.New("acme")
	now := time.Now()
	v, err := idtoken.New(gh.Issuer(), "ghrunner", idtoken.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	verify := func() error { _, err := v.Verify(ctx, gh.IDToken(job, "ghrunner")); return err }
	if err := verify(); err != nil {
		t.Fatal(err)
	}
	now = now.Add(idtoken.KeysFor + time.Minute)
	if err := verify(); err != nil || gh.JWKSFetches() != 2 {
		t.Fatalf("%v, %d key set fetches after an hour, want 2", err, gh.JWKSFetches())
	}
	gh.Close() // the issuer is down: tokens are still minted, in process
	now = now.Add(idtoken.KeysFor + time.Minute)
	if err := verify(); err != nil {
		t.Fatalf("the issuer down at the hourly read: %v, want the keys read before to serve", err)
	}
}

func TestAnUnreachableIssuerIsNoBadInputButRefusesAll(t *testing.T) {
	gh := fakegithub.New("acme")
	token := gh.IDToken(job, "ghrunner")
	v := verifier(t, gh)
	gh.Close()
	_, err := v.Verify(ctx, token)
	if !errors.Is(err, idtoken.ErrUnavailable) {
		t.Fatalf("%v, want ErrUnavailable", err)
	}
}

func TestTheIssuerAndAudienceRules(t *testing.T) {
	for _, ok := range []string{idtoken.GitHubIssuer, "https://ghe.example.com/_services/token", "http://127.0.0.1:8080/_services/token"} {
		if err := idtoken.CheckIssuer(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "token.actions.githubusercontent.com", "http://token.actions.githubusercontent.com", idtoken.GitHubIssuer + "/", idtoken.GitHubIssuer + "?x=1"} {
		if err := idtoken.CheckIssuer(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, bad := range []string{"", "a b", "a,b", strings.Repeat("a", 129)} {
		if err := idtoken.CheckAudience(bad); err == nil {
			t.Errorf("audience %q accepted", bad)
		}
	}
}
