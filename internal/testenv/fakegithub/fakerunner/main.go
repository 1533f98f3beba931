// Command fakerunner stands in for the GitHub Actions runner in tests,
// behind the config.sh and run.sh wrappers fakegithub.InstallRunner writes
// (both change to the runner directory first, as the real config.sh does).
// It honours the command-line contract of the real runner that ghrunner's
// agent relies on:
//
//	config.sh [--unattended] --url URL --token TOKEN --name NAME --labels L1,L2
//	          [--no-default-labels] [--work DIR] [--replace] [--runnergroup G]
//	config.sh remove --token TOKEN [--local]
//	run.sh
//
// Arguments may also come from ACTIONS_RUNNER_INPUT_<NAME> variables (the
// command line wins), and are parsed as the real runner parses them.
// config.sh exchanges the token at <api>/actions/runner-registration like
// the real one, and fails (exit 1) with the real runner's message when
// GitHub answers 404; on success it writes .runner, .credentials and
// .credentials_rsaparams (with a UTF-8 byte order mark, as .NET writes them).
// run.sh behaves as run.sh, run-helper.sh and Runner.Listener together: it
// comes online, takes jobs for its labels one at a time, runs each with
// bash -c in <work>/<repo>/<repo>, and on SIGINT or SIGTERM stops,
// cancelling the current job (its post step still runs). Like the real
// run.sh it exits 0 when the listener ends, also when it is not configured
// or its registration was deleted, or another listener held the runner's
// session for as long as the listener retried (exit code 5); it says why
// on its output. Sent an update message, the listener updates itself while
// it goes on polling, exits for the update, and run.sh launches the updated
// listener again (version.go).
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The real listener's return codes (src/Runner.Common/Constants.cs).
const (
	codeSuccess         = 0
	codeTerminatedError = 1
	codeSessionConflict = 5
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fakerunner config|run [args]")
		os.Exit(2)
	}
	args := os.Args[2:]
	runEnv = os.Environ() // before parse clears the ACTIONS_RUNNER_INPUT_ variables
	switch os.Args[1] {
	case "--version":
		fmt.Println(version())
		os.Exit(codeSuccess)
	case "config":
		refuseRoot("Must not run with sudo")
		envSH()
		if len(args) > 0 && strings.EqualFold(args[0], "remove") {
			os.Exit(remove(parse("remove", args[1:])))
		}
		os.Exit(configure(parse("configure", args)))
	case "run":
		refuseRoot("Must not run interactively with sudo")
		os.Exit(runScript(parse("run", args)))
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

// refuseRoot is the first check of config.sh and run-helper.sh
// (src/Misc/layoutroot/config.sh, run-helper.sh.template): as root they
// stop, unless RUNNER_ALLOW_RUNASROOT is set.
func refuseRoot(msg string) {
	if os.Getuid() == 0 && os.Getenv("RUNNER_ALLOW_RUNASROOT") == "" {
		fmt.Println(msg)
		os.Exit(1)
	}
}

// envSH is env.sh, which config.sh sources before configuring or removing
// (src/Misc/layoutroot/env.sh): it creates .env if missing, appends the
// variables of its list that the environment sets and .env does not name,
// and writes $PATH to .path.
func envSH() {
	raw, _ := os.ReadFile(".env")
	contents := string(raw)
	f, err := os.OpenFile(".env", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	for _, name := range []string{"LANG", "JAVA_HOME", "ANT_HOME", "M2_HOME", "ANDROID_HOME", "ANDROID_SDK_ROOT", "GRADLE_HOME", "NVM_BIN", "NVM_PATH", "LD_LIBRARY_PATH", "PERL5LIB"} {
		if v := os.Getenv(name); v != "" && !strings.Contains(contents, name+"=") {
			fmt.Fprintf(f, "%s=%s\n", name, v)
		}
	}
	os.WriteFile(".path", []byte(os.Getenv("PATH")+"\n"), 0o644)
}

// loadEnv is the listener's LoadAndSetEnv (src/Runner.Listener/Program.cs):
// every "NAME=value" line of <root>/.env is set in its environment, which
// every job inherits.
func loadEnv() {
	raw, err := os.ReadFile(".env")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if i := strings.IndexByte(line, '='); i > 0 {
			os.Setenv(line[:i], line[i+1:])
		}
	}
}

// --- command line ---------------------------------------------------------

var knownOptions = map[string][]string{
	"configure": {"unattended", "replace", "no-default-labels", "ephemeral", "disableupdate", "runasservice", "generateserviceconfig",
		"url", "token", "pat", "name", "labels", "runnergroup", "work", "auth", "monitorsocketaddress", "username", "windowslogonaccount", "windowslogonpassword"},
	"remove": {"token", "pat", "local"},
	"run":    {"once", "startuptype", "jitconfig"},
}

// command is a parsed command line: "--name value" is an argument, a
// "--name" followed by another "--name" (or nothing) a flag, names compared
// without regard to case, the first value winning; values starting with "-"
// are ignored — all as the runner's CommandLineParser does.
type command struct {
	name  string
	args  map[string]string
	flags map[string]bool
	env   map[string]string // ACTIONS_RUNNER_INPUT_<NAME>
}

func parse(name string, argv []string) command {
	c := command{name: name, args: map[string]string{}, flags: map[string]bool{}, env: map[string]string{}}
	scope := ""
	for _, a := range argv {
		switch {
		case strings.HasPrefix(a, "--") && len(a) > 2:
			if scope != "" {
				c.flags[scope] = true
			}
			scope = strings.ToLower(a[2:])
		case !strings.HasPrefix(a, "-"):
			if scope != "" {
				if _, dup := c.args[scope]; !dup {
					c.args[scope] = a
				}
				scope = ""
			}
		}
	}
	if scope != "" {
		c.flags[scope] = true
	}
	var unknown []string
	for n := range c.args {
		if !known(name, n) {
			unknown = append(unknown, n)
		}
	}
	for n := range c.flags {
		if !known(name, n) {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		fmt.Fprintf(os.Stderr, "Unrecognized command-line input arguments for command %s: '%s'. For usage refer to: .\\config.cmd --help or ./config.sh --help\n", name, strings.Join(unknown, ", "))
	}
	// Arguments passed in the environment, which is then cleared of them
	// (so that nothing the runner starts inherits a token).
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if rest, ok := cutPrefixFold(k, "ACTIONS_RUNNER_INPUT_"); ok {
			if v = strings.TrimSpace(v); v != "" {
				c.env[strings.ToLower(rest)] = v
			}
			os.Unsetenv(k)
		}
	}
	return c
}

func known(cmd, name string) bool {
	for _, n := range knownOptions[cmd] {
		if n == name {
			return true
		}
	}
	return false
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

func (c command) arg(name string) string {
	if v := c.args[name]; v != "" {
		return v
	}
	return c.env[name]
}

func (c command) flag(name string) bool {
	return c.flags[name] || strings.EqualFold(c.env[name], "true")
}

// required mirrors the runner's unattended prompt: a missing value ends
// the configuration.
func (c command) required(name string) (string, error) {
	if v := c.arg(name); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("Invalid configuration provided for %s. Terminating unattended configuration.", name)
}

// --- files -----------------------------------------------------------------

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

// --- config.sh -------------------------------------------------------------

func success(msg string) { fmt.Println("√ " + msg) }

func fail(err error) int {
	fmt.Fprintln(os.Stderr, err)
	return codeTerminatedError
}

func configure(c command) int {
	if exists(runnerFile) || exists(migratedRunnerFile) {
		return fail(errors.New("Cannot configure the runner because it is already configured. To reconfigure the runner, run 'config.cmd remove' or './config.sh remove' first."))
	}
	fmt.Print("\n# Authentication\n\n")
	runnerURL, err := c.required("url")
	if err != nil {
		return fail(err)
	}
	token, err := c.required("token")
	if err != nil {
		return fail(err)
	}
	tenant, err := exchange(runnerURL, token, "register")
	if err != nil {
		return fail(err)
	}
	success("Connected to GitHub")

	fmt.Print("\n# Runner Registration\n\n")
	name := c.arg("name")
	if name == "" {
		name, _ = os.Hostname()
	}
	labels := splitLabels(c.arg("labels"))
	if c.flag("no-default-labels") {
		if len(labels) == 0 {
			return fail(errors.New("Disabling default labels via --no-default-labels without specifying --labels is not supported"))
		}
	} else {
		labels = append([]string{"self-hosted", "Linux", arch()}, labels...)
	}
	var added struct {
		ID       int64  `json:"id"`
		Secret   string `json:"secret"`
		PoolID   int64  `json:"poolId"`
		PoolName string `json:"poolName"`
		Replaced bool   `json:"replaced"`
		// DisableUpdate is the flag as the server kept it.
		DisableUpdate bool `json:"disableUpdate"`
	}
	status, msg, err := call(context.Background(), http.MethodPost, tenant.URL+"runners", "Bearer "+tenant.Token, "", map[string]any{
		"name": name, "labels": labels, "replace": c.flag("replace"), "group": c.arg("runnergroup"), "os": "Linux",
		"disableUpdate": c.flag("disableupdate"),
	}, &added)
	switch {
	case err != nil:
		return fail(err)
	case status == http.StatusConflict:
		return fail(errors.New(msg))
	case status >= 300:
		return fail(fmt.Errorf("%s (HTTP %d)", msg, status))
	}
	// ConfigurationManager.cs: once the server added (or replaced) the
	// runner, a DisableUpdate it did not keep fails the configuration,
	// before any settings are saved; the runner stays registered.
	if c.flag("disableupdate") && !added.DisableUpdate {
		return fail(errors.New("The GitHub server does not support configuring a self-hosted runner with 'DisableUpdate' flag."))
	}
	if added.Replaced {
		fmt.Println("A runner exists with the same name")
		success("Successfully replaced the runner")
	} else {
		success("Runner successfully added")
	}
	success("Runner connection is good")

	fmt.Print("\n# Runner settings\n\n")
	work := c.arg("work")
	if work == "" {
		work = "_work"
	}
	err = errors.Join(
		writeFile(credFile, credentials{Scheme: "OAuth", Data: map[string]string{
			"clientId": fmt.Sprintf("fake-%d", added.ID), "authorizationUrl": tenant.URL + "oauth2/token", "requireFipsCryptography": "False",
		}}, 0o644),
		writeFile(keyFileN, keyFile{Secret: added.Secret}, 0o600),
		writeFile(runnerFile, settings{AgentID: added.ID, AgentName: name, PoolID: added.PoolID, PoolName: added.PoolName, ServerURL: tenant.URL, GitHubURL: runnerURL, WorkFolder: work,
			DisableUpdate: c.flag("disableupdate")}, 0o644),
	)
	if err != nil {
		return fail(err)
	}
	fmt.Println()
	success("Settings Saved.")
	fmt.Println()
	return codeSuccess
}

func splitLabels(s string) []string {
	var out []string
	for _, l := range strings.Split(s, ",") {
		l = strings.TrimSpace(l)
		dup := false
		for _, o := range out {
			dup = dup || strings.EqualFold(o, l)
		}
		if l != "" && !dup {
			out = append(out, l)
		}
	}
	return out
}

func arch() string {
	switch runtime.GOARCH {
	case "arm64":
		return "ARM64"
	case "arm":
		return "ARM"
	}
	return "X64"
}

type tenantAuth struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// exchange trades a registration or remove token for the credentials of the
// runner service, as the runner does: POST https://api.github.com/actions/
// runner-registration for github.com, <host>/api/v3/... otherwise, with
// "RemoteAuth <token>"; retried (3 attempts) unless GitHub says 404.
func exchange(runnerURL, token, event string) (tenantAuth, error) {
	u, err := url.Parse(runnerURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return tenantAuth{}, fmt.Errorf("Invalid configuration provided for url. Terminating unattended configuration.")
	}
	api := u.Scheme + "://" + u.Host + "/api/v3/actions/runner-registration"
	if strings.EqualFold(u.Host, "github.com") || strings.HasSuffix(strings.ToLower(u.Host), ".ghe.com") {
		api = u.Scheme + "://api." + u.Host + "/actions/runner-registration"
	}
	var out tenantAuth
	for attempt := 1; ; attempt++ {
		status, body, reqID, err := callRaw(context.Background(), http.MethodPost, api, "RemoteAuth "+token, map[string]string{"url": runnerURL, "runner_event": event})
		if err == nil && status < 300 {
			if err := json.Unmarshal(body, &out); err != nil || out.URL == "" || out.Token == "" {
				return tenantAuth{}, fmt.Errorf("unexpected answer from 'POST %s': %s", api, body)
			}
			return out, nil
		}
		if err == nil {
			fmt.Fprintf(os.Stderr, "Http response code: %s from 'POST %s' (Request Id: %s)\n%s\n", statusName(status), api, reqID, bytes.TrimSpace(body))
			err = fmt.Errorf("Response status code does not indicate success: %d (%s).", status, http.StatusText(status))
		}
		if attempt >= 3 || status == http.StatusNotFound {
			return tenantAuth{}, err
		}
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
	}
}

// statusName spells a status as .NET's HttpStatusCode does (NotFound).
func statusName(status int) string {
	return strings.NewReplacer(" ", "", "-", "").Replace(http.StatusText(status))
}

func remove(c command) int {
	fmt.Print("\n# Runner removal\n\n")
	var rs settings
	var key keyFile
	if readFile(runnerFile, &rs) != nil || readFile(keyFileN, &key) != nil || !exists(credFile) {
		fmt.Println("Cannot connect to server, because config files are missing. Skipping removing runner from the server.")
		deleteLocal()
		return codeSuccess
	}
	if c.flag("local") {
		deleteLocal()
		return codeSuccess
	}
	token := c.arg("token")
	if token == "" {
		return fail(errors.New("Invalid configuration provided for token. Terminating unattended configuration."))
	}
	tenant, err := exchange(rs.GitHubURL, token, "remove")
	if err != nil {
		fmt.Fprintln(os.Stderr, "Failed: Removing runner from the server")
		return fail(err)
	}
	status, msg, err := call(context.Background(), http.MethodDelete, fmt.Sprintf("%srunners/%d", tenant.URL, rs.AgentID), "Bearer "+tenant.Token, "", nil, nil)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "Failed: Removing runner from the server")
		return fail(err)
	case status == http.StatusNotFound:
		fmt.Println("Does not exist. Skipping Removing runner from the server")
	case status >= 300:
		fmt.Fprintln(os.Stderr, "Failed: Removing runner from the server")
		return fail(fmt.Errorf("%s (HTTP %d)", msg, status))
	}
	fmt.Println()
	success("Runner removed successfully")
	deleteLocal()
	return codeSuccess
}

