package templates

import (
	"bytes"
	"regexp"
	"testing"
)

// FuzzParse: Parse never panics on any user data, ghrunner's or not.
func FuzzParse(f *testing.F) {
	for _, u := range []UserData{valid(), withPath()} {
		b, err := Render(u)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(settingLines(b)) // whole user data (6 KB) slows the fuzzer to a crawl
	}
	f.Add([]byte("#!/bin/bash\nlog() { echo \"ghrunner-userdata: $*\"; }\nput \"$R/etc/ghrunner/agent.json\" 0600 'e30='\n"))
	f.Fuzz(func(t *testing.T, userData []byte) {
		u, err := Parse(userData)
		if err == nil && !bytes.Contains(userData, []byte("ghrunner-userdata")) {
			t.Fatalf("parsed foreign user data into %+v", u)
		}
	})
}

// FuzzRenderParse: whatever the scripts and directories hold — quotes,
// heredoc terminators, command substitutions, NUL bytes, CRLF, lines that
// look like the user data's own — Render either refuses them or Parse gives
// them back byte-exact and Render(Parse(x)) is x.
func FuzzRenderParse(f *testing.F) {
	f.Add("echo 'it'\\''s' \"$HOME\" `id`\ncat <<EOF\nEOF\n$(rm -rf /)\n", "rm -rf /tmp/x\n", "/opt/ghrunner/runner", "/opt/ghrunner/work", false)
	f.Add("EOF\n'EOF'\n\"EOF\"\nput \"$R/etc/ghrunner/agent.json\" 0600 'e30='\n", "\x00\r\n", "/opt/r'x", "/opt/w x", true)
	f.Fuzz(func(t *testing.T, pre, cleanup, runnerDir, workDir string, preinstalled bool) {
		u := valid()
		if preinstalled {
			u = withPath()
		}
		u.PreRunnerScript, u.CleanupScript = "", ""
		if pre != "" {
			u.PreRunnerScript = "#!/bin/bash\n" + pre
		}
		if cleanup != "" {
			u.CleanupScript = "#!/bin/sh\n" + cleanup
		}
		u.Agent.RunnerDir, u.Agent.WorkDir = runnerDir, workDir
		first, err := Render(u)
		if err != nil {
			return
		}
		got, err := Parse(first)
		if err != nil {
			t.Fatalf("Parse of rendered user data: %v", err)
		}
		if got.PreRunnerScript != u.PreRunnerScript || got.CleanupScript != u.CleanupScript {
			t.Fatalf("scripts %q %q, want %q %q", got.PreRunnerScript, got.CleanupScript, u.PreRunnerScript, u.CleanupScript)
		}
		if got.Agent.RunnerDir != runnerDir || got.Agent.WorkDir != workDir || got.AgentURL != u.AgentURL || got.AgentPath != u.AgentPath {
			t.Fatalf("parsed %+v", got)
		}
		again, err := Render(got)
		if err != nil {
			t.Fatalf("Render(Parse(x)): %v", err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("Render(Parse(x)) differs from x")
		}
	})
}

// settingLines keeps the lines of user data that Parse reads.
func settingLines(userData []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(userData, []byte("\n")) {
		for _, re := range []*regexp.Regexp{userLineRE, configLineRE, preLineRE, cleanupLineRE, urlLineRE, sumLineRE, pathLineRE} {
			if re.Match(line) || bytes.Contains(line, []byte("ghrunner-userdata:")) {
				out = append(out, line)
				break
			}
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func withPath() UserData {
	u := valid()
	u.AgentURL, u.AgentSHA256, u.AgentPath = "", "", "/usr/local/bin/ghrunner-agent"
	return u
}
