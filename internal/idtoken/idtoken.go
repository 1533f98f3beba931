// Package idtoken verifies the GitHub Actions OIDC token a workflow job
// passes to provision and release, and says which repository and workflow
// run the job belongs to. The token is the only part of a payload the
// caller cannot make up: GitHub signs it, and the job can get one only for
// itself (a job with id-token: write asks the Actions runtime for it).
//
// What is verified, in this order: the token is a JWS signed with RS256 by
// a key the configured issuer publishes (its discovery document's jwks_uri;
// the keys are cached, fetched again when a token names a key the cache
// lacks, and read afresh every KeysFor); iss is the configured issuer; aud holds the configured audience;
// exp, nbf and iat hold with a minute of clock skew; and the claims that
// bind a run (repository_id, repository, run_id, run_attempt) and the
// token's own id (jti) are present.
// Keys are never fetched from a URL the token names: only the configured
// issuer's discovery document says where they are.
package idtoken

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// GitHubIssuer is the issuer of github.com's Actions tokens (GitHub Docs,
// "OpenID Connect reference": iss is https://token.actions.githubusercontent.com;
// GitHub Enterprise Server's is https://HOSTNAME/_services/token).
const GitHubIssuer = "https://token.actions.githubusercontent.com"

// DefaultAudience is the aud the invoking job asks for. It is ours, not
// sts.amazonaws.com: a token minted for AWS (configure-aws-credentials)
// must not pass here, nor ours there.
const DefaultAudience = "ghrunner"

// Leeway is the clock skew allowed on exp, nbf and iat: GitHub's clock and
// the function's may differ by seconds, not minutes.
const Leeway = time.Minute

// MaxLen bounds a token: GitHub's are about 1-2 KB; anything far larger is
// not one, and is refused before any parsing.
const MaxLen = 16 << 10

// MaxJTI bounds the jti claim (GitHub's is a UUID, 36 characters).
const MaxJTI = 128

// Identity is who invoked: the job's repository and workflow run, from
// the token's claims.
type Identity struct {
	// RepositoryID is stable across renames and transfers: what a run is
	// bound to.
	RepositoryID string
	// Repository (owner/name) is for messages only: a name can be freed
	// and taken by someone else.
	Repository string
	RunID      string // the workflow run (github.run_id)
	RunAttempt string // its attempt (github.run_attempt): re-runs keep RunID
	// JTI is the token's own id (GitHub mints each token with a fresh
	// one), and Expiry when the token stops being accepted (exp with the
	// Leeway): the control plane refuses a token used for a second
	// purpose until then (controlplane.Caller).
	JTI    string
	Expiry time.Time
}

// Error is a token refused: Rule says why, for the caller. It never
// repeats the token.
type Error struct{ Rule string }

func (e *Error) Error() string { return e.Rule }

func refuse(format string, args ...any) error { return &Error{Rule: fmt.Sprintf(format, args...)} }

// Verifier checks tokens of one issuer for one audience. It is safe for
// concurrent use and meant to live as long as the execution environment,
// so the issuer's keys are fetched once, not per invocation.
type Verifier struct {
	issuer, audience string
	client           *http.Client
	now              func() time.Time

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier // nil until discovery succeeded
	found    time.Time             // when: the keys are read afresh after KeysFor
}

// KeysFor is how long a key set is trusted without reading it again. The
// library fetches the keys again only for a key id it lacks, so a key the
// issuer withdrew would stay trusted for as long as an execution
// environment lives; an hour bounds that, at one fetch an hour.
const KeysFor = time.Hour

// Options are a Verifier's settings; zero values take the defaults.
type Options struct {
	Client *http.Client     // default: 10 s timeout
	Now    func() time.Time // default: time.Now
}

