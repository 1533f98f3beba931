package fakegithub

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v4"
)

// The fake's OIDC issuer: GitHub Actions' token service, as a workflow job
// and a verifier meet it. What it mirrors, from GitHub Docs ("OpenID
// Connect reference", docs.github.com/en/actions/reference/security/oidc,
// and its Enterprise Server 3.19 edition):
//   - the issuer is https://token.actions.githubusercontent.com on
//     github.com and https://HOSTNAME/_services/token on GitHub Enterprise
//     Server; the fake is the latter, at URL()+"/_services/token";
//   - the discovery document is at <issuer>/.well-known/openid-configuration
//     and names the keys (jwks_uri; github.com's is <issuer>/.well-known/jwks);
//   - the header carries alg, kid and typ JWT; the claims include iss, aud
//     (by default the owner's URL, any audience the job asks for), sub,
//     exp, iat, nbf, jti and GitHub's own: repository, repository_id,
//     repository_owner, repository_owner_id, run_id, run_attempt,
//     run_number, workflow, ref, actor, event_name.
//
// Not documented, and taken from a token of a real run instead: GitHub's
// own claims are JSON strings (repository_id "957014466"), nbf is 5
// minutes before iat and exp 6 hours after it. How often GitHub rotates
// its keys is not documented either: RotateIDTokenKey rotates on demand.
//
// A job asks the Actions runtime for its token: GET
// $ACTIONS_ID_TOKEN_REQUEST_URL&audience=<aud> with
// "Authorization: bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN", in a job with
// id-token: write (the request GitHub Docs' OpenID Connect reference shows
// with curl, as quoted by a secondary source; the page itself was not at
// hand). The answer's shape, {"value": "<jwt>"}, is what the Actions
// toolkit's getIDToken reads, not a documented contract. The fake serves
// it at /_fake/actions/idtoken (IDTokenRequest).

// Workflow is one job of a workflow run, as its token describes it.
type Workflow struct {
	Repository string // owner/name
	RunID      string // github.run_id
	RunAttempt int    // github.run_attempt; 0 means 1
}

// TokenOptions bend a minted token for tests of what a verifier refuses.
type TokenOptions struct {
	Audience string          // default "ghrunner"
	Issuer   string          // default the fake's issuer
	IssuedAt time.Time       // default the server's clock
	Lifetime time.Duration   // exp - iat; default 6 h
	Key      *rsa.PrivateKey // default the issuer's current key (another key forges)
	KeyID    string          // default the key's id
}

// oidcIssuer holds the signing keys (made on first use: most fakes never
// mint a token, and an RSA key costs a noticeable fraction of a second).
type oidcIssuer struct {
	once     sync.Once
	mu       sync.Mutex
	keys     []signingKey // the last is current; all are published
	repoIDs  map[string]int64
	requests map[string]Workflow // ACTIONS_ID_TOKEN_REQUEST_TOKEN → its job
	minted   []string
}

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (s *Server) oidc() *oidcIssuer {
	s.idp.once.Do(func() {
		s.idp.repoIDs = map[string]int64{}
		s.idp.requests = map[string]Workflow{}
		s.idp.keys = []signingKey{newSigningKey()}
	})
	return &s.idp
}

func newSigningKey() signingKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return signingKey{id: randomToken("")[:16], key: k}
}

// Issuer is the fake's OIDC issuer URL (GitHub Enterprise Server's form).
func (s *Server) Issuer() string { return s.srv.URL + "/_services/token" }

// RotateIDTokenKey makes a new signing key: tokens minted from now on name
// it, and the key set publishes it next to the old ones.
func (s *Server) RotateIDTokenKey() {
	idp := s.oidc()
	k := newSigningKey()
	idp.mu.Lock()
	idp.keys = append(idp.keys, k)
	idp.mu.Unlock()
}

// RepositoryID is the stable id of a repository (by name, case-insensitive).
func (s *Server) RepositoryID(repo string) int64 {
	idp := s.oidc()
	idp.mu.Lock()
	defer idp.mu.Unlock()
	name := strings.ToLower(repo)
	if id, ok := idp.repoIDs[name]; ok {
		return id
	}
	id := int64(700000 + len(idp.repoIDs)*7)
	idp.repoIDs[name] = id
	return id
}

// IDToken mints the OIDC token GitHub would give the job for audience.
func (s *Server) IDToken(w Workflow, audience string) string {
	return s.IDTokenWith(w, TokenOptions{Audience: audience})
}

