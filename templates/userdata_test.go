package templates

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
)

// nasty would end or escape any heredoc or quoting it were put in: quotes,
// command substitutions, backticks, heredoc terminators, a CRLF line,
// non-ASCII, a byte that is not UTF-8 and no final newline.
const nasty = "#!/bin/bash\n" +
	"echo \"it's $(whoami) `date` ${HOME}\" '\"' '\\'' %s %%\n" +
	"EOF\ncat <<EOF\nEOF\nUNIT\n'EOF'\n" +
	"printf '%s\\n' \"\\\\ ü ✓ \xff\"\r\n" +
	"exit 0"

const (
	keyID   = "ASIAEXAMPLEKEY"
	secret  = "wJalrXUtnFEMI/K7MDENG+bPxRfiCY"
	session = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ=="
	role    = "ghr-instance-role"
)

func agentConfig() config.Config {
	c := config.Defaults()
	c.Table = "ghr-prod-state"
	return c
}

func valid() UserData {
	return UserData{
		Agent:           agentConfig(),
		AgentURL:        "https://ghr-artifacts.s3.eu-west-1.amazonaws.com/agent/ghrunner-agent",
		AgentSHA256:     strings.Repeat("a", 64),
		PreRunnerScript: nasty,
		CleanupScript:   "#!/bin/sh\ndocker system prune -af\n",
	}
}

func TestRenderValidates(t *testing.T) {
	cases := []struct {
		want   string
		change func(*UserData)
	}{
		{"agent.table:", func(u *UserData) { u.Agent.Table = "" }},
		{"agent.workDir:", func(u *UserData) { u.Agent.WorkDir = "/" }},
		{"agent.imdsEndpoint:", func(u *UserData) { u.Agent.IMDSEndpoint = "169.254.169.254" }},
		{"agent_path, agent_url:", func(u *UserData) { u.AgentPath = "/usr/local/bin/ghrunner-agent" }},
		{"agent_path, agent_url:", func(u *UserData) { u.AgentURL = "" }},
		{"agent_path:", func(u *UserData) { u.AgentURL, u.AgentSHA256, u.AgentPath = "", "", "bin/ghrunner-agent" }},
		{"agent_path:", func(u *UserData) { u.AgentURL, u.AgentSHA256, u.AgentPath = "", "", "/usr/bin/$(reboot)" }},
		{"agent_sha256:", func(u *UserData) { u.AgentURL, u.AgentPath = "", "/usr/local/bin/ghrunner-agent" }},
		{"agent_url:", func(u *UserData) { u.AgentURL = "s3://ghr-artifacts/agent/ghrunner-agent" }},
		{"agent_url:", func(u *UserData) { u.AgentURL = "http://ghr-artifacts.s3.eu-west-1.amazonaws.com/agent" }},
		{"agent_url:", func(u *UserData) { u.AgentURL += "?versionId=3" }},
		{"agent_url:", func(u *UserData) { u.AgentURL = "https://ghr-artifacts.s3.eu-west-1.amazonaws.com/" }},
		{"agent_url:", func(u *UserData) { u.AgentURL = "https://user:pw@example.com/agent" }},
		{"agent_sha256:", func(u *UserData) { u.AgentSHA256 = "" }},
		{"agent_sha256:", func(u *UserData) { u.AgentSHA256 = strings.Repeat("A", 64) }},
		{"agent_sha256:", func(u *UserData) { u.AgentSHA256 = strings.Repeat("a", 63) }},
		{"region:", func(u *UserData) { u.AgentURL = "https://s3.internal.example/ghr/agent" }},
		{"region:", func(u *UserData) { u.Region = "us-east-1" }},
		{"region:", func(u *UserData) { u.AgentURL, u.Agent.Region = "https://s3.internal.example/ghr/agent", "europe" }},
		{"runner_user:", func(u *UserData) { u.RunnerUser = "root; rm -rf /" }},
		{"runner_user:", func(u *UserData) { u.RunnerUser, u.Agent.RunnerUser = "ghrunner", "builder" }},
		{"pre_runner_script:", func(u *UserData) { u.PreRunnerScript = "apt-get install -y jq\n" }},
		{"pre_runner_script:", func(u *UserData) { u.Agent.PreRunnerScript = "/opt/setup.sh" }},
		{"cleanup_script:", func(u *UserData) { u.CleanupScript = "#!/bin/sh\r\nrm -rf /tmp/*\r\n" }},
		{"user data is ", func(u *UserData) { u.PreRunnerScript = "#!/bin/sh\n" + strings.Repeat("x", 12000) }},
	}
	for _, c := range cases {
		u := valid()
		c.change(&u)
		out, err := Render(u)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("want an error starting %q, got %v", c.want, err)
		}
		if out != nil {
			t.Errorf("%s: Render returned user data along with its error", c.want)
		}
	}
}

