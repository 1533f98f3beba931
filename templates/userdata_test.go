package templates

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
)

func agentConfig() config.Config {
	c := config.Defaults()
	c.Table = "ghr-prod-state"
	return c
}

// nasty is a script that would break any heredoc or quoting.
const nasty = "#!/bin/bash\necho \"it's $(whoami) `date`\" '\"'\nEOF\ncat <<EOF\nEOF\nUNIT\n\\\\ ü ✓ $HOME\n"

func valid() UserData {
	return UserData{Agent: agentConfig(), AgentURL: "https://bucket.s3.eu-west-1.amazonaws.com/agent/ghrunner-agent", AgentSHA256: strings.Repeat("a", 64),
		Region: "eu-west-1", PreRunnerScript: nasty, CleanupScript: "#!/bin/sh\ndocker system prune -af\n"}
}

func TestRenderValidates(t *testing.T) {
	cases := []struct {
		want   string
		change func(*UserData)
	}{
		{"agent.table:", func(u *UserData) { u.Agent.Table = "" }},
		{"agent_path / agent_url:", func(u *UserData) { u.AgentPath = "/usr/local/bin/ghrunner-agent" }},
		{"agent_path / agent_url:", func(u *UserData) { u.AgentURL = "" }},
		{"agent_path:", func(u *UserData) { u.AgentURL, u.AgentPath = "", "bin/agent" }},
		{"agent_url:", func(u *UserData) { u.AgentURL = "s3://bucket/agent" }},
		{"agent_sha256:", func(u *UserData) { u.AgentSHA256 = "" }},
		{"agent_sha256:", func(u *UserData) { u.AgentSHA256 = strings.Repeat("A", 64) }},
		{"region:", func(u *UserData) { u.Region = "" }},
		{"runner_user:", func(u *UserData) { u.RunnerUser = "root; rm -rf /" }},
		{"user data is", func(u *UserData) { u.PreRunnerScript = strings.Repeat("x", 13000) }},
	}
	for _, c := range cases {
		u := valid()
		c.change(&u)
		if _, err := Render(u); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: Render = %v", c.want, err)
		}
	}
}

func TestSizeWithA4KBScript(t *testing.T) {
	u := valid()
	u.PreRunnerScript = "#!/bin/bash\n" + strings.Repeat("echo installing dependencies and warming caches\n", 4096/48)
	out, err := Render(u)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) > MaxUserData {
		t.Fatalf("%d bytes", len(out))
	}
	t.Logf("user data with a %d-byte pre-runner script: %d bytes (limit %d)", len(u.PreRunnerScript), len(out), MaxUserData)
}

func TestShellcheck(t *testing.T) {
	bin, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatal("shellcheck not found: install it with `apt-get install -y shellcheck` (make test does)")
	}
	for name, u := range map[string]UserData{"download": valid(), "preinstalled": {Agent: agentConfig(), AgentPath: "/usr/local/bin/ghrunner-agent"}} {
		out, err := Render(u)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "userdata.sh")
		os.WriteFile(path, out, 0o644)
		if msg, err := exec.Command(bin, path).CombinedOutput(); err != nil {
			t.Errorf("%s: shellcheck: %v\n%s", name, err, msg)
		}
	}
}

// sandbox runs rendered user data in a temporary root with systemctl,
// useradd, id, chown and iptables shimmed by stubs that log their arguments.
type sandbox struct {
	root, bin, log string
}

func newSandbox(t *testing.T) sandbox {
	dir := t.TempDir()
	s := sandbox{root: filepath.Join(dir, "root"), bin: filepath.Join(dir, "bin"), log: filepath.Join(dir, "calls.log")}
	os.MkdirAll(s.root, 0o755)
	os.MkdirAll(s.bin, 0o755)
	for _, name := range []string{"systemctl", "useradd", "chown", "iptables", "ip6tables"} {
		os.WriteFile(filepath.Join(s.bin, name), []byte("#!/bin/sh\necho \""+name+" $*\" >> "+s.log+"\n"), 0o755)
	}
	// id: the runner user does not exist yet.
	os.WriteFile(filepath.Join(s.bin, "id"), []byte("#!/bin/sh\nexit 1\n"), 0o755)
	return s
}

