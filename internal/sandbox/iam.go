package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/iamsim"
)

// IAM at the front endpoint. moto evaluates no policy, so the endpoint does,
// as AWS would: every request signed with credentials the sandbox issued to
// a role (a function's execution role, an instance's profile role) is
// authorized against the policies terraform attached to that role, by a
// real evaluator (internal/testenv/iamsim), before moto sees it. A denied
// request gets AWS's AccessDenied answer of its protocol and changes
// nothing. Requests signed with other keys (the deployer: terraform, the
// sandbox itself, tests) pass unevaluated.
//
// The request context the endpoint builds for each action is in
// iamcontext.go; an action it has no mapping for is denied and recorded,
// never allowed.
// The role's policies are read in iam_policies.go, and a denial is
// answered in iam_denied.go.

// principal is who a set of issued credentials belongs to.
type principal struct {
	role, roleARN, roleID string
	session               string // the function name, or the instance id
	instance              string // set for an instance profile session
}

func (p principal) arn(account string) string {
	return fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", account, p.role, p.session)
}

// Denial is one request the endpoint refused.
type Denial struct {
	Principal string // the assumed-role session ARN
	Action    string
	Resource  string
	Why       []string
}

func (d Denial) String() string {
	return fmt.Sprintf("%s may not %s on %s: %s", d.Principal, d.Action, d.Resource, strings.Join(d.Why, "; "))
}

type iamGate struct {
	checks  func(context.Context, awsRequest) ([]check, error) // iamcontext.go
	eval    *iamsim.Evaluator
	iam     *iam.Client // moto's IAM, read as the deployer
	account string

	mu       sync.Mutex
	keys     map[string]principal // by access key id
	policies map[string]rolePolicies
	denials  []Denial
	checked  map[string]int // allowed checks by "role action"
}

func newIAMGate(checks func(context.Context, awsRequest) ([]check, error), eval *iamsim.Evaluator, client *iam.Client, account string) *iamGate {
	return &iamGate{checks: checks, eval: eval, iam: client, account: account, keys: map[string]principal{}, policies: map[string]rolePolicies{}, checked: map[string]int{}}
}

// issue makes temporary credentials for a role session.
func (g *iamGate) issue(ctx context.Context, roleARN, session, instance string) (akid, secret, token string, err error) {
	name := lastSegment(roleARN)
	out, err := g.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if err != nil {
		return "", "", "", fmt.Errorf("role %s: %w", roleARN, err)
	}
	var b [10]byte
	rand.Read(b[:])
	akid = "ASIA" + strings.ToUpper(hex.EncodeToString(b[:]))[:16]
	rand.Read(b[:])
	secret, token = hex.EncodeToString(b[:]), "sandbox-session-"+akid
	g.mu.Lock()
	g.keys[akid] = principal{role: name, roleARN: aws.ToString(out.Role.Arn), roleID: aws.ToString(out.Role.RoleId), session: session, instance: instance}
	g.mu.Unlock()
	return akid, secret, token, nil
}

// Allowed lists, per role, the actions it was allowed and how often:
// "role action count" lines, sorted.
func (g *iamGate) Allowed() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for k, n := range g.checked {
		out = append(out, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(out)
	return out
}

// Denials lists the requests refused so far.
func (g *iamGate) Denials() []Denial {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Denial(nil), g.denials...)
}

// take returns the denials so far and forgets them.
func (g *iamGate) take() []Denial {
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.denials
	g.denials = nil
	return d
}

var credentialScope = regexp.MustCompile(`Credential=([A-Z0-9]+)/\d{8}/([a-z0-9-]+)/([a-z0-9-]+)/aws4_request`)

