// Package config is the agent's configuration: the JSON file user-data
// writes (/etc/ghrunner/agent.json), overridden by GHRUNNER_* environment
// variables and then by command-line flags (settings.go).
//
// Invariants: every setting of a real instance is settable the same three
// ways (file, environment, flag); the fault-injection settings tests use
// (FileOnly) only from the file, so no shipped flag or variable plays with
// the agent's clock or its metadata service; Validate names the field and
// the rule of the first setting it refuses.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// DefaultPath is where user-data writes the configuration.
const DefaultPath = "/etc/ghrunner/agent.json"

// Duration is a time.Duration written as "15s", "5m" in JSON.
type Duration struct{ time.Duration }

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"15s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// Config is everything the agent needs to know that the instance itself
// cannot tell it (the instance id and region come from IMDS).
type Config struct {
	// Table is the state table's name.
	Table string `json:"table"`
	// RoleID is the id of the pool's instance role (IAM's RoleId, AROA…).
	// The agent's record is keyed "<role id>:<instance id>", the
	// ${aws:userid} of its instance-profile session, and the role may
	// touch no other key. The agent refuses to start without it.
	RoleID string `json:"roleId,omitempty"`
	// Region overrides the region read from IMDS.
	Region string `json:"region,omitempty"`
	// Endpoint and Endpoints override AWS endpoints (VPC endpoints, emulators).
	Endpoint  string            `json:"endpoint,omitempty"`
	Endpoints map[string]string `json:"endpoints,omitempty"`
	// IMDSEndpoint overrides the instance metadata endpoint (tests: the
	// file only).
	IMDSEndpoint string `json:"imdsEndpoint,omitempty"`
	// Proxy, when set, carries the agent's outbound HTTP(S), and so the
	// runner's and the package manager's, which inherit its environment
	// (proxy.go: ProxyEnv, which the agent sets on itself at start).
	Proxy *Proxy `json:"proxy,omitempty"`

	// RunnerDir holds the runner software (config.sh, run.sh). When
	// RunnerTarballURL is set the tarball is downloaded and unpacked there.
	RunnerDir           string `json:"runnerDir"`
	RunnerTarballURL    string `json:"runnerTarballUrl,omitempty"`
	RunnerTarballSHA256 string `json:"runnerTarballSha256,omitempty"`
	// OSRelease names the distribution (os-release(5)): before it
	// downloads the runner, the agent installs the libraries the runner
	// needs with the package manager of its family. Empty:
	// /etc/os-release; tests point it elsewhere (the file only).
	OSRelease string `json:"osRelease,omitempty"`
	// BootIDFile names the file that names this boot (default
	// /proc/sys/kernel/random/boot_id): lease anchors saved under another
	// boot mean nothing. Tests: the sandbox's instance host, which stops
	// and starts an instance's agent on one machine, writes one per boot.
	BootIDFile string `json:"bootIdFile,omitempty"`
	// RunDir is where each assignment's runner runs: a fresh copy of
	// RunnerDir, the runner user's, discarded when the assignment ends.
	RunDir string `json:"runDir"`
	// WorkDir is the runner's work folder, wiped between assignments.
	WorkDir string `json:"workDir"`
	// RunnerUser runs the runner; it must not be able to reach IMDS. Empty
	// means the agent's own user (tests only).
	RunnerUser string `json:"runnerUser,omitempty"`
	// StateDir keeps the agent's own small files (pre-runner marker,
	// current registration).
	StateDir string `json:"stateDir"`

	// FirewallFailureFile, when present, says why the runner user's traffic
	// to IMDS could not be blocked (user data's block-imds.sh writes it,
	// at boot and at every agent start): the agent then signals UD_FAILED
	// with that reason and never registers a runner.
	FirewallFailureFile string `json:"firewallFailureFile,omitempty"`

	// DockerHost is the docker daemon whose objects the agent notes after
	// the pre-runner script and puts back after every assignment (empty:
	// the docker command's default). Without a docker command on the
	// instance there is nothing to clean.
	DockerHost string `json:"dockerHost,omitempty"`
	// KeepDockerImages leaves the images runs pulled or built for later
	// runs: a warm cache, and a trust (a run can leave an image under a name
	// a later run uses). Containers, volumes and networks still go.
	KeepDockerImages bool `json:"keepDockerImages,omitempty"`

	// PreRunnerScript runs once per instance before the first registration.
	PreRunnerScript  string   `json:"preRunnerScript,omitempty"`
	PreRunnerTimeout Duration `json:"preRunnerTimeout,omitempty"`
	// CleanupScript runs after every deregistration, after the wipe.
	CleanupScript  string   `json:"cleanupScript,omitempty"`
	CleanupTimeout Duration `json:"cleanupTimeout,omitempty"`

	HeartbeatInterval Duration `json:"heartbeatInterval,omitempty"`
	// IdlePoll is the record poll while waiting for an assignment; AssignedPoll
	// while a runner is registered.
	IdlePoll     Duration `json:"idlePoll,omitempty"`
	AssignedPoll Duration `json:"assignedPoll,omitempty"`
	// RecordWait is how long the agent waits for its record to appear
	// (createdTTL) before it terminates its own instance.
	RecordWait Duration `json:"recordWait,omitempty"`
	// ClockSkew is the grace added to the lease before self-termination.
	ClockSkew Duration `json:"clockSkew,omitempty"`
	// StopTimeout bounds the graceful stop of the runner.
	StopTimeout Duration `json:"stopTimeout,omitempty"`
	// JITRemovedMin: a runner removed sooner is not idle (lifecycle/jitcap.go).
	// Its default follows GitHub's behaviour; tests shorten it (the file
	// only).
	JITRemovedMin Duration `json:"jitRemovedMin,omitempty"`
	// ClockOffset shifts the agent's clock: the fault-injection suites use
	// it to play an instance whose clock is off. Zero on real instances
	// (the file only).
	ClockOffset Duration `json:"clockOffset,omitempty"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `json:"logLevel,omitempty"`
	// LogGroup is the pool's CloudWatch Logs group: the agent sends its
	// own log to stream <instance id>/agent and UserDataLog, the user
	// data's output, to <instance id>/user-data, every LogFlush. Empty:
	// the logs stay on the instance (journald, the cloud-init log).
	LogGroup    string   `json:"logGroup,omitempty"`
	UserDataLog string   `json:"userDataLog,omitempty"`
	LogFlush    Duration `json:"logFlush,omitempty"`
}

// Defaults returns the configuration before the file is read.
func Defaults() Config {
	return Config{
		RunnerDir:           "/opt/ghrunner/runner",
		RunDir:              "/opt/ghrunner/run",
		WorkDir:             "/opt/ghrunner/work",
		StateDir:            "/var/lib/ghrunner",
		FirewallFailureFile: "/run/ghrunner/firewall-failed",
		PreRunnerTimeout:    Duration{15 * time.Minute},
		CleanupTimeout:      Duration{5 * time.Minute},
		HeartbeatInterval:   Duration{15 * time.Second},
		IdlePoll:            Duration{time.Second},
		AssignedPoll:        Duration{3 * time.Second},
		RecordWait:          Duration{10 * time.Minute},
		ClockSkew:           Duration{time.Minute},
		StopTimeout:         Duration{2 * time.Minute},
		JITRemovedMin:       Duration{time.Minute},
		LogLevel:            "info",
		UserDataLog:         "/var/log/cloud-init-output.log",
		LogFlush:            Duration{5 * time.Second},
	}
}

var (
	tableRE      = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)
	sha256RE     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	dockerHostRE = regexp.MustCompile(`^(unix|tcp|ssh)://[^\s]+$`)
	// The agent downloads the runner tarball with net/http.
	httpURLRE = regexp.MustCompile(`^https?://[^\s/?#]+[^\s]*$`)
)

