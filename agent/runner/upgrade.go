package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Bringing the sealed install to another release, between assignments.
//
// The real runner updates itself when GitHub sends an update message to a
// listener older than the server's release (SelfUpdater.cs: UpdateNeeded,
// DownloadLatestRunner; the listener then exits 3, or 4 for a run-once
// runner, and run.sh waits for update.finished, run-helper.sh.template).
// ghrunner never lets that happen on a job's clock: a token pool's runner is
// configured with --disableupdate, and a just-in-time runner, whose
// configuration cannot carry that flag, is kept current so GitHub has no
// update to send. The agent instead stages the control plane's target beside
// the install while the instance is idle (download, checksum, unpack, seal)
// and swaps it in, one rename, only when no runner is configured; a runner
// about to start from an install older than the target waits for that
// instead (agent/lifecycle/upgrade.go): a download either way, but one the
// control plane's checksum vouches for, and no listener restart.

// Version asks the install which runner version it is: bin/Runner.Listener
// --version prints it (src/Runner.Listener/Runner.cs, command.Version). ""
// when it cannot tell.
func Version(ctx context.Context, install string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(install, "bin", "Runner.Listener"), "--version")
	cmd.Dir = install
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "RUNNER_ALLOW_RUNASROOT=1"}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

// StagedDir is where Stage unpacks a release for install.
func StagedDir(install string) string { return filepath.Clean(install) + ".next" }

// Stage downloads the tarball at url, checks it against sha256Hex and
// unpacks it, sealed, into StagedDir(install), which it first empties. The
// live install is not touched.
func (r *Runner) Stage(ctx context.Context, url, sha256Hex string) (string, error) {
	staged := StagedDir(r.Install)
	if err := os.RemoveAll(staged); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(staged), ".runner-download-")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	sum, err := download(ctx, url, tmp)
	if err != nil {
		return "", fmt.Errorf("download runner from %s: %w", url, err)
	}
	if sum != strings.ToLower(sha256Hex) {
		return "", fmt.Errorf("runner tarball %s: checksum mismatch: want %s, got %s (not installed)", url, sha256Hex, sum)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if err := os.MkdirAll(staged, 0o755); err != nil {
		return "", err
	}
	if err := unpack(tmp, staged); err != nil {
		os.RemoveAll(staged)
		return "", fmt.Errorf("unpack runner: %w", err)
	}
	if !Installed(staged) {
		os.RemoveAll(staged)
		return "", fmt.Errorf("runner tarball %s holds no config.sh", url)
	}
	if err := (&Runner{Install: staged}).Seal(); err != nil {
		os.RemoveAll(staged)
		return "", err
	}
	return staged, nil
}

// Swap makes staged the install: one exchange of the two directories
// (renameat2 RENAME_EXCHANGE), so there is never a moment without a whole
// install; where the file system cannot exchange, two renames, which
// RecoverSwap completes after a crash between them. The previous install is
// removed. The caller makes sure no runner runs from a copy being made.
func (r *Runner) Swap(staged string) error {
	old := filepath.Clean(r.Install) + ".old"
	os.RemoveAll(old)
	err := unix.Renameat2(unix.AT_FDCWD, staged, unix.AT_FDCWD, r.Install, unix.RENAME_EXCHANGE)
	if err == nil {
		return os.RemoveAll(staged) // now the previous install
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EXDEV) {
		return fmt.Errorf("swap in the runner release: %w", err)
	}
	if err := os.Rename(r.Install, old); err != nil {
		return err
	}
	if err := os.Rename(staged, r.Install); err != nil {
		return errors.Join(err, os.Rename(old, r.Install))
	}
	return os.RemoveAll(old)
}

// RecoverSwap puts back the previous install when a two-rename Swap was
// cut short between its renames (no install, the previous one beside it).
func (r *Runner) RecoverSwap() {
	old := filepath.Clean(r.Install) + ".old"
	if !Installed(r.Install) && Installed(old) {
		os.RemoveAll(r.Install)
		os.Rename(old, r.Install)
	}
}
