package runner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// config.sh and run.sh, and so every job, get an environment built by the
// agent, not the agent's own (issue 29 item 6): a variable an operator
// set for the agent is not there; PATH, HOME, the proxy and the tool
// cache in the work folder are. Shown to fail with the agent's
// environment inherited again (cmd.Env = os.Environ() plus the
// environment): "the agent's GHR_OPERATOR_SECRET reached the runner's
// command", "the agent's LD_PRELOAD reached the runner's command".
func TestRunnerCommandsGetACleanExplicitEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GHR_OPERATOR_SECRET", "operator-only")
	t.Setenv("LD_PRELOAD", "/nonexistent/evil.so")
	t.Setenv("https_proxy", "http://proxy.internal:3128")
	r := &Runner{Dir: dir, WorkDir: filepath.Join(dir, "work")}
	out, err := r.run(context.Background(), "tok", "/usr/bin/env")
	if err != nil {
		t.Fatalf("env: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	if _, ok := got["GHR_OPERATOR_SECRET"]; ok {
		t.Error("the agent's GHR_OPERATOR_SECRET reached the runner's command")
	}
	if _, ok := got["LD_PRELOAD"]; ok {
		t.Error("the agent's LD_PRELOAD reached the runner's command")
	}
	home, _ := os.UserHomeDir()
	for k, want := range map[string]string{"PATH": safePath, "HOME": home, "https_proxy": "http://proxy.internal:3128",
		"RUNNER_TOOL_CACHE": filepath.Join(dir, "work", "_tool"), "AGENT_TOOLSDIRECTORY": filepath.Join(dir, "work", "_tool"),
		"ACTIONS_RUNNER_INPUT_TOKEN": "tok"} {
		if got[k] != want {
			t.Errorf("%s=%q, want %q", k, got[k], want)
		}
	}
	var names []string
	for k := range got {
		names = append(names, k)
	}
	slices.Sort(names)
	if want := "ACTIONS_RUNNER_INPUT_TOKEN AGENT_TOOLSDIRECTORY HOME LANG LOGNAME PATH RUNNER_TOOL_CACHE USER https_proxy"; strings.Join(names, " ") != want {
		t.Errorf("the runner's command got %v, want exactly %s", names, want)
	}
}
