package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
)

// ECR at the front endpoint. moto answers ECR's API (repositories,
// GetAuthorizationToken) but serves no registry; the front endpoint serves
// one for the registry paths (/v2/…), go-containerregistry's in-memory
// registry, and makes moto's ECR answers name it: a repository's
// repositoryUri is "<front host:port>/<repositoryName>" (ECR's shape, the
// registry host in place of <account>.dkr.ecr.<region>.amazonaws.com) and
// GetAuthorizationToken's proxyEndpoint is "http://<front host:port>". The
// front rewrites the answers rather than patching moto, because the front's
// address is known only once it listens, after moto started.
//
// As ECR's registry does, it requires the login GetAuthorizationToken gave
// (and a login given to a role the sandbox issued, such as an ECS task's
// execution role, is authorized by IAM for the ECR action each call
// amounts to, ecr:BatchGetImage for a manifest, ecr:GetDownloadUrlForLayer
// for a layer, …):
// HTTP Basic with user name AWS and the token's password, valid 12 hours
// ("Private registry authentication in Amazon ECR", Amazon ECR User Guide:
// https://docs.aws.amazon.com/AmazonECR/latest/userguide/registry_auth.html),
// and answers anything else 401 with a Basic challenge. A repository ECR
// does not have is 404 NAME_UNKNOWN, as the OCI distribution spec's error
// codes say ("repository name not known to registry").
//
// go-containerregistry talks plain http to a registry on 127.0.0.1 (its
// name.Registry.Scheme falls back to http for loopback hosts), so the
// provider's push and the task runner's pull need no TLS.

const ecrTarget = "AmazonEC2ContainerRegistry_V20150921."

// ecrTokenTTL is how long an authorization token is valid, as on ECR.
const ecrTokenTTL = 12 * time.Hour

// ecrHostRE is the registry host moto writes into repositoryUri and
// proxyEndpoint.
var ecrHostRE = regexp.MustCompile(`[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com`)

type registry struct {
	host    string // the front endpoint's host:port
	ecr     *ecr.Client
	handler http.Handler

	gate   *iamGate
	region string
	logs   io.Writer

	mu      sync.Mutex
	tokens  map[string]ecrToken // by password
	noLogin bool                // SetRegistryLogin(false)
}

// ecrToken is a login GetAuthorizationToken gave: until when, and to whom
// (none: the deployer, whom IAM does not check here).
type ecrToken struct {
	expires   time.Time
	principal *principal
}

func newRegistry(host string, cfg awsconf.Config, gate *iamGate, logs io.Writer) *registry {
	return &registry{
		host:    host,
		gate:    gate,
		region:  cfg.AWS.Region,
		logs:    logs,
		ecr:     ecr.NewFromConfig(cfg.AWS, func(o *ecr.Options) { o.BaseEndpoint = cfg.Endpoint("ecr") }),
		handler: ggcrregistry.New(ggcrregistry.Logger(log.New(logs, "sandbox: registry: ", 0))),
		tokens:  map[string]ecrToken{},
	}
}

// SetRegistryLogin turns the registry's login check on (the default) or
// off: with it off, a push or pull without ECR's login is served, which is
// how a test shows the refusal comes from the check and nothing else.
func (s *Sandbox) SetRegistryLogin(required bool) {
	s.registry.mu.Lock()
	s.registry.noLogin = !required
	s.registry.mu.Unlock()
}

// RegistryHost is the host:port of the sandbox's ECR registry (the front
// endpoint's), which every repositoryUri names.
func (s *Sandbox) RegistryHost() string { return s.registry.host }

// isRegistryRequest tells registry requests from AWS API calls on the
// front endpoint: a registry path, and no AWS signature.
func isRegistryRequest(r *http.Request) bool {
	if !strings.HasPrefix(r.URL.Path, "/v2/") {
		return false
	}
	return !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256") && r.URL.Query().Get("X-Amz-Credential") == ""
}

// registryRepo is the repository name a registry path names ("" for the
// base /v2/ and the catalog).
func registryRepo(path string) string {
	rest := strings.TrimPrefix(path, "/v2/")
	for _, kind := range []string{"/blobs/", "/manifests/", "/tags/", "/referrers/"} {
		if i := strings.LastIndex(rest, kind); i > 0 {
			return rest[:i]
		}
	}
	return ""
}