// IDTokenWith mints a token, bent by o.
func (s *Server) IDTokenWith(w Workflow, o TokenOptions) string {
	idp := s.oidc()
	if o.Audience == "" {
		o.Audience = "ghrunner"
	}
	if o.Issuer == "" {
		o.Issuer = s.Issuer()
	}
	if o.IssuedAt.IsZero() {
		s.mu.Lock()
		o.IssuedAt = s.now()
		s.mu.Unlock()
	}
	if o.Lifetime == 0 {
		o.Lifetime = 6 * time.Hour
	}
	if w.RunAttempt == 0 {
		w.RunAttempt = 1
	}
	repoID := s.RepositoryID(w.Repository)
	idp.mu.Lock()
	current := idp.keys[len(idp.keys)-1]
	idp.mu.Unlock()
	key, kid := current.key, current.id
	if o.Key != nil {
		key, kid = o.Key, "forged"
	}
	if o.KeyID != "" {
		kid = o.KeyID
	}
	owner, _, _ := strings.Cut(w.Repository, "/")
	iat := o.IssuedAt.Unix()
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": o.Issuer, "aud": o.Audience, "sub": "repo:" + w.Repository + ":ref:refs/heads/main",
		"iat": iat, "nbf": iat - 300, "exp": o.IssuedAt.Add(o.Lifetime).Unix(), "jti": randomToken("")[:32],
		"repository": w.Repository, "repository_id": strconv.FormatInt(repoID, 10),
		"repository_owner": owner, "repository_owner_id": strconv.FormatInt(repoID/7, 10),
		"run_id": w.RunID, "run_attempt": strconv.Itoa(w.RunAttempt), "run_number": "1",
		"workflow": "CI", "ref": "refs/heads/main", "actor": "octocat", "event_name": "push",
	})
	t.Header["kid"] = kid
	signed, err := t.SignedString(key)
	if err != nil {
		panic(err)
	}
	idp.mu.Lock()
	idp.minted = append(idp.minted, signed)
	idp.mu.Unlock()
	return signed
}

// IDTokenRequest is what the Actions runtime gives a job with id-token:
// write: ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN.
func (s *Server) IDTokenRequest(w Workflow) (requestURL, requestToken string) {
	idp := s.oidc()
	tok := randomToken("idreq_")
	idp.mu.Lock()
	idp.requests[tok] = w
	idp.mu.Unlock()
	return s.srv.URL + "/_fake/actions/idtoken?api-version=2.0", tok
}

// idTokens are the tokens minted so far (Secrets lists them).
func (s *Server) idTokens() []string {
	s.idp.mu.Lock()
	defer s.idp.mu.Unlock()
	return append([]string(nil), s.idp.minted...)
}

func (s *Server) oidcRoutes(mux *http.ServeMux) {
	prefix := "/_services/token"
	mux.HandleFunc("GET "+prefix+"/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer": s.Issuer(), "jwks_uri": s.Issuer() + "/.well-known/jwks",
			"subject_types_supported": []string{"public", "pairwise"}, "response_types_supported": []string{"id_token"},
			"id_token_signing_alg_values_supported": []string{"RS256"}, "scopes_supported": []string{"openid"},
			"claims_supported": []string{"sub", "aud", "exp", "iat", "iss", "jti", "nbf", "ref", "repository", "repository_id",
				"repository_owner", "repository_owner_id", "run_id", "run_number", "run_attempt", "actor", "workflow", "event_name"},
		})
	})
	mux.HandleFunc("GET "+prefix+"/.well-known/jwks", func(w http.ResponseWriter, r *http.Request) {
		idp := s.oidc()
		idp.mu.Lock()
		set := jose.JSONWebKeySet{}
		for _, k := range idp.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.key.PublicKey, KeyID: k.id, Algorithm: "RS256", Use: "sig"})
		}
		idp.mu.Unlock()
		s.mu.Lock()
		s.counts["GET jwks"]++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(set)
	})
	mux.HandleFunc("GET /_fake/actions/idtoken", func(w http.ResponseWriter, r *http.Request) {
		idp := s.oidc()
		auth := r.Header.Get("Authorization")
		tok := strings.TrimSpace(auth[min(len(auth), len("bearer ")):])
		idp.mu.Lock()
		job, ok := idp.requests[tok]
		idp.mu.Unlock()
		if !strings.EqualFold(auth[:min(len(auth), len("bearer "))], "bearer ") || !ok {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Bad credentials"})
			return
		}
		aud := r.URL.Query().Get("audience")
		if aud == "" {
			aud = "https://github.com/" + strings.Split(job.Repository, "/")[0]
		}
		writeJSON(w, http.StatusOK, map[string]string{"value": s.IDToken(job, aud)})
	})
}

// JWKSFetches counts the key set's downloads (a verifier caches it).
func (s *Server) JWKSFetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts["GET jwks"]
}
