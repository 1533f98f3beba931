package config

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// The fault-injection settings are no shipped flag or variable: the file
// sets them, the flags and the environment do not.
func TestTestSettingsAreSetOnlyFromTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.json")
	os.WriteFile(path, []byte(`{"table":"t","clockOffset":"5m","imdsEndpoint":"http://127.0.0.1:9","osRelease":"/x/os-release","jitRemovedMin":"1s"}`), 0o600)
	c, err := Load(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if c.ClockOffset.Duration != 5*time.Minute || c.IMDSEndpoint != "http://127.0.0.1:9" || c.OSRelease != "/x/os-release" || c.JITRemovedMin.Duration != time.Second {
		t.Errorf("the file's test settings were not read: %+v", c)
	}
	for _, name := range FileOnly {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		Flags(fs)
		if err := fs.Parse([]string{"-" + name, "1s"}); err == nil {
			t.Errorf("-%s is a flag", name)
		}
		t.Run(name, func(t *testing.T) {
			t.Setenv(EnvName(name), "1s")
			if _, err := Load(path, true); err == nil || !strings.Contains(err.Error(), EnvName(name)) || !strings.Contains(err.Error(), "only in the configuration file") {
				t.Errorf("%s in the environment: %v, want it refused by name", EnvName(name), err)
			}
		})
	}
}

// Every other setting of the file is settable the same three ways.
func TestEveryRealSettingIsAFlagAndAVariableByTheSameName(t *testing.T) {
	var file []string // the settings of the file: Config's JSON names
	for f := range reflect.TypeFor[Config]().Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		file = append(file, name)
	}
	if len(file) < 30 {
		t.Fatalf("only %d settings found in Config", len(file))
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	Flags(fs)
	c := Defaults()
	fields := c.fields()
	for _, name := range file {
		_, isFlag := fields[name]
		if isFlag == slices.Contains(FileOnly, name) || isFlag != (fs.Lookup(name) != nil) {
			t.Errorf("%s: a flag and a variable %v, file only %v", name, isFlag, slices.Contains(FileOnly, name))
		}
	}
	given := map[string]string{"roleId": "AROAEXAMPLEEXAMPLE12", "endpoints": `{"dynamodb":"http://127.0.0.1:8000"}`, "logFlush": "9s", "keepDockerImages": "true"}
	if err := c.Apply(given); err != nil {
		t.Fatal(err)
	}
	if c.RoleID != "AROAEXAMPLEEXAMPLE12" || c.Endpoints["dynamodb"] != "http://127.0.0.1:8000" || c.LogFlush.Duration != 9*time.Second || !c.KeepDockerImages {
		t.Errorf("flags not applied: %+v", c)
	}
	if err := c.Apply(map[string]string{"endpoints": "dynamodb=x"}); err == nil || !strings.HasPrefix(err.Error(), "-endpoints:") {
		t.Errorf("a malformed -endpoints: %v, want it refused by name", err)
	}
}