// New makes a Verifier. Nothing is fetched until the first token.
func New(issuer, audience string, o Options) (*Verifier, error) {
	if err := CheckIssuer(issuer); err != nil {
		return nil, err
	}
	if err := CheckAudience(audience); err != nil {
		return nil, err
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Verifier{issuer: issuer, audience: audience, client: o.Client, now: o.Now}, nil
}

// Issuer is the issuer the Verifier trusts.
func (v *Verifier) Issuer() string { return v.issuer }

// Audience is the audience tokens must carry.
func (v *Verifier) Audience() string { return v.audience }

// CheckIssuer applies the issuer rule: an absolute https URL without query,
// fragment or trailing slash (the form GitHub's iss takes); http only for a
// loopback host (the sandbox's fake GitHub).
func CheckIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil || strings.HasSuffix(issuer, "/") {
		return fmt.Errorf("OIDC issuer %q: want an absolute URL without query, fragment, user or trailing slash, such as %s or https://HOSTNAME/_services/token", issuer, GitHubIssuer)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && (u.Hostname() == "127.0.0.1" || u.Hostname() == "localhost" || u.Hostname() == "::1"):
	default:
		return fmt.Errorf("OIDC issuer %q: must be https (http only for a loopback host)", issuer)
	}
	return nil
}

// CheckAudience applies the audience rule: 1-128 printable characters
// without spaces or commas.
func CheckAudience(aud string) error {
	if aud == "" || len(aud) > 128 || strings.ContainsAny(aud, " ,\t\r\n\"") {
		return fmt.Errorf("OIDC audience %q: want 1-128 characters without spaces, commas or quotes", aud)
	}
	return nil
}

// ErrUnavailable wraps a failure to read the issuer's discovery document
// or keys: not the caller's fault, and nothing is trusted meanwhile.
var ErrUnavailable = errors.New("the OIDC issuer's keys are unavailable")

// keys returns the library verifier, running discovery the first time and
// again once the keys are KeysFor old. A failed discovery is not
// remembered: the next invocation tries again; while keys read earlier
// are at hand they serve meanwhile (the issuer may be down for a moment).
func (v *Verifier) keys(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil && v.now().Sub(v.found) < KeysFor {
		return v.verifier, nil
	}
	fresh, err := v.discover(ctx)
	if err != nil && v.verifier != nil {
		return v.verifier, nil
	}
	if err != nil {
		return nil, err
	}
	v.verifier, v.found = fresh, v.now()
	return fresh, nil
}

// discover reads the issuer's discovery document and makes a verifier of
// the key set it names.
func (v *Verifier) discover(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	// Discovery reads <issuer>/.well-known/openid-configuration and
	// refuses a document whose issuer is not ours.
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, v.client), v.issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: discovery at %s/.well-known/openid-configuration: %v", ErrUnavailable, v.issuer, err)
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := p.Claims(&doc); err != nil {
		return nil, fmt.Errorf("%w: discovery document: %v", ErrUnavailable, err)
	}
	// The keys must come from the issuer's own host: a discovery document
	// served through a misconfigured proxy must not point elsewhere.
	iu, _ := url.Parse(v.issuer)
	ju, err := url.Parse(doc.JWKSURI)
	if err != nil || ju.Scheme != iu.Scheme || ju.Host != iu.Host {
		return nil, fmt.Errorf("%w: jwks_uri %q is not on the issuer's host %s", ErrUnavailable, doc.JWKSURI, iu.Host)
	}
	// The key set outlives this invocation's context: it fetches again,
	// with the same client, whenever a token names a key it lacks.
	keySet := oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), v.client), doc.JWKSURI)
	// The library checks the signature and the algorithm; iss, aud and the
	// times are checked below, so each refusal can name its claim.
	return oidc.NewVerifier(v.issuer, keySet, &oidc.Config{
		SupportedSigningAlgs: []string{oidc.RS256},
		SkipClientIDCheck:    true, SkipIssuerCheck: true, SkipExpiryCheck: true,
	}), nil
}

// claims are the ones read. GitHub sends its own claims as JSON strings
// (repository_id "957014466", run_attempt "1"), as a token from a real
// run shows; GitHub's claims table does not give their JSON types.
type claims struct {
	Issuer       string          `json:"iss"`
	Audience     json.RawMessage `json:"aud"`
	Expiry       *float64        `json:"exp"`
	NotBefore    *float64        `json:"nbf"`
	IssuedAt     *float64        `json:"iat"`
	RepositoryID string          `json:"repository_id"`
	Repository   string          `json:"repository"`
	RunID        string          `json:"run_id"`
	RunAttempt   string          `json:"run_attempt"`
	JTI          string          `json:"jti"`
}

