// Package templates renders the EC2 user data that installs and starts the
// ghrunner agent. The operator's scripts and the agent configuration travel
// as base64, never inside a heredoc, so no script text can end or escape
// the user data.
package templates

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"text/template"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
)

//go:embed userdata.sh.tmpl
var userDataTemplate string

// MaxUserData is EC2's limit on user data before base64.
const MaxUserData = 16 * 1024

// UserData is what the user data needs.
type UserData struct {
	// Agent is written to /etc/ghrunner/agent.json. Its script paths are
	// set by Render.
	Agent config.Config
	// AgentPath is a preinstalled agent binary in the AMI, or
	AgentPath string
	// AgentURL is the agent's S3 object URL, fetched with the instance
	// role's credentials and checked against AgentSHA256.
	AgentURL    string
	AgentSHA256 string
	Region      string
	// PreRunnerScript runs once per instance; CleanupScript after every run.
	PreRunnerScript string
	CleanupScript   string
	// RunnerUser runs the jobs (default "ghrunner").
	RunnerUser string
}

var (
	sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	userRE   = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)
)

const (
	preRunnerPath = "/etc/ghrunner/pre-runner.sh"
	cleanupPath   = "/etc/ghrunner/cleanup.sh"
)

// Render validates u and returns the user data script.
func Render(u UserData) ([]byte, error) {
	if u.RunnerUser == "" {
		u.RunnerUser = "ghrunner"
	}
	u.Agent.RunnerUser = u.RunnerUser
	u.Agent.PreRunnerScript, u.Agent.CleanupScript = "", ""
	if u.PreRunnerScript != "" {
		u.Agent.PreRunnerScript = preRunnerPath
	}
	if u.CleanupScript != "" {
		u.Agent.CleanupScript = cleanupPath
	}
	if err := u.validate(); err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(u.Agent)
	if err != nil {
		return nil, err
	}
	tmpl := template.Must(template.New("userdata").Funcs(template.FuncMap{
		"q":   shellQuote,
		"b64": func(s string) string { return "'" + base64.StdEncoding.EncodeToString([]byte(s)) + "'" },
	}).Parse(userDataTemplate))
	var out bytes.Buffer
	data := struct {
		UserData
		ConfigJSON string
	}{u, string(cfg)}
	if err := tmpl.Execute(&out, data); err != nil {
		return nil, err
	}
	if out.Len() > MaxUserData {
		return nil, fmt.Errorf("user data is %d bytes, over EC2's limit of %d: shorten pre_runner_script or cleanup_script (they count about 4/3 of their size)", out.Len(), MaxUserData)
	}
	return out.Bytes(), nil
}

func (u UserData) validate() error {
	if err := u.Agent.Validate(); err != nil {
		return fmt.Errorf("agent.%w", err)
	}
	switch {
	case (u.AgentPath == "") == (u.AgentURL == ""):
		return fmt.Errorf("agent_path / agent_url: set exactly one (a preinstalled binary, or an S3 object to download)")
	case u.AgentPath != "" && !strings.HasPrefix(u.AgentPath, "/"):
		return fmt.Errorf("agent_path: %q must be an absolute path", u.AgentPath)
	case !userRE.MatchString(u.RunnerUser):
		return fmt.Errorf("runner_user: %q must be a Linux user name (lowercase letters, digits, _ and -, at most 32)", u.RunnerUser)
	}
	if u.AgentURL != "" {
		parsed, err := url.Parse(u.AgentURL)
		if err != nil || (parsed.Scheme != "https" && parsed.Scheme != "http") || parsed.Host == "" {
			return fmt.Errorf("agent_url: %q must be the https URL of the S3 object", u.AgentURL)
		}
		if !sha256RE.MatchString(u.AgentSHA256) {
			return fmt.Errorf("agent_sha256: must be the 64 lowercase hex digits of the agent's SHA-256")
		}
		if !regionRE.MatchString(u.Region) {
			return fmt.Errorf("region: %q must be an AWS region such as eu-west-1 (used to sign the S3 download)", u.Region)
		}
	}
	return nil
}

// shellQuote quotes s for bash as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