func deleteLocal() {
	if exists(credFile) {
		os.Remove(credFile)
		os.Remove(migratedCredFile)
		os.Remove(keyFileN)
		success("Removed .credentials")
	} else {
		fmt.Println("Does not exist. Skipping Removing .credentials")
	}
	if exists(runnerFile) {
		os.Remove(runnerFile)
		os.Remove(migratedRunnerFile)
		success("Removed .runner")
	} else {
		fmt.Println("Does not exist. Skipping Removing .runner")
	}
}

// --- run.sh ----------------------------------------------------------------

// runScript is run.sh and run-helper.sh: the listener's return code is
// reported, and run.sh exits 0; after an update (listener exit 3 or 4)
// run-helper.sh exits 2 and run.sh launches the listener again
// (relaunch).
func runScript(c command) int {
	if jit := c.arg("jitconfig"); jit != "" {
		if err := applyJIT(jit); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 0
		}
	}
	code := listen()
	switch code {
	case codeSuccess:
		fmt.Println("Runner listener exit with 0 return code, stop the service, no retry needed.")
	case codeVersionDeprecated:
		// Returned only where the variable asks for it; run-helper.sh
		// then passes 7 on.
		fmt.Printf("Runner listener exit with deprecated version exit code: %d.\n", code)
		fmt.Println("Exiting runner...")
		return codeVersionDeprecated
	case codeUpdating, codeRunOnceUpdating:
		applyUpdate()
		return relaunch(waitUpdate())
	case codeTerminatedError:
		fmt.Println("Runner listener exit with terminated error, stop the service, no retry needed.")
	case codeSessionConflict:
		fmt.Println("Runner listener exit with Session Conflict error, stop the service, no retry needed.")
	default:
		fmt.Printf("Exiting with unknown error code: %d\n", code)
	}
	fmt.Println("Exiting runner...")
	return 0
}

