// Package templates renders the EC2 user data that installs and starts the
// ghrunner instance agent (docs/design.md).
//
// The user data is a bash script. It creates the unprivileged runner user,
// keeps that user away from the instance metadata service, writes the agent
// configuration and the operator's scripts, installs the agent (preinstalled
// in the AMI, or downloaded from S3 with the instance role and checked
// against its SHA-256) and starts it as the systemd unit
// ghrunner-agent.service. Operator text and the configuration travel as
// base64, never inside a heredoc or quotes, so no script text can end or
// escape the user data.
package templates

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"text/template"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
)

// MaxSize is EC2's limit on user data, counted before base64.
const MaxSize = 16 * 1024

// Where the user data puts things on the instance.
const (
	ConfigPath    = config.DefaultPath
	PreRunnerPath = "/etc/ghrunner/pre-runner.sh"
	CleanupPath   = "/etc/ghrunner/cleanup.sh"
	AgentBinary   = "/opt/ghrunner/bin/ghrunner-agent"
	ServiceName   = "ghrunner-agent.service"
	// DefaultRunnerUser runs the jobs when RunnerUser is empty.
	DefaultRunnerUser = "ghrunner"
)

// UserData is everything the user data needs. Exactly one of AgentPath and
// AgentURL is set.
type UserData struct {
	// Agent is written as ConfigPath. Start from config.Defaults(). Render
	// sets RunnerUser, and PreRunnerScript / CleanupScript to PreRunnerPath /
	// CleanupPath when the matching script text below is given.
	Agent config.Config
	// AgentPath is an agent binary preinstalled in the AMI.
	AgentPath string
	// AgentURL is the agent's object, https://<bucket>.s3.<region>.amazonaws.com/<key>
	// or the same path under an endpoint override (a VPC endpoint; plain
	// http only on a loopback address, for tests). It is fetched with the
	// instance role's credentials and must match AgentSHA256.
	AgentURL    string
	AgentSHA256 string
	// Region signs the download. Empty: the region in AgentURL's host,
	// else Agent.Region.
	Region string
	// PreRunnerScript and CleanupScript are script texts (any bytes) the
	// agent executes directly, so they start with a #! line.
	PreRunnerScript string
	CleanupScript   string
	// RunnerUser is the unprivileged user created for the jobs; empty means
	// Agent.RunnerUser, else DefaultRunnerUser.
	RunnerUser string
}

//go:embed userdata.sh.tmpl
var source string

var script = template.Must(template.New("userdata").Funcs(template.FuncMap{"q": shellQuote}).Parse(source))

// view is what the template sees: every value validated, and operator text
// only as base64.
type view struct {
	User, RunnerDir, WorkDir      string
	ConfigB64, PreB64, CleanupB64 string
	AgentPath                     string
	S3URL, SHA256, Region, IMDS   string
	// ProxyEnv is agent.json's proxy as NAME=value (config.ProxyEnv).
	ProxyEnv []string
}

var (
	sha256RE   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	regionRE   = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)
	s3RegionRE = regexp.MustCompile(`(?:^|\.)s3[.-](?:dualstack\.)?([a-z0-9-]+)(?:\.vpce)?\.amazonaws\.com(?:\.cn)?$`)
)

// The rules of runner_user and agent_path, which the user data writes into
// a shell script unquoted. Their one home: ghrunner_pool and
// ghrunner_user_data check them at plan with these, Render again.
var (
	RunnerUserRE   = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	RunnerUserRule = "must be a Linux user name (a-z, 0-9, _ and -, not starting with a digit or -, at most 32)"
	AgentPathRE    = regexp.MustCompile(`^/[A-Za-z0-9._/+-]*[A-Za-z0-9._+-]$`)
	AgentPathRule  = "must be an absolute file path of A-Z a-z 0-9 . _ / + -"
)

// Render validates u, naming the first bad field, and returns the user data.
func Render(u UserData) ([]byte, error) {
	v, err := u.view()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := script.Execute(&out, v); err != nil {
		return nil, err
	}
	if out.Len() > MaxSize {
		return nil, fmt.Errorf("user data is %d bytes, over EC2's limit of %d: shorten pre_runner_script (%d bytes) or cleanup_script (%d bytes); each costs 4/3 of its size",
			out.Len(), MaxSize, len(u.PreRunnerScript), len(u.CleanupScript))
	}
	return out.Bytes(), nil
}