func (s sandbox) run(t *testing.T, script []byte, imds string) (string, error) {
	path := filepath.Join(filepath.Dir(s.root), "userdata.sh")
	os.WriteFile(path, script, 0o755)
	cmd := exec.Command("bash", path)
	cmd.Env = append(os.Environ(), "PATH="+s.bin+":"+os.Getenv("PATH"), "GHR_ROOT="+s.root, "GHR_IMDS="+imds)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (s sandbox) calls() string {
	raw, _ := os.ReadFile(s.log)
	return string(raw)
}

// cloud serves IMDS (token, role credentials) and S3 (the agent object,
// only with a SigV4 signature and the session token).
func cloud(t *testing.T, agent []byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			w.Write([]byte("imds-token"))
		case strings.HasPrefix(r.URL.Path, "/latest/") && r.Header.Get("X-aws-ec2-metadata-token") != "imds-token":
			w.WriteHeader(http.StatusUnauthorized)
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/":
			w.Write([]byte("ghr-instance-role\n"))
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/ghr-instance-role":
			json.NewEncoder(w).Encode(map[string]string{"Code": "Success", "AccessKeyId": "ASIAEXAMPLE", "SecretAccessKey": "secret/key+x", "Token": "session-token"})
		case r.URL.Path == "/agent/ghrunner-agent":
			auth := r.Header.Get("Authorization")
			if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/") || !strings.Contains(auth, "/eu-west-1/s3/aws4_request") || r.Header.Get("X-Amz-Security-Token") != "session-token" {
				http.Error(w, "AccessDenied: "+auth, http.StatusForbidden)
				return
			}
			w.Write(agent)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestUserDataRunsForReal(t *testing.T) {
	agent := []byte("#!/bin/sh\necho fake agent\n")
	sum := sha256.Sum256(agent)
	srv := cloud(t, agent)
	u := valid()
	u.AgentURL, u.AgentSHA256 = srv.URL+"/agent/ghrunner-agent", hex.EncodeToString(sum[:])
	script, err := Render(u)
	if err != nil {
		t.Fatal(err)
	}
	s := newSandbox(t)
	out, err := s.run(t, script, srv.URL)
	if err != nil {
		t.Fatalf("user data failed: %v\n%s", err, out)
	}
	bin := filepath.Join(s.root, "opt/ghrunner/bin/ghrunner-agent")
	got, err := os.ReadFile(bin)
	if err != nil || string(got) != string(agent) {
		t.Fatalf("agent not installed: %v", err)
	}
	if info, _ := os.Stat(bin); info.Mode().Perm()&0o111 == 0 {
		t.Fatal("agent not executable")
	}
	pre, err := os.ReadFile(filepath.Join(s.root, "etc/ghrunner/pre-runner.sh"))
	if err != nil || string(pre) != nasty {
		t.Fatalf("pre-runner script changed on the way:\n%q\nwant\n%q", pre, nasty)
	}
	cfgPath := filepath.Join(s.root, "etc/ghrunner/agent.json")
	info, err := os.Stat(cfgPath)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("config file mode: %v %v", info, err)
	}
	var cfg config.Config
	raw, _ := os.ReadFile(cfgPath)
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.Table != "ghr-prod-state" || cfg.PreRunnerScript != "/etc/ghrunner/pre-runner.sh" || cfg.CleanupScript != "/etc/ghrunner/cleanup.sh" || cfg.RunnerUser != "ghrunner" {
		t.Fatalf("config = %+v (%v)", cfg, err)
	}
	calls := s.calls()
	for _, want := range []string{"useradd --system --create-home --shell /bin/bash ghrunner", "iptables -A OUTPUT -m owner --uid-owner ghrunner -d 169.254.169.254 -j REJECT",
		"systemctl daemon-reload", "systemctl enable --now ghrunner-agent.service"} {
		if !strings.Contains(calls, want) {
			t.Errorf("missing call %q in:\n%s", want, calls)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(s.root, "etc/systemd/system/ghrunner-agent.service"))
	if !strings.Contains(string(unit), "Restart=always") || !strings.Contains(string(unit), "-config /etc/ghrunner/agent.json") {
		t.Fatalf("unit:\n%s", unit)
	}
}

func TestWrongChecksumStartsNothing(t *testing.T) {
	srv := cloud(t, []byte("tampered"))
	u := valid()
	u.AgentURL = srv.URL + "/agent/ghrunner-agent"
	script, err := Render(u)
	if err != nil {
		t.Fatal(err)
	}
	s := newSandbox(t)
	out, err := s.run(t, script, srv.URL)
	if err == nil {
		t.Fatalf("user data succeeded with a wrong checksum:\n%s", out)
	}
	sum := sha256.Sum256([]byte("tampered"))
	if !strings.Contains(out, fmt.Sprintf("ghrunner-userdata: agent checksum mismatch: want %s got %s", u.AgentSHA256, hex.EncodeToString(sum[:]))) {
		t.Fatalf("no clear log line:\n%s", out)
	}
	if strings.Contains(s.calls(), "systemctl") {
		t.Fatalf("something was started:\n%s", s.calls())
	}
	if _, err := os.Stat(filepath.Join(s.root, "opt/ghrunner/bin/ghrunner-agent")); err == nil {
		t.Fatal("a tampered agent was installed")
	}
}

func TestPreinstalledAgent(t *testing.T) {
	s := newSandbox(t)
	os.MkdirAll(filepath.Join(s.root, "usr/local/bin"), 0o755)
	os.WriteFile(filepath.Join(s.root, "usr/local/bin/ghrunner-agent"), []byte("#!/bin/sh\n"), 0o755)
	script, err := Render(UserData{Agent: agentConfig(), AgentPath: "/usr/local/bin/ghrunner-agent"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := s.run(t, script, "http://127.0.0.1:1"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	target, err := os.Readlink(filepath.Join(s.root, "opt/ghrunner/bin/ghrunner-agent"))
	if err != nil || target != "/usr/local/bin/ghrunner-agent" {
		t.Fatalf("agent link → %q (%v)", target, err)
	}
	if !strings.Contains(s.calls(), "systemctl enable --now ghrunner-agent.service") {
		t.Fatal("service not started")
	}
	if _, err := os.Stat(filepath.Join(s.root, "etc/ghrunner/pre-runner.sh")); err == nil {
		t.Fatal("a pre-runner script was written though none was given")
	}
}
