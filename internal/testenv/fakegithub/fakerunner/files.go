package main

import (
	"bytes"
	"encoding/json"
	"os"
)

// The runner's files: .runner, .credentials and .credentials_rsaparams,
// written as .NET writes them (a UTF-8 byte order mark) and read back.

// settings is .runner (RunnerSettings, camelCase as the runner writes it).
type settings struct {
	AgentID    int64  `json:"agentId"`
	AgentName  string `json:"agentName"`
	PoolID     int64  `json:"poolId"`
	PoolName   string `json:"poolName,omitempty"`
	ServerURL  string `json:"serverUrl"`
	GitHubURL  string `json:"gitHubUrl"`
	WorkFolder string `json:"workFolder"`
	// DisableUpdate is --disableupdate (omitted when false, as the runner's
	// DataMember(EmitDefaultValue = false) writes it).
	DisableUpdate bool `json:"disableUpdate,omitempty"`
	// Ephemeral runners (--ephemeral, or a just-in-time configuration)
	// take one job; the listener then exits and deletes its local
	// configuration (src/Runner.Listener/Runner.cs: RunOnce for
	// settings.Ephemeral, DeleteLocalRunnerConfig after the job).
	Ephemeral bool `json:"ephemeral,omitempty"`
}

// credentials is .credentials (CredentialData).
type credentials struct {
	Scheme string            `json:"scheme"`
	Data   map[string]string `json:"data"`
}

// keyFile is .credentials_rsaparams: the real runner keeps its RSA key
// there; the fake keeps the secret it authenticates with.
type keyFile struct {
	Secret string `json:"fakeSecret"`
}

const (
	runnerFile = ".runner"
	credFile   = ".credentials"
	keyFileN   = ".credentials_rsaparams"
	// The listener of newer runners keeps settings and credentials the
	// service migrated it to beside the configured ones; config.sh counts
	// the runner configured while either settings file exists, and removal
	// deletes both.
	migratedRunnerFile = ".runner_migrated"
	migratedCredFile   = ".credentials_migrated"
)

var bom = []byte("\xef\xbb\xbf")

func writeFile(path string, v any, mode os.FileMode) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(append([]byte(nil), bom...), raw...), mode)
}

func readFile(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(bytes.TrimPrefix(raw, bom), v)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