// applyJIT writes the files of a just-in-time configuration into the
// runner's root, as the listener does with --jitconfig: the value is the
// base64 of a JSON object from file name to the base64 of its content.
func applyJIT(value string) error {
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		return fmt.Errorf("An error occurred: the jitconfig is not base64: %v", err)
	}
	var files map[string]string
	if err := json.Unmarshal(raw, &files); err != nil {
		return fmt.Errorf("An error occurred: the jitconfig is not a JSON object: %v", err)
	}
	for name, content := range files {
		data, err := base64.StdEncoding.DecodeString(content)
		if err != nil || strings.ContainsAny(name, "/\\") {
			return fmt.Errorf("An error occurred: the jitconfig entry %q is not valid", name)
		}
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return fmt.Errorf("An error occurred: %v", err)
		}
	}
	return nil
}

type listener struct {
	settings settings
	secret   string
	session  string
	root     string
}

type sessionInfo struct {
	SessionID       string `json:"sessionId"`
	HeartbeatMillis int64  `json:"heartbeatMillis"`
	// The answer to a session another listener holds: how long to wait
	// before asking again, and how long to keep asking.
	RetryMillis int64 `json:"retryMillis"`
	LimitMillis int64 `json:"limitMillis"`
}

const deletedMessage = "Failed to create a session. The runner registration has been deleted from the server, please re-configure. Runner registrations are automatically deleted for runners that have not connected to the service recently."