// Validate reports the first invalid field, naming it and the rule.
// roleIDRE is an IAM role's unique id (RoleId): AROA and 16 or more
// capital letters and digits.
var roleIDRE = regexp.MustCompile(`^AROA[A-Z0-9]{12,124}$`)

var logGroupRE = regexp.MustCompile(`^[A-Za-z0-9_./#-]{1,512}$`)

func (c Config) Validate() error {
	switch {
	case !tableRE.MatchString(c.Table):
		return fmt.Errorf("table: %q must be a DynamoDB table name (3-255 of A-Z a-z 0-9 _ . -)", c.Table)
	case c.LogGroup != "" && !logGroupRE.MatchString(c.LogGroup):
		return fmt.Errorf("logGroup: %q must be a CloudWatch Logs group name (1-512 of A-Z a-z 0-9 _ - / . #)", c.LogGroup)
	case c.UserDataLog != "" && !filepath.IsAbs(c.UserDataLog):
		return fmt.Errorf("userDataLog: %q must be an absolute path", c.UserDataLog)
	case c.RoleID != "" && !roleIDRE.MatchString(c.RoleID):
		return fmt.Errorf("roleId: %q must be an IAM role id (AROA followed by capital letters and digits)", c.RoleID)
	case !filepath.IsAbs(c.RunnerDir):
		return fmt.Errorf("runnerDir: %q must be an absolute path", c.RunnerDir)
	case !filepath.IsAbs(c.RunDir) || c.RunDir == "/":
		return fmt.Errorf("runDir: %q must be an absolute path other than / (it is replaced for every run)", c.RunDir)
	case !filepath.IsAbs(c.WorkDir) || c.WorkDir == "/":
		return fmt.Errorf("workDir: %q must be an absolute path other than / (it is wiped between runs)", c.WorkDir)
	case !filepath.IsAbs(c.StateDir):
		return fmt.Errorf("stateDir: %q must be an absolute path", c.StateDir)
	case c.RunnerTarballURL != "" && !httpURLRE.MatchString(c.RunnerTarballURL):
		return fmt.Errorf("runnerTarballUrl: %q must be an http(s) URL", c.RunnerTarballURL)
	case c.RunnerTarballURL != "" && !sha256RE.MatchString(c.RunnerTarballSHA256):
		return fmt.Errorf("runnerTarballSha256: must be the 64 lowercase hex digits of the tarball's SHA-256 when runnerTarballUrl is set")
	case c.OSRelease != "" && !filepath.IsAbs(c.OSRelease):
		return fmt.Errorf("osRelease: %q must be an absolute path", c.OSRelease)
	case c.BootIDFile != "" && !filepath.IsAbs(c.BootIDFile):
		return fmt.Errorf("bootIdFile: %q must be an absolute path", c.BootIDFile)
	case c.FirewallFailureFile != "" && !filepath.IsAbs(c.FirewallFailureFile):
		return fmt.Errorf("firewallFailureFile: %q must be an absolute path", c.FirewallFailureFile)
	case c.DockerHost != "" && !dockerHostRE.MatchString(c.DockerHost):
		return fmt.Errorf("dockerHost: %q must be a daemon address such as unix:///var/run/docker.sock (unix://, tcp:// or ssh://)", c.DockerHost)
	case c.PreRunnerScript != "" && !filepath.IsAbs(c.PreRunnerScript):
		return fmt.Errorf("preRunnerScript: %q must be an absolute path", c.PreRunnerScript)
	case c.CleanupScript != "" && !filepath.IsAbs(c.CleanupScript):
		return fmt.Errorf("cleanupScript: %q must be an absolute path", c.CleanupScript)
	}
	if c.Proxy != nil {
		if err := c.Proxy.Validate(); err != nil {
			return fmt.Errorf("proxy.%w", err)
		}
	}
	for _, p := range []struct{ name, v string }{
		{"runnerDir", c.RunnerDir}, {"runDir", c.RunDir}, {"workDir", c.WorkDir}, {"stateDir", c.StateDir},
		{"preRunnerScript", c.PreRunnerScript}, {"cleanupScript", c.CleanupScript},
	} {
		// JSON would turn bytes that are not UTF-8 into U+FFFD: the agent
		// would use another path than the user data created.
		if !utf8.ValidString(p.v) || strings.ContainsFunc(p.v, unicode.IsControl) {
			return fmt.Errorf("%s: %q must be valid UTF-8 without control characters", p.name, p.v)
		}
	}
	// Each of the three is replaced or emptied on its own schedule: none
	// may hold another.
	dirs := []struct{ name, v string }{{"runnerDir", c.RunnerDir}, {"runDir", c.RunDir}, {"workDir", c.WorkDir}}
	for _, a := range dirs {
		for _, b := range dirs {
			if a.name != b.name && strings.HasPrefix(filepath.Clean(b.v)+"/", filepath.Clean(a.v)+"/") {
				return fmt.Errorf("%s: %q must not hold %s %q, nor be the same folder (each is emptied or replaced on its own)", a.name, a.v, b.name, b.v)
			}
		}
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{
		{"preRunnerTimeout", c.PreRunnerTimeout}, {"cleanupTimeout", c.CleanupTimeout}, {"heartbeatInterval", c.HeartbeatInterval},
		{"idlePoll", c.IdlePoll}, {"assignedPoll", c.AssignedPoll}, {"recordWait", c.RecordWait}, {"stopTimeout", c.StopTimeout},
		{"jitRemovedMin", c.JITRemovedMin},
	} {
		if d.v.Duration <= 0 {
			return fmt.Errorf("%s: must be a positive duration, got %s", d.name, d.v)
		}
	}
	if c.LogGroup != "" && c.LogFlush.Duration <= 0 {
		return fmt.Errorf("logFlush: must be a positive duration with logGroup set, got %s", c.LogFlush)
	}
	if c.ClockSkew.Duration < 0 {
		return fmt.Errorf("clockSkew: must not be negative")
	}
	if c.ClockOffset.Duration < -time.Hour || c.ClockOffset.Duration > time.Hour {
		return fmt.Errorf("clockOffset: must be within one hour either way, got %s", c.ClockOffset)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("logLevel: %q must be debug, info, warn or error", c.LogLevel)
	}
	return nil
}

// Decode reads a configuration file's content over the defaults: one JSON
// object, no unknown fields, nothing after it. It does not Validate.
func Decode(raw []byte) (Config, error) {
	c := Defaults()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fieldOf(raw, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return c, errors.New("trailing data after the JSON object")
	}
	return c, nil
}

// fieldOf names the field of an error that encoding/json returns without
// one (a Duration's own: "time: unknown unit ..."), by decoding the fields
// one at a time.
func fieldOf(raw []byte, err error) error {
	var typeErr *json.UnmarshalTypeError
	var fields map[string]json.RawMessage
	if errors.As(err, &typeErr) && typeErr.Field != "" || json.Unmarshal(raw, &fields) != nil {
		return err
	}
	for name, v := range fields {
		one, _ := json.Marshal(map[string]json.RawMessage{name: v})
		var c Config
		if json.Unmarshal(one, &c) != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return err
}

// Load reads the file at path over the defaults (a missing file is an error
// only when required), then applies GHRUNNER_<FIELD> environment variables.
func Load(path string, required bool) (Config, error) {
	c := Defaults()
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && !required:
	case err != nil:
		return c, fmt.Errorf("read config: %w", err)
	default:
		if c, err = Decode(raw); err != nil {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
	}
	if err := c.applyEnv(os.LookupEnv); err != nil {
		return c, err
	}
	return c, nil
}
