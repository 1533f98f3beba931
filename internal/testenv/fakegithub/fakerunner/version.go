package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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

// The self-update (actions/runner SelfUpdaterV2.cs, update.sh.template,
// run-helper.sh.template, run.sh), as the fake plays it:
//
//   - the listener, sent an update message, downloads the package the
//     message names into <work>/_update, checks its SHA-256, unpacks it and
//     puts its bin/ beside its own as bin.<target> (DownloadLatestRunner,
//     CopyLatestRunnerToRoot), while it goes on polling (startUpdate);
//   - then it exits RunnerUpdating (3), or RunOnceRunnerUpdating (4) when
//     it was to take one job (a just-in-time runner);
//   - the update script, which the real listener starts before it exits and
//     which waits for it to end, moves bin/ to bin.<version> and bin.<target>
//     to bin/, then touches update.finished (applyUpdate: the fake does it
//     once the listener returned, in the same process);
//   - run-helper.sh waits up to 30 s for update.finished and exits 2
//     (waitUpdate); run.sh then copies run-helper.sh again and runs it with
//     the same arguments, in its own environment, where
//     ACTIONS_RUNNER_INPUT_JITCONFIG still is (the listener cleared only its
//     own): the updated listener starts, a just-in-time one from the same
//     configuration (relaunch).
//
// The update replaces the runner's root it runs in, nothing else: under
// ghrunner's agent that is the copy made for the runner
// (agent/runner/layout.go), whose folders are the runner user's.

// runEnv is the environment run.sh was started with.
var runEnv []string

// pendingUpdate is the version the last update staged as bin.<version>.
var pendingUpdate string

// selfUpdate is an update under way: done is closed when it ended, err
// says how.
type selfUpdate struct {
	done chan struct{}
	err  error
}

func (u *selfUpdate) finished() bool {
	select {
	case <-u.done:
		return true
	default:
		return false
	}
}

// startUpdate starts downloading and staging target beside the running
// bin/ (SelfUpdaterV2.SelfUpdate, up to the update script).
func startUpdate(work, target, url, sum string) *selfUpdate {
	fmt.Printf("%s: Runner update in progress, do not shutdown runner.\n", stamp())
	fmt.Printf("%s: Downloading %s runner\n", stamp(), target)
	u := &selfUpdate{done: make(chan struct{})}
	go func() {
		defer close(u.done)
		u.err = stageUpdate(work, target, url, sum)
		if u.err == nil {
			pendingUpdate = target
		}
	}()
	return u
}

func stageUpdate(work, target, url, sum string) error {
	if !runnerrelease.ValidVersion(target) || url == "" {
		return fmt.Errorf("update message without a valid target (%q) or download URL", target)
	}
	dir := filepath.Join(work, "_update")
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download %s: HTTP %d", url, resp.StatusCode)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if got := sha256.Sum256(raw); !strings.EqualFold(hex.EncodeToString(got[:]), sum) {
		// ValidateRunnerHash
		return fmt.Errorf("runner package %s: hash mismatch, expected %s", url, sum)
	}
	if err := untar(raw, dir); err != nil {
		return err
	}
	root, _ := os.Getwd()
	next := filepath.Join(root, "bin."+target)
	os.RemoveAll(next)
	return os.Rename(filepath.Join(dir, "bin"), next)
}

// applyUpdate is the update script: the staged bin.<target> becomes bin/,
// the running one is kept as bin.<version>, and update.finished says so.
func applyUpdate() {
	if pendingUpdate == "" {
		return
	}
	root, _ := os.Getwd()
	old := filepath.Join(root, "bin."+version())
	os.RemoveAll(old)
	if err := os.Rename(filepath.Join(root, "bin"), old); err != nil {
		fmt.Fprintf(os.Stderr, "update script: %v\n", err)
		return
	}
	if err := os.Rename(filepath.Join(root, "bin."+pendingUpdate), filepath.Join(root, "bin")); err != nil {
		fmt.Fprintf(os.Stderr, "update script: %v\n", err)
		os.Rename(old, filepath.Join(root, "bin"))
		return
	}
	os.WriteFile(filepath.Join(root, "update.finished"), nil, 0o644)
}

// relaunch is run.sh's loop: on run-helper's 2 it says so and runs the
// (updated) listener again with run.sh's arguments and environment; any
// other code is run.sh's exit.
func relaunch(code int) int {
	if code != codeRetryable {
		return code
	}
	fmt.Println("Restarting runner...")
	root, _ := os.Getwd()
	listener := filepath.Join(root, "bin", "Runner.Listener")
	err := syscall.Exec(listener, append([]string{listener}, os.Args[1:]...), runEnv)
	fmt.Fprintf(os.Stderr, "run.sh: launch the listener again: %v\n", err)
	return 1
}

func untar(raw []byte, dir string) error {
	gz, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("runner package entry %q leaves its folder", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(target, nil, os.FileMode(h.Mode)&0o777); err != nil {
				return err
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
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