func TestRenderAccepts(t *testing.T) {
	cases := []struct {
		name, want string
		change     func(*UserData)
	}{
		{"region from the URL", `region='eu-west-1'`, func(u *UserData) {}},
		{"same region given twice", `region='eu-west-1'`, func(u *UserData) { u.Region = "eu-west-1" }},
		{"VPC endpoint", `region='us-gov-west-1'`, func(u *UserData) {
			u.AgentURL = "https://bucket.vpce-0a1b2c3d-4e5f6a7b.s3.us-gov-west-1.vpce.amazonaws.com/ghr/agent"
		}},
		{"endpoint override, region from the agent", `region='ap-south-2'`, func(u *UserData) {
			u.AgentURL, u.Agent.Region = "https://s3.internal.example/ghr/agent", "ap-south-2"
		}},
		{"http on loopback", `'http://127.0.0.1:9000/ghr/agent'`, func(u *UserData) { u.AgentURL, u.Region = "http://127.0.0.1:9000/ghr/agent", "eu-west-1" }},
		{"runner user from the agent config", `U='builder'`, func(u *UserData) { u.Agent.RunnerUser = "builder" }},
		{"preinstalled", `ln -sfn '/usr/local/bin/ghrunner-agent'`, func(u *UserData) {
			u.AgentURL, u.AgentSHA256, u.AgentPath = "", "", "/usr/local/bin/ghrunner-agent"
		}},
	}
	for _, c := range cases {
		u := valid()
		c.change(&u)
		out, err := Render(u)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("%s: user data lacks %s", c.name, c.want)
		}
		if strings.Contains(string(out), "whoami") || strings.Contains(string(out), "docker system prune") {
			t.Errorf("%s: operator script text appears in clear in the user data", c.name)
		}
	}
}

func TestSizeWithA4KBScript(t *testing.T) {
	u := valid()
	u.PreRunnerScript = "#!/bin/bash\n" + strings.Repeat("echo installing dependencies and caches\n", 4096/40)
	u.PreRunnerScript += strings.Repeat("#", 4096-len(u.PreRunnerScript))
	out, err := Render(u)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.PreRunnerScript) != 4096 || len(out) > MaxSize {
		t.Fatalf("a %d-byte pre-runner script gives %d bytes of user data (limit %d)", len(u.PreRunnerScript), len(out), MaxSize)
	}
	t.Logf("S3 download, %d-byte pre-runner script and %d-byte cleanup script: %d bytes of user data (limit %d)", len(u.PreRunnerScript), len(u.CleanupScript), len(out), MaxSize)

	// The largest pre-runner script that still fits, for the documentation.
	lo, hi := 4096, 16384
	for lo < hi {
		mid := (lo + hi + 1) / 2
		u.PreRunnerScript = "#!/bin/sh\n" + strings.Repeat("x", mid-10)
		if _, err := Render(u); err == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	t.Logf("largest pre-runner script that fits (with that cleanup script): %d bytes", lo)
	u.PreRunnerScript = "#!/bin/sh\n" + strings.Repeat("x", lo+1-10)
	if _, err := Render(u); err == nil || !strings.Contains(err.Error(), fmt.Sprint(MaxSize)) {
		t.Fatalf("one byte over: %v", err)
	}
}