func (g *registry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, ok := g.login(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Basic realm="http://%s/",service="ecr.amazonaws.com"`, g.host))
		registryError(w, http.StatusUnauthorized, "DENIED", "Not Authorized")
		return
	}
	repo := registryRepo(r.URL.Path)
	if tok.principal != nil && r.URL.Path != "/v2/" { // the base is the login's check only
		// As ECR does, the registry call is authorized for the principal
		// the login was given to, by the ECR action it amounts to.
		action := registryAction(r.Method, r.URL.Path)
		res := fmt.Sprintf("arn:aws:ecr:%s:%s:repository/%s", g.region, g.gate.account, repo)
		if action == "" || repo == "" {
			action, res = "ecr:?", "*"
		}
		if d, ok := g.gate.enforce(r.Context(), *tok.principal, "ecr", g.region, []check{{action, res, nil}}); !ok {
			registryError(w, http.StatusForbidden, "DENIED", d.String())
			return
		}
	}
	if repo != "" {
		_, err := g.ecr.DescribeRepositories(r.Context(), &ecr.DescribeRepositoriesInput{RepositoryNames: []string{repo}})
		var nf *ecrtypes.RepositoryNotFoundException
		switch {
		case errors.As(err, &nf):
			registryError(w, http.StatusNotFound, "NAME_UNKNOWN", fmt.Sprintf("The repository with name '%s' does not exist in the registry", repo))
			return
		case err != nil:
			registryError(w, http.StatusInternalServerError, "UNKNOWN", "reading the repository from ECR: "+err.Error())
			return
		}
	}
	if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "/manifests/") || repo == "" {
		g.handler.ServeHTTP(w, r)
		return
	}
	// A manifest pushed is an image ECR lists: put it into moto's
	// repository too (by the registry's digest), so that DescribeImages
	// and BatchGetImage answer it.
	manifest, err := io.ReadAll(r.Body)
	if err != nil {
		registryError(w, http.StatusBadRequest, "MANIFEST_INVALID", err.Error())
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(manifest))
	sw := &statusWriter{ResponseWriter: w}
	g.handler.ServeHTTP(sw, r)
	if sw.code != http.StatusCreated {
		return
	}
	sum := sha256.Sum256(manifest)
	in := &ecr.PutImageInput{RepositoryName: aws.String(repo), ImageManifest: aws.String(string(manifest)),
		ImageDigest: aws.String("sha256:" + hex.EncodeToString(sum[:]))}
	if mt := r.Header.Get("Content-Type"); mt != "" {
		in.ImageManifestMediaType = aws.String(mt)
	}
	if ref := r.URL.Path[strings.LastIndex(r.URL.Path, "/manifests/")+len("/manifests/"):]; !strings.HasPrefix(ref, "sha256:") {
		in.ImageTag = aws.String(ref)
	}
	if _, err := g.ecr.PutImage(context.WithoutCancel(r.Context()), in); err != nil {
		fmt.Fprintf(g.logs, "sandbox: registry: %s pushed, but ECR's PutImage in moto failed: %v\n", r.URL.Path, err)
	}
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// login is the unexpired login ECR gave that the request carries; with
// the check off, any request passes as the deployer's.
func (g *registry) login(r *http.Request) (ecrToken, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	user, pass, ok := r.BasicAuth()
	tok, known := g.tokens[pass]
	if ok && user == "AWS" && known && time.Now().Before(tok.expires) {
		return tok, true
	}
	return ecrToken{}, g.noLogin
}

// registryAction is the ECR action a registry API call amounts to (the
// actions ECR's own pull and push need, Amazon ECR User Guide, "Private
// repository policies" and "Private registry authentication"); "" for one
// the sandbox does not map.
func registryAction(method, path string) string {
	get := method == http.MethodGet || method == http.MethodHead
	switch {
	case strings.Contains(path, "/blobs/uploads/"):
		switch method {
		case http.MethodPost:
			return "ecr:InitiateLayerUpload"
		case http.MethodPatch:
			return "ecr:UploadLayerPart"
		case http.MethodPut:
			return "ecr:CompleteLayerUpload"
		}
	case strings.Contains(path, "/blobs/") && method == http.MethodHead:
		return "ecr:BatchCheckLayerAvailability"
	case strings.Contains(path, "/blobs/") && get:
		return "ecr:GetDownloadUrlForLayer"
	case strings.Contains(path, "/manifests/") && get:
		return "ecr:BatchGetImage"
	case strings.Contains(path, "/manifests/") && method == http.MethodPut:
		return "ecr:PutImage"
	case strings.Contains(path, "/tags/list") && get:
		return "ecr:ListImages"
	}
	return ""
}

// registryError answers in the distribution spec's error shape.
func registryError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
}

// mint makes a new authorization token's password for p (nil: the
// deployer).
func (g *registry) mint(p *principal) (string, time.Time) {
	var b [24]byte
	rand.Read(b[:])
	pass, exp := hex.EncodeToString(b[:]), time.Now().Add(ecrTokenTTL)
	g.mu.Lock()
	g.tokens[pass] = ecrToken{expires: exp, principal: p}
	g.mu.Unlock()
	return pass, exp
}

// withECR passes ECR's API calls to moto and rewrites its answers to name
// the sandbox's registry; a GetAuthorizationToken answer carries a login
// the registry accepts.
func (g *registry) withECR(moto http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), ecrTarget)
		if !ok {
			moto.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		moto.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			body = ecrHostRE.ReplaceAll(body, []byte(g.host))
			if op == "GetAuthorizationToken" {
				var who *principal
				if p, ok := principalOf(r.Context()); ok {
					who = &p
				}
				body = g.rewriteToken(body, who)
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

// rewriteToken replaces each authorization data's token (moto's is a fixed
// "AWS:<account>-auth-token") by a fresh one the registry accepts, with
// its expiry, and its proxyEndpoint by the registry's plain-http URL.
func (g *registry) rewriteToken(body []byte, who *principal) []byte {
	var out struct {
		AuthorizationData []map[string]any `json:"authorizationData"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return body
	}
	for _, d := range out.AuthorizationData {
		pass, exp := g.mint(who)
		d["authorizationToken"] = base64.StdEncoding.EncodeToString([]byte("AWS:" + pass))
		d["expiresAt"] = float64(exp.Unix())
		d["proxyEndpoint"] = "http://" + g.host
	}
	b, err := json.Marshal(out)
	if err != nil {
		return body
	}
	return b
}
