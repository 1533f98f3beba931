package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func valid() Config {
	c := Defaults()
	c.Table = "ghr-state"
	return c
}

func TestValidateNamesTheField(t *testing.T) {
	cases := []struct {
		want   string
		change func(*Config)
	}{
		{"table:", func(c *Config) { c.Table = "" }},
		{"runnerDir:", func(c *Config) { c.RunnerDir = "runner" }},
		{"workDir:", func(c *Config) { c.WorkDir = "/" }},
		{"workDir:", func(c *Config) { c.WorkDir = "/opt"; c.RunnerDir = "/opt/runner" }},
		{"stateDir:", func(c *Config) { c.StateDir = "" }},
		{"runnerTarballSha256:", func(c *Config) { c.RunnerTarballURL = "https://x/runner.tgz" }},
		{"runnerTarballSha256:", func(c *Config) { c.RunnerTarballURL, c.RunnerTarballSHA256 = "https://x", strings.Repeat("G", 64) }},
		{"preRunnerScript:", func(c *Config) { c.PreRunnerScript = "setup.sh" }},
		{"cleanupScript:", func(c *Config) { c.CleanupScript = "clean.sh" }},
		{"dockerHost:", func(c *Config) { c.DockerHost = "/var/run/docker.sock" }},
		{"heartbeatInterval:", func(c *Config) { c.HeartbeatInterval = Duration{} }},
		{"clockSkew:", func(c *Config) { c.ClockSkew = Duration{-time.Second} }},
		{"clockOffset:", func(c *Config) { c.ClockOffset = Duration{2 * time.Hour} }},
		{"logLevel:", func(c *Config) { c.LogLevel = "loud" }},
	}
	for _, tc := range cases {
		c := valid()
		tc.change(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v", tc.want, err)
		}
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
}

// TestPrecedence: defaults < file < environment < flags.
func TestPrecedence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.json")
	os.WriteFile(path, []byte(`{"table":"from-file","workDir":"/w/file","heartbeatInterval":"20s","idlePoll":"2s"}`), 0o600)
	t.Setenv("GHRUNNER_WORK_DIR", "/w/env")
	t.Setenv("GHRUNNER_IDLE_POLL", "3s")
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	given := Flags(fs)
	if err := fs.Parse([]string{"-idlePoll", "4s"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(given); err != nil {
		t.Fatal(err)
	}
	if c.Table != "from-file" || c.WorkDir != "/w/env" || c.IdlePoll.Duration != 4*time.Second ||
		c.HeartbeatInterval.Duration != 20*time.Second || c.StopTimeout.Duration != 2*time.Minute {
		t.Fatalf("config = %+v", c)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.json"), true); err == nil {
		t.Error("missing required file accepted")
	}
	if _, err := Load(filepath.Join(dir, "missing.json"), false); err != nil {
		t.Errorf("missing optional file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"table":"t","heartbeatIntervall":"5s"}`), 0o600)
	if _, err := Load(bad, true); err == nil || !strings.Contains(err.Error(), "heartbeatIntervall") {
		t.Errorf("unknown field: %v", err)
	}
	os.WriteFile(bad, []byte(`{"idlePoll":5}`), 0o600)
	if _, err := Load(bad, true); err == nil {
		t.Error("a number accepted as a duration")
	}
	t.Setenv("GHRUNNER_STOP_TIMEOUT", "soon")
	if _, err := Load(filepath.Join(dir, "missing.json"), false); err == nil || !strings.Contains(err.Error(), "GHRUNNER_STOP_TIMEOUT") {
		t.Errorf("bad env duration: %v", err)
	}
}

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{"table": "GHRUNNER_TABLE", "runnerTarballSha256": "GHRUNNER_RUNNER_TARBALL_SHA256", "imdsEndpoint": "GHRUNNER_IMDS_ENDPOINT"} {
		if got := EnvName(in); got != want {
			t.Errorf("EnvName(%s) = %s, want %s", in, got, want)
		}
	}
}