// Verify checks a token and returns the identity it carries. A refused
// token is an *Error; an unreachable issuer wraps ErrUnavailable.
func (v *Verifier) Verify(ctx context.Context, raw string) (Identity, error) {
	switch {
	case raw == "":
		return Identity{}, refuse("required: the invoking job's GitHub Actions OIDC token with audience %q (the job needs permissions: id-token: write)", v.audience)
	case len(raw) > MaxLen:
		return Identity{}, refuse("%d bytes: not a GitHub Actions OIDC token (at most %d)", len(raw), MaxLen)
	case strings.Count(raw, ".") != 2:
		return Identity{}, refuse("not a JWT (header.payload.signature)")
	}
	verifier, err := v.keys(ctx)
	if err != nil {
		return Identity{}, err
	}
	tok, err := verifier.Verify(oidc.ClientContext(ctx, v.client), raw)
	if err != nil {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "fetching keys"):
			return Identity{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		case strings.Contains(msg, "malformed jwt"):
			return Identity{}, refuse("not a JWS signed with RS256 (alg must be RS256)")
		case strings.Contains(msg, "unmarshal claims"):
			return Identity{}, refuse("claims: not the JSON of an OIDC token")
		}
		return Identity{}, refuse("signature: not made by any key %s publishes", v.issuer)
	}
	var c claims
	if err := tok.Claims(&c); err != nil {
		return Identity{}, refuse("claims: %v", err)
	}
	return v.check(c)
}

// check applies the claim rules to a token whose signature holds.
func (v *Verifier) check(c claims) (Identity, error) {
	if c.Issuer != v.issuer {
		return Identity{}, refuse("iss %q is not the configured issuer %q", c.Issuer, v.issuer)
	}
	var auds []string
	if json.Unmarshal(c.Audience, &auds) != nil {
		var one string
		if json.Unmarshal(c.Audience, &one) != nil {
			return Identity{}, refuse("aud: want a string or an array of strings")
		}
		auds = []string{one}
	}
	found := false
	for _, a := range auds {
		found = found || a == v.audience
	}
	if !found {
		return Identity{}, refuse("aud %q does not hold %q: request the token with that audience", auds, v.audience)
	}
	now := v.now()
	unix := func(f float64) time.Time { return time.Unix(int64(f), 0) }
	switch {
	case c.Expiry == nil:
		return Identity{}, refuse("exp: required")
	case now.After(unix(*c.Expiry).Add(Leeway)):
		return Identity{}, refuse("expired at %s (exp; now %s): request a fresh token", unix(*c.Expiry).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case c.NotBefore != nil && now.Add(Leeway).Before(unix(*c.NotBefore)):
		return Identity{}, refuse("not valid before %s (nbf)", unix(*c.NotBefore).UTC().Format(time.RFC3339))
	case c.IssuedAt == nil:
		return Identity{}, refuse("iat: required")
	case now.Add(Leeway).Before(unix(*c.IssuedAt)):
		return Identity{}, refuse("issued in the future, at %s (iat)", unix(*c.IssuedAt).UTC().Format(time.RFC3339))
	}
	id := Identity{RepositoryID: c.RepositoryID, Repository: c.Repository, RunID: c.RunID, RunAttempt: c.RunAttempt,
		JTI: c.JTI, Expiry: unix(*c.Expiry).Add(Leeway)}
	for _, f := range []struct{ name, value string }{{"repository_id", id.RepositoryID}, {"repository", id.Repository}, {"run_id", id.RunID}, {"run_attempt", id.RunAttempt}, {"jti", id.JTI}} {
		if f.value == "" {
			return Identity{}, refuse("claim %s: required (a token of a workflow job carries it)", f.name)
		}
	}
	// The jti becomes part of a table key: GitHub's are UUIDs.
	if len(id.JTI) > MaxJTI || strings.ContainsFunc(id.JTI, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return Identity{}, refuse("claim jti: want 1-%d printable ASCII characters without spaces", MaxJTI)
	}
	return id, nil
}