// goneMessage is what the listener says when its runner disappears while it
// waits for messages (Runner.cs, "Runner registration no longer exists
// while retrieving messages").
const goneMessage = "The runner no longer exists on the server. Cleaning up local configuration."

func stamp() string { return time.Now().UTC().Format("2006-01-02 15:04:05Z") }

// listen is Runner.Listener run; it returns the listener's code.
func listen() int {
	loadEnv()
	l := &listener{}
	var key keyFile
	if readFile(runnerFile, &l.settings) != nil || !exists(credFile) || readFile(keyFileN, &key) != nil {
		fmt.Fprintln(os.Stderr, "An error occurred: Not configured. Run config.(sh/cmd) to configure the runner.")
		return codeTerminatedError
	}
	l.secret = key.Secret
	l.root, _ = os.Getwd()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-signals
		fmt.Println("Exiting...")
		stop()
	}()

	sess, code, ok := l.createSession(ctx)
	if !ok {
		return code
	}
	l.session = sess.SessionID
	// github.com moves every runner to its newer service at its first
	// session; the listener keeps what it was migrated to beside the
	// configured files (the runner's ConfigurationStore, "_migrated").
	if raw, err := os.ReadFile(runnerFile); err == nil {
		os.WriteFile(migratedRunnerFile, raw, 0o644)
	}
	if raw, err := os.ReadFile(credFile); err == nil {
		os.WriteFile(migratedCredFile, raw, 0o600)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		call(dctx, http.MethodDelete, l.url("runners/%d/session"), l.auth(), l.session, nil, nil)
	}()
	success("Connected to GitHub")
	fmt.Printf("\nCurrent runner version: '%s'\n%s: Listening for Jobs\n", version(), stamp())

	// An update under way (selfUpdate): the listener goes on polling and
	// takes no job until it ends, then exits for run.sh to launch the
	// updated one (Runner.cs, RunAsync: Task.WhenAny of the next message
	// and the update task; a job message meanwhile is not deleted,
	// skipMessageDeletion, and the service hands it out again).
	var upd *selfUpdate
	for ctx.Err() == nil {
		if upd != nil && upd.finished() {
			if upd.err == nil {
				fmt.Println("Runner will exit shortly for update, should be back online within 10 seconds.")
				if l.settings.Ephemeral {
					return codeRunOnceUpdating
				}
				return codeUpdating
			}
			fmt.Fprintf(os.Stderr, "%s: An error occurred: runner update failed: %v\n", stamp(), upd.err)
			upd = nil
		}
		var job struct {
			ID     int64  `json:"id"`
			Script string `json:"script"`
			Post   string `json:"post"`
			Repo   string `json:"repo"`
			Label  string `json:"label"`
			// An update message (Runner.cs: RunnerRefreshMessage, as
			// SelfUpdaterV2.cs reads it) instead of a job.
			Type           string `json:"type"`
			TargetVersion  string `json:"targetVersion"`
			DownloadURL    string `json:"downloadUrl"`
			SHA256Checksum string `json:"sha256Checksum"`
			// A refusal's kind (the broker's BrokerError.errorKind).
			ErrorKind string `json:"errorKind"`
		}
		pctx, cancelPoll := context.WithCancel(ctx)
		if upd != nil {
			go func(u *selfUpdate) {
				select {
				case <-u.done:
					cancelPoll() // the update ended: stop waiting for a message
				case <-pctx.Done():
				}
			}(upd)
		}
		status, msg, err := call(pctx, http.MethodPost, l.url("runners/%d/poll")+versionQuery(l.settings.DisableUpdate), l.auth(), l.session, nil, &job)
		cancelPoll()
		switch {
		case ctx.Err() != nil:
		case upd != nil && upd.finished():
			// Whatever the poll got is dropped: a job not acknowledged
			// goes back to the queue.
		case status == http.StatusForbidden:
			if code, goOn := l.forbidden(ctx, job.ErrorKind, msg, &sess); !goOn {
				return code
			}
		case status == http.StatusOK && job.Type == "RunnerRefresh":
			if upd == nil {
				upd = startUpdate(l.workFolder(), job.TargetVersion, job.DownloadURL, job.SHA256Checksum)
			}
		case status == http.StatusOK && job.ID != 0 && upd != nil:
			sleep(ctx, 200*time.Millisecond) // not taken: handed out again at the next poll
		case err != nil || status >= 500:
			sleep(ctx, 500*time.Millisecond)
		case status == http.StatusNotFound:
			// The runner is gone (deleted, or removed by GitHub while
			// idle: fakegithub jit.go). actions/runner since #4551
			// (src/Runner.Listener/Runner.cs, RunAsync: the catch of
			// TaskAgentNotFoundException or RunnerNotFoundException in the
			// message loop) says so on stderr, deletes its local
			// configuration and returns Success; run-helper.sh then says
			// "Runner listener exit with 0 return code". Issue #4726 shows
			// exactly these lines for an idle just-in-time runner.
			fmt.Fprintln(os.Stderr, goneMessage)
			deleteLocal()
			return codeSuccess
		case status == http.StatusUnauthorized:
			fmt.Fprintln(os.Stderr, "Runner registration has been deleted from the server, please re-configure.")
			return codeTerminatedError
		case status == http.StatusOK && job.ID != 0:
			l.take(ctx, sess, job.ID, job.Repo, job.Label, job.Script, job.Post)
			if l.settings.Ephemeral {
				deleteLocal()
				return codeSuccess
			}
		}
	}
	return codeSuccess
}