func (u UserData) view() (view, error) {
	user := u.RunnerUser
	if user == "" {
		user = u.Agent.RunnerUser
	}
	if user == "" {
		user = DefaultRunnerUser
	}
	if !RunnerUserRE.MatchString(user) {
		return view{}, fmt.Errorf("runner_user: %q %s", user, RunnerUserRule)
	}
	if u.Agent.RunnerUser != "" && u.Agent.RunnerUser != user {
		return view{}, fmt.Errorf("runner_user: %q differs from agent.runnerUser %q: set one of them", user, u.Agent.RunnerUser)
	}
	cfg := u.Agent
	cfg.RunnerUser = user
	for _, s := range []struct {
		field, text, path string
		target            *string
	}{
		{"pre_runner_script", u.PreRunnerScript, PreRunnerPath, &cfg.PreRunnerScript},
		{"cleanup_script", u.CleanupScript, CleanupPath, &cfg.CleanupScript},
	} {
		if s.text == "" {
			continue
		}
		first, _, _ := strings.Cut(s.text, "\n")
		if !strings.HasPrefix(first, "#!/") || strings.HasSuffix(first, "\r") {
			return view{}, fmt.Errorf("%s: must start with an interpreter line such as #!/bin/bash ending in \\n (the agent executes the file itself)", s.field)
		}
		if *s.target != "" && *s.target != s.path {
			return view{}, fmt.Errorf("%s: given as text, so agent config's path must be empty or %s, not %q", s.field, s.path, *s.target)
		}
		*s.target = s.path
	}
	if err := cfg.Validate(); err != nil {
		return view{}, fmt.Errorf("agent.%w", err)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return view{}, fmt.Errorf("agent: %w", err)
	}
	v := view{
		User: user, RunnerDir: cfg.RunnerDir, WorkDir: cfg.WorkDir,
		ConfigB64: b64(string(raw)), PreB64: b64(u.PreRunnerScript), CleanupB64: b64(u.CleanupScript),
		ProxyEnv: cfg.ProxyEnv(),
	}

	switch {
	case (u.AgentPath == "") == (u.AgentURL == ""):
		return view{}, fmt.Errorf("agent_path, agent_url: set exactly one (a binary preinstalled in the AMI, or an S3 object to download)")
	case u.AgentPath != "":
		if !AgentPathRE.MatchString(u.AgentPath) {
			return view{}, fmt.Errorf("agent_path: %q %s", u.AgentPath, AgentPathRule)
		}
		if u.AgentSHA256 != "" {
			return view{}, fmt.Errorf("agent_sha256: only checked on a download; leave it empty with agent_path")
		}
		v.AgentPath = u.AgentPath
		return v, nil
	}

	s3, err := url.Parse(u.AgentURL)
	switch {
	case err != nil || s3.Host == "" || s3.User != nil:
		return view{}, fmt.Errorf("agent_url: %q must be an https URL of the S3 object", u.AgentURL)
	case s3.Scheme != "https" && !(s3.Scheme == "http" && loopback(s3.Hostname())):
		return view{}, fmt.Errorf("agent_url: %q must use https (the request carries the instance role's session token)", u.AgentURL)
	case s3.RawQuery != "" || s3.Fragment != "" || len(s3.Path) < 2:
		return view{}, fmt.Errorf("agent_url: %q must name an object, with no query or fragment", u.AgentURL)
	case !sha256RE.MatchString(u.AgentSHA256):
		return view{}, fmt.Errorf("agent_sha256: must be the 64 lowercase hex digits of the agent binary's SHA-256")
	}
	region := u.Region
	if m := s3RegionRE.FindStringSubmatch(s3.Hostname()); m != nil {
		if region != "" && region != m[1] {
			return view{}, fmt.Errorf("region: %q differs from %q in agent_url", region, m[1])
		}
		region = m[1]
	}
	if region == "" {
		region = cfg.Region
	}
	if !regionRE.MatchString(region) {
		return view{}, fmt.Errorf("region: %q must be an AWS region such as eu-west-1 (it signs the agent download; set region, agent.region, or use an S3 URL that names it)", region)
	}
	imds := strings.TrimRight(cfg.IMDSEndpoint, "/")
	if imds == "" {
		imds = "http://169.254.169.254"
	}
	if p, err := url.Parse(imds); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.Path != "" || p.RawQuery != "" {
		return view{}, fmt.Errorf("agent.imdsEndpoint: %q must be a base URL such as http://169.254.169.254", cfg.IMDSEndpoint)
	}
	v.S3URL, v.SHA256, v.Region, v.IMDS = u.AgentURL, u.AgentSHA256, region, imds
	return v, nil
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

func b64(s string) string {
	if s == "" {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// shellQuote makes s one bash word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