func TestShellcheck(t *testing.T) {
	bin, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatal("shellcheck not found: install it with `apt-get install -y shellcheck` (make tools runs scripts/ensure-shellcheck)")
	}
	preinstalled := valid()
	preinstalled.AgentURL, preinstalled.AgentSHA256, preinstalled.AgentPath = "", "", "/usr/local/bin/ghrunner-agent"
	proxied := valid()
	proxied.Agent.Proxy = &config.Proxy{URL: "http://proxy.internal:3128", NoProxy: []string{".corp.example", "[fd00::1]:8080"}}
	for name, u := range map[string]UserData{"download": valid(), "preinstalled": preinstalled, "proxied": proxied} {
		out, err := Render(u)
		if err != nil {
			t.Fatal(err)
		}
		// The firewall script is a quoted heredoc, which shellcheck reads
		// as text: check it as a script of its own.
		_, block, _ := strings.Cut(string(out), "<<'EOF'\n")
		block, _, _ = strings.Cut(block, "\nEOF\n")
		if !strings.HasPrefix(block, "#!/bin/bash\n# block-imds.sh") {
			t.Fatalf("block-imds.sh not found in the user data")
		}
		dir := t.TempDir()
		for file, text := range map[string]string{"userdata.sh": string(out), "block-imds.sh": block} {
			path := filepath.Join(dir, file)
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			if msg, err := exec.Command(bin, "--norc", path).CombinedOutput(); err != nil {
				t.Errorf("%s: shellcheck %s: %v\n%s", name, file, err, msg)
			}
		}
	}
}

// sigV4Error checks r's AWS Signature Version 4 for S3 as S3 would: the
// signature over the signed headers, the credential scope, and the headers
// S3 wants signed when the credentials are temporary.
func sigV4Error(r *http.Request, keyID, secret, region string) error {
	rest, ok := strings.CutPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ")
	if !ok {
		return fmt.Errorf("no SigV4 Authorization header: %q", r.Header.Get("Authorization"))
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	id, scope, _ := strings.Cut(fields["Credential"], "/")
	date, _, _ := strings.Cut(scope, "/")
	amzDate := r.Header.Get("X-Amz-Date")
	switch {
	case id != keyID:
		return fmt.Errorf("signed with key %q, want %q", id, keyID)
	case scope != date+"/"+region+"/s3/aws4_request" || !strings.HasPrefix(amzDate, date):
		return fmt.Errorf("credential scope %q (x-amz-date %q), want region %s and service s3", scope, amzDate, region)
	}
	signed := strings.Split(fields["SignedHeaders"], ";")
	for _, h := range []string{"host", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"} {
		if !slices.Contains(signed, h) {
			return fmt.Errorf("header %s is not signed (signed: %s)", h, fields["SignedHeaders"])
		}
	}
	var headers strings.Builder
	for _, h := range signed {
		v := strings.Join(r.Header.Values(h), ",")
		if h == "host" {
			v = r.Host
		}
		fmt.Fprintf(&headers, "%s:%s\n", h, strings.TrimSpace(v))
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	canonical := strings.Join([]string{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, headers.String(), fields["SignedHeaders"], payload}, "\n")
	digest := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(digest[:])
	key := []byte("AWS4" + secret)
	for _, part := range []string{date, region, "s3", "aws4_request", toSign} {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(part))
		key = mac.Sum(nil)
	}
	if got := fields["Signature"]; got != hex.EncodeToString(key) {
		return fmt.Errorf("signature %s does not verify", got)
	}
	return nil
}

// The checker itself: a request the AWS SDK signs passes, and fails with
// another secret, another region, or an unsigned session token.
func TestSigV4Checker(t *testing.T) {
	sign := func(token string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/agent/ghrunner-agent", nil)
		empty := sha256.Sum256(nil)
		r.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(empty[:]))
		creds := aws.Credentials{AccessKeyID: keyID, SecretAccessKey: secret, SessionToken: token}
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, r, hex.EncodeToString(empty[:]), "s3", "eu-west-1", time.Now(),
			func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := sigV4Error(sign(session), keyID, secret, "eu-west-1"); err != nil {
		t.Fatalf("SDK-signed request rejected: %v", err)
	}
	if err := sigV4Error(sign(session), keyID, "other-secret", "eu-west-1"); err == nil {
		t.Fatal("wrong secret accepted")
	}
	if err := sigV4Error(sign(session), keyID, secret, "us-east-1"); err == nil {
		t.Fatal("wrong region accepted")
	}
	unsignedToken := sign("")
	unsignedToken.Header.Set("X-Amz-Security-Token", session)
	if err := sigV4Error(unsignedToken, keyID, secret, "eu-west-1"); err == nil {
		t.Fatal("unsigned session token accepted")
	}
}

// cloud serves IMDSv2 (token, role, credentials) and the S3 object. The
// object needs a valid SigV4 signature with the role's session token; the
// first GET gets a 503 so the download must retry.
type cloud struct {
	*httptest.Server
	agent []byte
	abort func() // stops the user data when the request is wrong

	mu   sync.Mutex
	gets int
	errs []string
}

func newCloud(t *testing.T, agent []byte, abort func()) *cloud {
	c := &cloud{agent: agent, abort: abort}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.Close)
	return c
}