// workFolder is the runner's work folder (_work under its root by default).
func (l *listener) workFolder() string {
	work := l.settings.WorkFolder
	if work == "" {
		work = "_work"
	}
	if !filepath.IsAbs(work) {
		work = filepath.Join(l.root, work)
	}
	return work
}

func (l *listener) url(format string) string {
	return l.settings.ServerURL + fmt.Sprintf(format, l.settings.AgentID)
}

func (l *listener) auth() string { return "Bearer " + l.secret }

// take runs one job: acknowledges it, runs it while heartbeating, reports
// the result. A stop asked meanwhile cancels it (execute).
func (l *listener) take(ctx context.Context, sess sessionInfo, id int64, repo, label, script, post string) {
	jobURL := fmt.Sprintf("%sjobs/%d/", l.settings.ServerURL, id)
	if status := l.report(jobURL+"start", nil); status >= 300 {
		return // not ours (any more); the server settles it at the next poll
	}
	name := fmt.Sprintf("job %d (%s)", id, label)
	fmt.Printf("%s: Running job: %s\n", stamp(), name)
	// The real listener starts a Worker process for each job, which
	// writes its trace to _diag/Worker_<time>-utc.log in the runner's root
	// (src/Runner.Common/HostTraceListener.cs): the agent reads that a
	// runner ran a job from it.
	if err := os.MkdirAll(filepath.Join(l.root, "_diag"), 0o755); err == nil {
		os.WriteFile(filepath.Join(l.root, "_diag", "Worker_"+time.Now().UTC().Format("20060102-150405")+"-utc.log"),
			[]byte(fmt.Sprintf("[%s INFO Worker] Job message received: %s\n", stamp(), name)), 0o644)
	}

	hbCtx, stopHB := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Duration(max(sess.HeartbeatMillis, 50)) * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-tick.C:
				call(hbCtx, http.MethodPost, l.url("runners/%d/heartbeat"), l.auth(), l.session, nil, nil)
			}
		}
	}()
	code, result, output := l.execute(ctx, repo, script, post)
	stopHB()
	wg.Wait()

	l.report(jobURL+"complete", map[string]any{"exitCode": code, "result": result, "output": output})
	fmt.Printf("%s: Job %s completed with result: %s\n", stamp(), name, map[string]string{"succeeded": "Succeeded", "failed": "Failed", "cancelled": "Canceled"}[result])
}