// handler authorizes requests signed with issued keys, then passes them on.
func (g *iamGate) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := credentialScope.FindStringSubmatch(r.Header.Get("Authorization"))
		if m == nil {
			if q, err := url.QueryUnescape(r.URL.Query().Get("X-Amz-Credential")); err == nil {
				m = credentialScope.FindStringSubmatch("Credential=" + q)
			}
		}
		if m == nil {
			next.ServeHTTP(w, r)
			return
		}
		if m[3] == "s3" {
			if status, code, msg := s3SignatureRefusal(r); status != 0 {
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(status)
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>sandbox-s3</RequestId></Error>`, code, xmlEscape(msg))
				return
			}
		}
		g.mu.Lock()
		p, issued := g.keys[m[1]]
		g.mu.Unlock()
		if !issued {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		req := awsRequest{service: m[3], region: m[2], account: g.account, r: r, body: body}
		d, ok := g.authorize(r.Context(), p, req)
		if !ok && r.Context().Err() != nil {
			// The caller gave up (a killed invocation, a stopped agent)
			// while the endpoint was deciding: nobody to answer, and the
			// unfinished decision is no denial.
			return
		}
		if !ok {
			g.mu.Lock()
			g.denials = append(g.denials, d)
			g.mu.Unlock()
			accessDenied(w, req, d)
			return
		}
		// The services the front plays itself (ECR's registry) learn who
		// asked.
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

type principalKey struct{}

// principalOf is the issued principal that signed the request whose
// context this is; false for the deployer's requests.
func principalOf(ctx context.Context) (principal, bool) {
	p, ok := ctx.Value(principalKey{}).(principal)
	return p, ok
}

// enforce evaluates checks the front makes of its own (not from a signed
// AWS request: ECR's registry API) and records a denial as the handler
// does.
func (g *iamGate) enforce(ctx context.Context, p principal, service, region string, checks []check) (Denial, bool) {
	d, ok := g.evaluate(ctx, p, service, region, checks)
	if !ok && ctx.Err() == nil {
		g.mu.Lock()
		g.denials = append(g.denials, d)
		g.mu.Unlock()
	}
	return d, ok
}

// authorize evaluates every check the request needs; the first one denied
// (or one the endpoint cannot build) refuses the whole request, as AWS does.
func (g *iamGate) authorize(ctx context.Context, p principal, req awsRequest) (Denial, bool) {
	checks, err := g.checks(ctx, req)
	if err != nil {
		return Denial{Principal: p.arn(g.account), Action: req.service + ":?", Why: []string{"the sandbox cannot authorize this request: " + err.Error()}}, false
	}
	return g.evaluate(ctx, p, req.service, req.region, checks)
}

// evaluate evaluates the checks of one request of service in region for
// the principal; the first one denied refuses the request.
func (g *iamGate) evaluate(ctx context.Context, p principal, service, region string, checks []check) (Denial, bool) {
	who := p.arn(g.account)
	pol, err := g.rolePolicies(ctx, p.role)
	if err != nil {
		return Denial{Principal: who, Action: service + ":?", Why: []string{err.Error()}}, false
	}
	for _, c := range checks {
		cx := map[string][]string{
			"aws:PrincipalArn":     {p.roleARN},
			"aws:PrincipalAccount": {g.account},
			"aws:PrincipalType":    {"AssumedRole"},
			"aws:userid":           {p.roleID + ":" + p.session},
			"aws:RequestedRegion":  {region},
		}
		if p.instance != "" {
			cx["ec2:SourceInstanceARN"] = []string{fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", region, g.account, p.instance)}
			cx["ec2:RoleDelivery"] = []string{"2.0"}
		}
		for k, v := range c.context {
			cx[k] = v
		}
		d, err := g.eval.Evaluate(ctx, iamsim.Request{Principal: who, Account: g.account, Action: c.action, Resource: c.resource,
			Context: cx, Policies: pol.policies, Boundaries: pol.boundaries})
		if err != nil {
			return Denial{Principal: who, Action: c.action, Resource: c.resource, Why: []string{err.Error()}}, false
		}
		if ignored := unexpectedIgnored(d.Ignored, c.context); len(ignored) > 0 {
			// A key the action does not know is a mistake in iamcontext.go.
			return Denial{Principal: who, Action: c.action, Resource: c.resource, Why: []string{"the sandbox built context keys the action does not use: " + strings.Join(ignored, ", ")}}, false
		}
		if !d.Allowed() {
			return Denial{Principal: who, Action: c.action, Resource: c.resource, Why: append([]string{d.Result}, d.Why...)}, false
		}
		g.mu.Lock()
		g.checked[p.role+" "+c.action]++
		g.mu.Unlock()
	}
	return Denial{}, true
}

// unexpectedIgnored keeps the ignored keys the check itself asked for (the
// principal's own keys apply to every action and are not listed).
func unexpectedIgnored(ignored []string, asked map[string][]string) []string {
	var out []string
	for _, k := range ignored {
		for a := range asked {
			if strings.EqualFold(a, k) {
				out = append(out, k)
			}
		}
	}
	return out
}

// readBody reads a request's body and puts it back for the next handler;
// false when it could not be read (the answer is written).
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}
