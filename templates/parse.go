package templates

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Parse recovers the settings of user data that Render produced: the
// provider reads them back to show drift, and the sandbox starts each
// instance's agent with the config its user data carries.
func Parse(userData []byte) (UserData, error) {
	var u UserData
	text := string(userData)
	if !strings.Contains(text, "ghrunner-userdata") {
		return u, fmt.Errorf("user data was not rendered by ghrunner")
	}
	word := func(re *regexp.Regexp) (string, bool, error) {
		m := re.FindStringSubmatch(text)
		if m == nil {
			return "", false, nil
		}
		s, err := shellUnquote(m[1])
		return s, true, err
	}
	decoded := func(re *regexp.Regexp) (string, error) {
		s, ok, err := word(re)
		if !ok || err != nil {
			return "", err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		return string(b), err
	}
	var err error
	if u.RunnerUser, _, err = word(userLineRE); err != nil {
		return u, fmt.Errorf("runner user: %w", err)
	}
	cfg, err := decoded(configLineRE)
	if err != nil || cfg == "" {
		return u, fmt.Errorf("agent config: missing or not base64 (%v)", err)
	}
	if err := json.Unmarshal([]byte(cfg), &u.Agent); err != nil {
		return u, fmt.Errorf("agent config: %w", err)
	}
	if u.PreRunnerScript, err = decoded(preLineRE); err != nil {
		return u, fmt.Errorf("pre-runner script: %w", err)
	}
	if u.CleanupScript, err = decoded(cleanupLineRE); err != nil {
		return u, fmt.Errorf("cleanup script: %w", err)
	}
	if u.AgentURL, _, err = word(urlLineRE); err != nil {
		return u, fmt.Errorf("agent url: %w", err)
	}
	if u.AgentSHA256, _, err = word(sumLineRE); err != nil {
		return u, fmt.Errorf("agent checksum: %w", err)
	}
	if u.AgentPath, _, err = word(pathLineRE); err != nil {
		return u, fmt.Errorf("agent path: %w", err)
	}
	// Render folds these into the agent config; hand them back the same way
	// they came in.
	u.Agent.RunnerUser = ""
	if u.PreRunnerScript != "" {
		u.Agent.PreRunnerScript = ""
	}
	if u.CleanupScript != "" {
		u.Agent.CleanupScript = ""
	}
	return u, nil
}

// The lines of userdata.sh.tmpl that carry settings; a bash word is either a
// single-quoted string (with '\” for quotes) or plain characters.
const shellWord = `((?:'[^']*'|\\'|[^\s'"])+)`

var (
	userLineRE    = regexp.MustCompile(`(?m)^U=` + shellWord + `$`)
	configLineRE  = regexp.MustCompile(`(?m)^put "\$R/etc/ghrunner/agent\.json" 0600 ` + shellWord + `$`)
	preLineRE     = regexp.MustCompile(`(?m)^put "\$R/etc/ghrunner/pre-runner\.sh" 0700 ` + shellWord + `$`)
	cleanupLineRE = regexp.MustCompile(`(?m)^put "\$R/etc/ghrunner/cleanup\.sh" 0700 ` + shellWord + `$`)
	urlLineRE     = regexp.MustCompile(`(?m)^  url=` + shellWord + `$`)
	sumLineRE     = regexp.MustCompile(`(?m)^if \[ "\$sum" != ` + shellWord + ` \]; then$`)
	pathLineRE    = regexp.MustCompile(`(?m)^ln -sfn ` + shellWord + ` "\$A"$`)
)

// shellUnquote inverts shellQuote (and accepts a plain word).
func shellUnquote(s string) (string, error) {
	var b strings.Builder
	for len(s) > 0 {
		switch {
		case strings.HasPrefix(s, `\'`):
			b.WriteByte('\'')
			s = s[2:]
		case s[0] == '\'':
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return "", fmt.Errorf("unterminated quote")
			}
			b.WriteString(s[1 : end+1])
			s = s[end+2:]
		default:
			b.WriteByte(s[0])
			s = s[1:]
		}
	}
	return b.String(), nil
}