// report posts a job's start or result, retrying network and server errors
// a few times; it returns the last status (0: no answer).
func (l *listener) report(u string, body any) int {
	status := 0
	for attempt := 1; attempt <= 5; attempt++ {
		var err error
		status, _, err = call(context.Background(), http.MethodPost, u, l.auth(), l.session, body, nil)
		if err == nil && status < 500 {
			return status
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	return status
}

const shutdownMessage = "The runner has received a shutdown signal. This can happen when the runner service is stopped, or a manually started runner is canceled."

// execute runs the script with bash -c in <work>/<repo>/<repo>, then the
// post step, if any.
//
// A stop (SIGINT or SIGTERM to the listener) cancels the job, as the real
// runner's does: the listener shuts down, tells its Worker, which cancels
// the running step (actions/runner src/Runner.Listener/Runner.cs
// CtrlCHandler and Runner_Unloading → HostContext.ShutdownRunner;
// JobDispatcher.cs sends the Worker MessageType.RunnerShutdown; Worker.cs
// cancels the job; JobRunner.cs reports "The runner has received a
// shutdown signal..."), and the job's post steps still run before the
// listener exits. The script runs in a process group of its own, which
// the listener interrupts itself (then kills, after 5 s), so the job's
// fate never depends on who else the stop's signal reached.
func (l *listener) execute(ctx context.Context, repo, script, post string) (int, string, string) {
	work := l.settings.WorkFolder
	if !filepath.IsAbs(work) {
		work = filepath.Join(l.root, work)
	}
	dir := filepath.Join(work, repo, repo)
	temp := filepath.Join(work, "_temp")
	var out limitedBuffer
	for _, d := range []string{dir, temp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 1, "failed", err.Error()
		}
	}
	env := append(os.Environ(),
		"CI=true", "GITHUB_ACTIONS=true", "RUNNER_OS=Linux", "RUNNER_NAME="+l.settings.AgentName,
		"GITHUB_WORKSPACE="+dir, "RUNNER_WORKSPACE="+filepath.Join(work, repo), "RUNNER_TEMP="+temp)
	code, cancelled, err := step(ctx, dir, env, script, &out)
	if err != nil {
		fmt.Fprintln(&out, err)
	}
	if cancelled {
		fmt.Fprintln(&out, "##[error]"+shutdownMessage)
	}
	if post != "" {
		// Post steps run whatever became of the job, and a stop already
		// under way does not cancel them.
		if _, _, err := step(context.Background(), dir, env, post, &out); err != nil {
			fmt.Fprintln(&out, err)
		}
	}
	switch {
	case cancelled:
		return code, "cancelled", out.String()
	case code != 0:
		return code, "failed", out.String()
	}
	return 0, "succeeded", out.String()
}

// step runs one script in its own process group, interrupting it when ctx
// ends; it returns its exit code, whether it was cancelled, and an error
// that is not an exit status.
func step(ctx context.Context, dir string, env []string, script string, out io.Writer) (code int, cancelled bool, err error) {
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second // a background process holding the output open
	if err := cmd.Start(); err != nil {
		return 1, false, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		cancelled = true
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = <-done
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), cancelled, nil
	}
	if err != nil {
		return 1, cancelled, err
	}
	return 0, cancelled, nil
}

// limitedBuffer keeps the first MiB of a job's output.
type limitedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := 1<<20 - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (w *limitedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// --- HTTP ------------------------------------------------------------------

var client = &http.Client{Timeout: 30 * time.Second}

// call sends a JSON request and decodes a JSON answer into out; it returns
// the status and, for an error status, GitHub's message.
func call(ctx context.Context, method, u, auth, session string, body, out any) (int, string, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(raw))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	req.Header.Set("User-Agent", userAgent())
	if session != "" {
		req.Header.Set("X-Runner-Session", session)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode >= 300 {
		var msg struct{ Message string }
		json.Unmarshal(data, &msg)
		if (resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusForbidden) && out != nil {
			json.Unmarshal(data, out) // a session conflict's retry timing, a refusal's kind
		}
		return resp.StatusCode, msg.Message, nil
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, "", err
		}
	}
	return resp.StatusCode, "", nil
}

func callRaw(ctx context.Context, method, u, auth string, body any) (int, []byte, string, error) {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(raw))
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", auth)
	req.Header.Set("User-Agent", userAgent())
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, data, resp.Header.Get("X-GitHub-Request-Id"), nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}