// report returns the bad requests seen and the count of signed GETs.
func (c *cloud) report() (errs []string, gets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.errs), c.gets
}

func (c *cloud) fail(w http.ResponseWriter, format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
	http.Error(w, c.errs[len(c.errs)-1], http.StatusForbidden)
	c.abort()
}

func (c *cloud) serve(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case r.URL.Path == "/latest/api/token":
		if r.Method != http.MethodPut || r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") == "" {
			c.fail(w, "IMDSv2 token: %s without a TTL header", r.Method)
			return
		}
		w.Write([]byte("imds-token-1"))
	case strings.HasPrefix(r.URL.Path, "/latest/"):
		if r.Header.Get("X-Aws-Ec2-Metadata-Token") != "imds-token-1" {
			c.fail(w, "IMDS %s without the session token", r.URL.Path)
			return
		}
		switch r.URL.Path {
		case "/latest/meta-data/iam/security-credentials/":
			w.Write([]byte(role))
		case "/latest/meta-data/iam/security-credentials/" + role:
			// Pretty-printed like the real service.
			fmt.Fprintf(w, "{\n  \"Code\" : \"Success\",\n  \"LastUpdated\" : \"2026-01-01T00:00:00Z\",\n  \"Type\" : \"AWS-HMAC\",\n"+
				"  \"AccessKeyId\" : %q,\n  \"SecretAccessKey\" : %q,\n  \"Token\" : %q,\n  \"Expiration\" : \"2026-01-01T06:00:00Z\"\n}", keyID, secret, session)
		default:
			c.fail(w, "unexpected IMDS path %s", r.URL.Path)
		}
	case r.URL.Path == "/ghr/ghrunner-agent":
		empty := sha256.Sum256(nil)
		switch {
		case r.Method != http.MethodGet:
			c.fail(w, "S3: %s", r.Method)
		case r.Header.Get("X-Amz-Security-Token") != session:
			c.fail(w, "S3: x-amz-security-token %q, want the role's session token", r.Header.Get("X-Amz-Security-Token"))
		case r.Header.Get("X-Amz-Content-Sha256") != hex.EncodeToString(empty[:]):
			c.fail(w, "S3: x-amz-content-sha256 %q", r.Header.Get("X-Amz-Content-Sha256"))
		default:
			if err := sigV4Error(r, keyID, secret, "eu-west-1"); err != nil {
				c.fail(w, "S3: %v", err)
				return
			}
			c.gets++
			if c.gets == 1 {
				http.Error(w, "SlowDown", http.StatusServiceUnavailable)
				return
			}
			w.Write(c.agent)
		}
	default:
		c.fail(w, "unexpected path %s", r.URL.Path)
	}
}

// box runs rendered user data in a temporary root. PATH holds only stubs
// that record their arguments (systemctl, useradd, id, chown, iptables,
// ip6tables, nft) and links to the few real tools the script needs, so
// nothing outside the root is touched.
type box struct {
	dir, root, bin, calls string
}

type boxOptions struct {
	userExists bool
	firewall   string // "iptables" (default), "iptables-broken", "nft", "dnf" (nft installable) or "none"
	noCurl     bool
}

