package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
)

// The runner's version, as the real one carries it: compiled in
// (BuildConstants.RunnerPackage.Version), printed by `Runner.Listener
// --version` (src/Runner.Listener/Runner.cs), sent in every request's
// User-Agent as GitHubActionsRunner-<package>/<version>
// (src/Runner.Common/HostContext.cs) and, with disableUpdate, in the
// listener's message polls (the broker's GET /message carries
// runnerVersion and disableUpdate, actions/runner #3381).

// VersionFile, beside the binary, holds the version of a fake runner
// packed as a release (fakegithub.RunnerTarball); a binary without it is
// the release this provider pins by default.
const VersionFile = "fakerunner.version"

func version() string {
	if exe, err := os.Executable(); err == nil {
		if raw, err := os.ReadFile(filepath.Join(filepath.Dir(exe), VersionFile)); err == nil {
			if v := strings.TrimSpace(string(raw)); v != "" {
				return v
			}
		}
	}
	return runnerrelease.Default
}

func userAgent() string {
	return "GitHubActionsRunner-linux-" + strings.ToLower(arch()) + "/" + version()
}

// versionQuery is what the listener's session and polls say of it.
func versionQuery(disableUpdate bool) string {
	return "?" + url.Values{"runnerVersion": {version()}, "disableUpdate": {strconv.FormatBool(disableUpdate)}}.Encode()
}

// The listener's return codes for an update and a deprecated version
// (src/Runner.Common/Constants.cs).
const (
	codeRetryable         = 2
	codeUpdating          = 3
	codeRunOnceUpdating   = 4
	codeVersionDeprecated = 7
)

// deprecatedCode is what the listener returns when GitHub refuses its
// version: TerminatedError, or RunnerVersionDeprecated where
// ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE is set
// (src/Runner.Listener/Program.cs, GetRunnerVersionDeprecatedExitCode).
func deprecatedCode() int {
	if v := strings.ToLower(os.Getenv("ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE")); v == "1" || v == "true" {
		return codeVersionDeprecated
	}
	return codeTerminatedError
}

// update is what the listener does with an update message (SelfUpdater.cs):
// the real one downloads the target release into its root, swaps it in
// and exits RunnerUpdating (3), or RunOnceRunnerUpdating (4) when it was to
// take one job. The fake says so and exits the same way, without replacing
// itself: what it stands in for is the job that waited on the update.
func update(target string, runOnce bool) int {
	fmt.Printf("%s: Runner update in progress, do not shutdown runner.\n", stamp())
	fmt.Printf("%s: Downloading %s runner\n", stamp(), target)
	if runOnce {
		return codeRunOnceUpdating
	}
	return codeUpdating
}

// waitUpdate is run-helper.sh's wait after an update exit: up to 30 s for
// update.finished (GHRUNNER_FAKE_UPDATE_WAIT_SECONDS shortens it in tests),
// then exit 2, which run.sh takes as "launch the listener again".
func waitUpdate() int {
	fmt.Println("Runner listener exit because of updating, re-launch runner after successful update")
	wait := 30
	if s, err := strconv.Atoi(os.Getenv("GHRUNNER_FAKE_UPDATE_WAIT_SECONDS")); err == nil && s >= 0 {
		wait = s
	}
	for i := 0; i <= wait; i++ {
		if _, err := os.Stat("update.finished"); err == nil {
			fmt.Println("Update finished successfully.")
			os.Remove("update.finished")
			break
		}
		if i < wait {
			time.Sleep(time.Second)
		}
	}
	return codeRetryable
}
