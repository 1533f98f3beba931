package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"time"
)

// config.sh: configure (the token exchanged at
// <api>/actions/runner-registration, then the runner registered and its
// files written) and remove.

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
