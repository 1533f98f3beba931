package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeBadInput: the agent's part of the bad-input catalogue.
func TestDecodeBadInput(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{`{"table":"t"} {"table":"u"}`, "trailing data"},
		{`{"table":"t"} x`, "trailing data"},
		{`{"table":1}`, "Config.table of type string"},
		{`{"heartbeatInterval":15}`, "heartbeatInterval: want a duration string"},
		{`{"heartbeatInterval":"15 s"}`, "heartbeatInterval: time: unknown unit"},
		{`{"idlePoll":"9999999999h"}`, "idlePoll: time: invalid duration"},
		{`{"endpoints":["s3"]}`, "Config.endpoints of type map"},
		{`{"Tabel":"t"}`, `unknown field "Tabel"`},
		{`[]`, "cannot unmarshal array"},
		{`{`, "unexpected EOF"},
	} {
		if _, err := Decode([]byte(c.raw)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%s) = %v, want %q", c.raw, err, c.want)
		}
	}
	for _, c := range []struct {
		want   string
		change func(*Config)
	}{
		{"workDir:", func(c *Config) { c.WorkDir = "/opt/w\nput \"$R/etc/ghrunner/agent.json\" 0600 'e30='" }},
		{"runnerDir:", func(c *Config) { c.RunnerDir = "/opt/\xff" }},
		{"stateDir:", func(c *Config) { c.StateDir = "/var/lib/g\x00" }},
		{"preRunnerScript:", func(c *Config) { c.PreRunnerScript = "/etc/pre\r.sh" }},
		{"runnerTarballUrl:", func(c *Config) { c.RunnerTarballURL = "file:///etc/passwd" }},
		{"runnerTarballUrl:", func(c *Config) { c.RunnerTarballURL = "s3://bucket/runner.tgz" }},
		{"runnerTarballUrl:", func(c *Config) { c.RunnerTarballURL = "https://x/a b" }},
		{"runnerTarballUrl:", func(c *Config) { c.RunnerTarballURL = "https:///runner.tgz" }},
	} {
		cfg := valid()
		c.change(&cfg)
		if err := cfg.Validate(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s Validate() = %v", c.want, err)
		}
	}
}

// FuzzConfigDecode: Decode never panics, and a configuration it reads and
// Validate accepts is written and read back unchanged (user data writes the
// provider's configuration as JSON; the agent reads it with Decode).
func FuzzConfigDecode(f *testing.F) {
	good, _ := json.Marshal(valid())
	f.Add(good)
	f.Add([]byte(`{"table":"t"}`))
	f.Add([]byte(`{"table":"ghr-state","workDir":"/","heartbeatInterval":"-1s"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := Decode(raw)
		if err != nil || c.Validate() != nil {
			return
		}
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := Decode(again)
		if err != nil {
			t.Fatalf("Decode(%s): %v", again, err)
		}
		if len(c.Endpoints) == 0 {
			c.Endpoints = nil // {} is dropped by omitempty
		}
		if !reflect.DeepEqual(c, back) {
			t.Fatalf("read %+v\nback %+v", c, back)
		}
	})
}