func newBox(t *testing.T, o boxOptions) box {
	dir := t.TempDir()
	b := box{dir: dir, root: filepath.Join(dir, "root"), bin: filepath.Join(dir, "bin"), calls: filepath.Join(dir, "calls.log")}
	for _, d := range []string{b.root, b.bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range []string{"bash", "base64", "cat", "chmod", "grep", "ln", "mkdir", "mv", "rm", "date", "sha256sum", "sleep"} {
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Fatalf("%s not found: install it with `apt-get install -y coreutils grep curl`", tool)
		}
		if err := os.Symlink(path, filepath.Join(b.bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	if !o.noCurl {
		// The real curl, behind a stub that records its command line.
		curl, err := exec.LookPath("curl")
		if err != nil {
			t.Fatal("curl not found: install it with `apt-get install -y curl`")
		}
		b.stub(t, "curl", fmt.Sprintf("exec %q \"$@\"", curl))
	}
	idExit := "1"
	if o.userExists {
		idExit = "0"
	}
	b.stub(t, "id", "exit "+idExit)
	for _, name := range []string{"systemctl", "useradd", "chown"} {
		b.stub(t, name, "")
	}
	// Stateful firewall stubs: -C finds a rule -I added before.
	rules := func(name string, insert string) string {
		return fmt.Sprintf("state=%q\ncase $1 in\n-C) shift; grep -qxF -- \"$*\" \"$state\" 2>/dev/null ;;\n-I) %s ;;\nesac",
			filepath.Join(dir, name+".rules"), insert)
	}
	switch o.firewall {
	case "", "iptables":
		b.stub(t, "iptables", rules("iptables", `shift; echo "$*" >>"$state"`))
		b.stub(t, "ip6tables", rules("ip6tables", `shift; echo "$*" >>"$state"`))
	case "iptables-broken":
		b.stub(t, "iptables", rules("iptables", `echo "iptables: No chain/target/match by that name." >&2; exit 1`))
	case "nft":
		b.stub(t, "nft", "")
	case "dnf":
		// Installing nftables puts an nft on the path, as dnf would.
		b.stub(t, "nft", "")
		pkg := filepath.Join(dir, "nftables.pkg")
		if err := os.Rename(filepath.Join(b.bin, "nft"), pkg); err != nil {
			t.Fatal(err)
		}
		cp, err := exec.LookPath("cp")
		if err != nil {
			t.Fatal("cp not found: install coreutils")
		}
		b.stub(t, "dnf", fmt.Sprintf("%q -p %q %q", cp, pkg, filepath.Join(b.bin, "nft")))
	}
	return b
}

func (b box) stub(t *testing.T, name, body string) {
	text := fmt.Sprintf("#!/bin/bash\necho \"%s $*\" >>%q\n%s\n", name, b.calls, body)
	if err := os.WriteFile(filepath.Join(b.bin, name), []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}

// run executes script under bash with a clean environment; ctx ends it.
func (b box) run(ctx context.Context, t *testing.T, script []byte) (string, error) {
	path := filepath.Join(b.dir, "userdata.sh")
	if err := os.WriteFile(path, script, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(b.bin, "bash"), path)
	cmd.Env = []string{"PATH=" + b.bin, "GHR_ROOT=" + b.root, "HOME=" + b.dir, "LC_ALL=C"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (b box) callLog() []string {
	raw, _ := os.ReadFile(b.calls)
	return strings.Split(strings.TrimSpace(string(raw)), "\n")
}

func (b box) file(rel string) string { return filepath.Join(b.root, rel) }

// requireInOrder fails unless each of want is a call, in this order.
func requireInOrder(t *testing.T, calls []string, want ...string) {
	t.Helper()
	at := 0
	for _, w := range want {
		i := slices.Index(calls[at:], w)
		if i < 0 {
			t.Fatalf("call %q missing or out of order in:\n%s", w, strings.Join(calls, "\n"))
		}
		at += i + 1
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Perm()
}

func downloadUserData(t *testing.T, c *cloud, sum string) []byte {
	u := valid()
	u.AgentURL, u.AgentSHA256, u.Region = c.URL+"/ghr/ghrunner-agent", sum, "eu-west-1"
	u.Agent.IMDSEndpoint = c.URL
	script, err := Render(u)
	if err != nil {
		t.Fatal(err)
	}
	return script
}

func TestDownloadInstallsAndStarts(t *testing.T) {
	agent := []byte("#!/bin/sh\necho fake agent\n")
	sum := sha256.Sum256(agent)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := newCloud(t, agent, cancel)
	script := downloadUserData(t, c, hex.EncodeToString(sum[:]))
	b := newBox(t, boxOptions{})
	out, err := b.run(ctx, t, script)
	errs, gets := c.report()
	if len(errs) > 0 {
		t.Fatalf("bad requests: %s\n%s", strings.Join(errs, "\n"), out)
	}
	if err != nil {
		t.Fatalf("user data failed: %v\n%s", err, out)
	}
	t.Logf("user data output:\n%s", out)

	// The agent: downloaded after one retry, in place and executable.
	if gets != 2 || !strings.Contains(out, "ghrunner-userdata: agent download failed (try 1), retrying in 1s") {
		t.Errorf("want a retry after the 503: %d signed GETs", gets)
	}
	got, err := os.ReadFile(b.file(AgentBinary))
	if err != nil || !bytes.Equal(got, agent) {
		t.Fatalf("agent binary %q (%v), want the served one", got, err)
	}
	if m := mode(t, b.file(AgentBinary)); m != 0o755 {
		t.Errorf("agent binary mode %v", m)
	}
	if _, err := os.Stat(b.file(AgentBinary + ".part")); err == nil {
		t.Error("download left a .part file")
	}
	// The role's secrets reach curl on stdin: a command line is readable by
	// every user on the instance. The signature is the script's own, so no
	// curl feature decides it (curl signs only host and x-amz-date with
	// --aws-sigv4 before 7.86, and S3 refuses that: issue 30, item 4); the
	// cloud checks it as S3 does (sigV4Error).
	for _, call := range b.callLog() {
		if strings.Contains(call, secret) || strings.Contains(call, session) {
			t.Errorf("a credential on a command line: %s", call)
		}
		if strings.Contains(call, "--aws-sigv4") {
			t.Errorf("the download depends on curl's SigV4: %s", call)
		}
	}
	// The runner user must be able to walk down to its folders.
	for _, dir := range []string{"opt", "opt/ghrunner"} {
		if m := mode(t, b.file(dir)); m&0o005 != 0o005 {
			t.Errorf("/%s mode %v: the runner user cannot reach its folders", dir, m)
		}
	}

	// The config: exactly json.Marshal of the expected config.Config, 0600.
	want := agentConfig()
	want.IMDSEndpoint, want.RunnerUser, want.PreRunnerScript, want.CleanupScript = c.URL, "ghrunner", PreRunnerPath, CleanupPath
	wantJSON, _ := json.Marshal(want)
	gotJSON, err := os.ReadFile(b.file(ConfigPath))
	if err != nil || !bytes.Equal(gotJSON, wantJSON) {
		t.Fatalf("config file:\n%s\nwant\n%s (%v)", gotJSON, wantJSON, err)
	}
	if m := mode(t, b.file(ConfigPath)); m != 0o600 {
		t.Errorf("config mode %v, want 0600", m)
	}
	var decoded config.Config
	if err := json.Unmarshal(gotJSON, &decoded); err != nil || decoded.Validate() != nil {
		t.Errorf("config does not load back: %v / %v", err, decoded.Validate())
	}

	// The scripts: byte for byte, mode 0700.
	for path, text := range map[string]string{PreRunnerPath: nasty, CleanupPath: valid().CleanupScript} {
		got, err := os.ReadFile(b.file(path))
		if err != nil || string(got) != text {
			t.Errorf("%s changed on the way:\n%q\nwant\n%q (%v)", path, got, text, err)
		}
		if m := mode(t, b.file(path)); m != 0o700 {
			t.Errorf("%s mode %v, want 0700", path, m)
		}
	}

	// The user, the firewall, then the service.
	calls := b.callLog()
	requireInOrder(t, calls,
		"id -u ghrunner",
		"useradd --system --create-home --user-group --shell /bin/bash ghrunner",
		"chown -R ghrunner: "+b.file("opt/ghrunner/work"),
		"iptables -I OUTPUT -m owner --uid-owner ghrunner -d 169.254.169.254 -j REJECT",
		"ip6tables -I OUTPUT -m owner --uid-owner ghrunner -d fd00:ec2::254 -j REJECT",
		"systemctl daemon-reload",
		"systemctl enable --now ghrunner-agent.service")
	unit, err := os.ReadFile(b.file("etc/systemd/system/" + ServiceName))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"After=network-online.target", "Restart=always", "RestartSec=5",
		"ExecStartPre=-/etc/ghrunner/block-imds.sh ghrunner", "ExecStart=" + AgentBinary + " -config " + ConfigPath} {
		if !slices.Contains(strings.Split(string(unit), "\n"), line) {
			t.Errorf("unit lacks %q:\n%s", line, unit)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(out), "ghrunner-userdata: agent started") {
		t.Errorf("no final log line:\n%s", out)
	}

	// The service applies the firewall at every start: again, nothing is
	// added twice; after a reboot (rules gone), it is added again.
	block := b.file("etc/ghrunner/block-imds.sh")
	if m := mode(t, block); m != 0o700 {
		t.Errorf("block-imds.sh mode %v", m)
	}
	rerun := func() []string {
		os.Remove(b.calls)
		cmd := exec.Command(filepath.Join(b.bin, "bash"), block, "ghrunner")
		cmd.Env = []string{"PATH=" + b.bin}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("block-imds.sh: %v\n%s", err, out)
		}
		return b.callLog()
	}
	for _, call := range rerun() {
		if strings.Contains(call, " -I ") {
			t.Errorf("rule added twice: %s", call)
		}
	}
	os.Remove(filepath.Join(b.dir, "iptables.rules"))
	requireInOrder(t, rerun(), "iptables -I OUTPUT -m owner --uid-owner ghrunner -d 169.254.169.254 -j REJECT")
}

func TestWrongChecksumStartsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	tampered := []byte("#!/bin/sh\necho tampered\n")
	c := newCloud(t, tampered, cancel)
	want := strings.Repeat("0", 64)
	b := newBox(t, boxOptions{})
	out, err := b.run(ctx, t, downloadUserData(t, c, want))
	if errs, _ := c.report(); len(errs) > 0 {
		t.Fatalf("bad requests: %s\n%s", strings.Join(errs, "\n"), out)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("user data did not fail (%v):\n%s", err, out)
	}
	sum := sha256.Sum256(tampered)
	line := fmt.Sprintf("ghrunner-userdata: agent checksum mismatch: want %s got %s", want, hex.EncodeToString(sum[:]))
	if !slices.Contains(strings.Split(out, "\n"), line) {
		t.Fatalf("no line %q in:\n%s", line, out)
	}
	for _, call := range b.callLog() {
		if strings.HasPrefix(call, "systemctl") {
			t.Errorf("something was started: %s", call)
		}
	}
	for _, path := range []string{AgentBinary, AgentBinary + ".part", "/etc/systemd/system/" + ServiceName} {
		if _, err := os.Stat(b.file(path)); err == nil {
			t.Errorf("%s exists after a checksum mismatch", path)
		}
	}
}

func preinstalled(t *testing.T) []byte {
	u := UserData{Agent: agentConfig(), AgentPath: "/usr/local/bin/ghrunner-agent"}
	script, err := Render(u)
	if err != nil {
		t.Fatal(err)
	}
	return script
}

func TestPreinstalledAgent(t *testing.T) {
	// No curl on PATH: the preinstalled path must not touch the network.
	b := newBox(t, boxOptions{userExists: true, noCurl: true})
	if err := os.MkdirAll(b.file("usr/local/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.file("usr/local/bin/ghrunner-agent"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := b.run(context.Background(), t, preinstalled(t))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	target, err := os.Readlink(b.file(AgentBinary))
	if err != nil || target != "/usr/local/bin/ghrunner-agent" {
		t.Fatalf("%s → %q (%v)", AgentBinary, target, err)
	}
	calls := b.callLog()
	requireInOrder(t, calls, "id -u ghrunner", "systemctl daemon-reload", "systemctl enable --now ghrunner-agent.service")
	for _, call := range calls {
		if strings.HasPrefix(call, "useradd") {
			t.Errorf("existing user created again: %s", call)
		}
	}
	for _, path := range []string{PreRunnerPath, CleanupPath} {
		if _, err := os.Stat(b.file(path)); err == nil {
			t.Errorf("%s written though no script was given", path)
		}
	}
	raw, _ := os.ReadFile(b.file(ConfigPath))
	var cfg config.Config
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.PreRunnerScript != "" || cfg.Table != "ghr-prod-state" {
		t.Errorf("config %s (%v)", raw, err)
	}
}

func TestPreinstalledAgentMissing(t *testing.T) {
	b := newBox(t, boxOptions{noCurl: true})
	out, err := b.run(context.Background(), t, preinstalled(t))
	if err == nil || !strings.Contains(out, "ghrunner-userdata: agent /usr/local/bin/ghrunner-agent is missing or not executable") {
		t.Fatalf("want a clear failure, got %v:\n%s", err, out)
	}
	for _, call := range b.callLog() {
		if strings.HasPrefix(call, "systemctl") {
			t.Errorf("started without an agent: %s", call)
		}
	}
}

func TestFirewallFallbacks(t *testing.T) {
	agentIn := func(b box) {
		os.MkdirAll(b.file("usr/local/bin"), 0o755)
		os.WriteFile(b.file("usr/local/bin/ghrunner-agent"), []byte("#!/bin/sh\n"), 0o755)
	}

	t.Run("nft", func(t *testing.T) {
		b := newBox(t, boxOptions{firewall: "nft", noCurl: true})
		agentIn(b)
		if out, err := b.run(context.Background(), t, preinstalled(t)); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		calls := b.callLog()
		i := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "nft ") })
		if i < 0 {
			t.Fatalf("nft not called:\n%s", strings.Join(calls, "\n"))
		}
		for _, rule := range []string{"meta skuid ghrunner ip daddr 169.254.169.254 reject", "meta skuid ghrunner ip6 daddr fd00:ec2::254 reject", "flush chain inet ghrunner imds"} {
			if !strings.Contains(calls[i], rule) {
				t.Errorf("nft call lacks %q: %s", rule, calls[i])
			}
		}
		requireInOrder(t, calls, calls[i], "systemctl enable --now ghrunner-agent.service")
	})

	// Neither tool (issue 16): nftables is installed, or the agent never
	// starts — jobs must not reach the instance role.
	t.Run("none, nftables installable", func(t *testing.T) {
		b := newBox(t, boxOptions{firewall: "dnf", noCurl: true})
		agentIn(b)
		out, err := b.run(context.Background(), t, preinstalled(t))
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		calls := b.callLog()
		i := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "nft ") })
		if i < 0 || !strings.Contains(calls[i], "meta skuid ghrunner ip daddr 169.254.169.254 reject") {
			t.Fatalf("no IMDS rule after installing nftables:\n%s", strings.Join(calls, "\n"))
		}
		requireInOrder(t, calls, "dnf install -y nftables", calls[i], "systemctl enable --now ghrunner-agent.service")
	})

	// Neither tool and no nftables, or a tool that fails: the reason is left
	// for the agent, which starts, signals UD_FAILED with it and runs no job
	// (agent/security_test.go TestAnInstanceThatCannotBlockIMDSSignalsFailedAndRunsNoJob).
	for _, c := range []struct{ firewall, reason string }{
		{"none", "cannot block IMDS for ghrunner: neither iptables nor nft is available"},
		{"iptables-broken", "cannot block IMDS for ghrunner with iptables"},
	} {
		t.Run(c.firewall, func(t *testing.T) {
			b := newBox(t, boxOptions{firewall: c.firewall, noCurl: true})
			agentIn(b)
			out, err := b.run(context.Background(), t, preinstalled(t))
			if err != nil || !strings.Contains(out, "ghrunner-userdata: "+c.reason) {
				t.Fatalf("want the reason logged and the agent started, got %v:\n%s", err, out)
			}
			reason, err := os.ReadFile(b.file("run/ghrunner/firewall-failed"))
			if err != nil || !strings.Contains(string(reason), c.reason) {
				t.Fatalf("firewall-failed: %q %v, want the reason for the agent", reason, err)
			}
			requireInOrder(t, b.callLog(), "systemctl enable --now ghrunner-agent.service")
		})
	}

}
