package actionrun

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// AWS answers the two calls the action makes through the real AWS CLI:
// STS AssumeRoleWithWebIdentity (the CLI's credential provider, from
// AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE) and Lambda Invoke. It keeps
// what it was sent, and which credentials signed each invoke, so a test can
// tell the assumed role's from any other. Point the CLI at it with
// AWS_ENDPOINT_URL=URL.
type AWS struct {
	URL string

	srv *httptest.Server
	// Function answers an invoke: the response payload and, when the
	// function failed, a FunctionError. Default: {"ok":true}.
	Function func(name string, payload []byte) (response string, functionError string)
	// Throttle answers the first Throttle invokes with Lambda's 429
	// (TooManyRequestsException), before the function runs.
	Throttle int

	mu      sync.Mutex
	assumed []Assumed
	invokes []Invoke
}

// Assumed is one AssumeRoleWithWebIdentity call.
type Assumed struct {
	RoleArn, RoleSessionName, WebIdentityToken string
	AccessKeyID                                string // what it issued
}

// Invoke is one Lambda Invoke.
type Invoke struct {
	Function    string
	Payload     []byte
	AccessKeyID string // the key that signed it (SigV4 Credential=...)
	Session     string // X-Amz-Security-Token
}

var (
	invokePath = regexp.MustCompile(`^/2015-03-31/functions/([^/]+)/invocations$`)
	credential = regexp.MustCompile(`Credential=([^/]+)/`)
)

// NewAWS starts the stand-in; Close stops it.
func NewAWS() *AWS {
	a := &AWS{}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	a.URL = a.srv.URL
	return a
}

// Close stops the server.
func (a *AWS) Close() { a.srv.Close() }

// Assumed lists the role assumptions so far.
func (a *AWS) Assumed() []Assumed {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Assumed(nil), a.assumed...)
}

// Invokes lists the invokes so far.
func (a *AWS) Invokes() []Invoke {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Invoke(nil), a.invokes...)
}

func (a *AWS) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if m := invokePath.FindStringSubmatch(r.URL.Path); m != nil && r.Method == http.MethodPost {
		in := Invoke{Function: m[1], Payload: body, Session: r.Header.Get("X-Amz-Security-Token")}
		if c := credential.FindStringSubmatch(r.Header.Get("Authorization")); c != nil {
			in.AccessKeyID = c[1]
		}
		a.mu.Lock()
		a.invokes = append(a.invokes, in)
		fn, throttled := a.Function, len(a.invokes) <= a.Throttle
		a.mu.Unlock()
		if throttled {
			w.Header().Set("X-Amzn-ErrorType", "TooManyRequestsException")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"Reason":"ReservedFunctionConcurrentInvocationLimitExceeded","Type":"User","message":"Rate Exceeded."}`)
			return
		}
		response, functionError := `{"ok":true}`, ""
		if fn != nil {
			response, functionError = fn(in.Function, body)
		}
		if functionError != "" {
			w.Header().Set("X-Amz-Function-Error", functionError)
		}
		w.Header().Set("X-Amz-Executed-Version", "$LATEST")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, response)
		return
	}
	// STS speaks the query protocol: a form POST to /.
	if form, err := parseQuery(string(body)); err == nil && form["Action"] == "AssumeRoleWithWebIdentity" {
		key := "ASIA" + strings.ToUpper(random(8))
		a.mu.Lock()
		a.assumed = append(a.assumed, Assumed{RoleArn: form["RoleArn"], RoleSessionName: form["RoleSessionName"],
			WebIdentityToken: form["WebIdentityToken"], AccessKeyID: key})
		a.mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <AccessKeyId>%s</AccessKeyId>
      <SecretAccessKey>%s</SecretAccessKey>
      <SessionToken>session-%s</SessionToken>
      <Expiration>%s</Expiration>
    </Credentials>
    <SubjectFromWebIdentityToken>repo</SubjectFromWebIdentityToken>
    <AssumedRoleUser>
      <Arn>%s/%s</Arn>
      <AssumedRoleId>AROAFAKE:%s</AssumedRoleId>
    </AssumedRoleUser>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>`, key, random(20), key, time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			form["RoleArn"], form["RoleSessionName"], form["RoleSessionName"], random(8))
		return
	}
	http.Error(w, "the stand-in knows AssumeRoleWithWebIdentity and Lambda Invoke only: "+r.Method+" "+r.URL.Path, http.StatusNotImplemented)
}

func parseQuery(s string) (map[string]string, error) {
	out := map[string]string{}
	r, err := http.NewRequest(http.MethodPost, "/", strings.NewReader(s))
	if err != nil {
		return nil, err
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if err := r.ParseForm(); err != nil {
		return nil, err
	}
	for k, v := range r.PostForm {
		out[k] = v[0]
	}
	return out, nil
}

func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// JobEnv is the environment of a workflow job of run runID (attempt) on a
// GitHub-hosted runner, as far as the action reads it, with the AWS CLI
// pointed at a: this process's PATH (the real AWS CLI and python3), the
// Actions variables, RUNNER_TEMP (temp), and no AWS configuration of this
// machine's. It has static AWS credentials (AKIASTATIC), which an action
// that assumes a role must not use. tokenURL and requestToken are the
// Actions runtime's token service (empty: a job without id-token: write).
func JobEnv(a *AWS, temp, runID string, attempt int, tokenURL, requestToken string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || k == "HOME" || k == "LANG" || strings.HasPrefix(k, "PYENV") {
			env = append(env, kv)
		}
	}
	env = append(env, "GITHUB_ACTIONS=true", "GITHUB_RUN_ID="+runID, fmt.Sprintf("GITHUB_RUN_ATTEMPT=%d", attempt), "RUNNER_TEMP="+temp,
		"AWS_ENDPOINT_URL="+a.URL, "AWS_ACCESS_KEY_ID=AKIASTATIC", "AWS_SECRET_ACCESS_KEY=static",
		"AWS_CONFIG_FILE="+filepath.Join(temp, "..", "no-config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(temp, "..", "no-credentials"),
		"AWS_EC2_METADATA_DISABLED=true")
	if tokenURL != "" {
		env = append(env, "ACTIONS_ID_TOKEN_REQUEST_URL="+tokenURL, "ACTIONS_ID_TOKEN_REQUEST_TOKEN="+requestToken)
	}
	return env
}
