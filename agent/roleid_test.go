package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
)

// Issue 39 item 11: records are keyed <role id>:<instance id> and no other
// way. An agent configured without its pool's role id would read a key no
// record has and wait for ever: it refuses to start, naming roleId, before
// it asks IMDS or AWS anything (the IMDS endpoint here answers nothing).
func TestAnAgentWithoutItsRoleIDRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Defaults()
	cfg.Table, cfg.IMDSEndpoint = "ghr-state", "http://127.0.0.1:9"
	cfg.RunnerDir, cfg.RunDir, cfg.WorkDir, cfg.StateDir = filepath.Join(dir, "runner"), filepath.Join(dir, "run"), filepath.Join(dir, "work"), filepath.Join(dir, "state")
	raw, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "agent.json")
	must(t, os.WriteFile(path, raw, 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, buildAgent(t), "-config", path).CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 || !strings.Contains(string(out), "roleId: required") {
		t.Fatalf("agent without roleId: %v\n%s\nwant exit 1 naming roleId", err, out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the agent made %d entries in its directories, want none beside its configuration", len(entries)-1)
	}
}
