package runner

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Install makes sure dir holds the runner software. When config.sh is there
// already (preinstalled in the AMI) nothing happens; otherwise the tarball at
// url is downloaded, checked against sha256Hex and unpacked into dir. The
// files are the agent's (Runner.Seal keeps them so): jobs run from copies.
// The libraries the runner needs are InstallDependencies' business.
func Install(ctx context.Context, dir, url, sha256Hex string) error {
	if Installed(dir) {
		return nil
	}
	if url == "" {
		return fmt.Errorf("runnerDir: %s has no config.sh and no runnerTarballUrl is set", dir)
	}
	tmp, err := os.CreateTemp("", "runner-*.tar.gz")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	var sum string
	for attempt := 1; ; attempt++ {
		sum, err = download(ctx, url, tmp)
		if err == nil || attempt == 5 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 2 * time.Second):
		}
	}
	if err != nil {
		return fmt.Errorf("download runner from %s: %w", url, err)
	}
	if sum != strings.ToLower(sha256Hex) {
		return fmt.Errorf("runner tarball checksum mismatch: want %s, got %s (refusing to install)", sha256Hex, sum)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if err := unpackAtomically(tmp, dir); err != nil {
		return fmt.Errorf("unpack runner: %w", err)
	}
	return nil
}

// Installed reports whether dir holds a finished install (config.sh, which
// an unpack moves in last).
func Installed(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "config.sh"))
	return err == nil
}

// unpackAtomically unpacks into a directory beside dir and then moves the
// entries in, config.sh last: Install takes config.sh for a finished
// install, so an agent killed midway (a crash, a reboot, a full disk)
// downloads again on its next start instead of running half a runner.
func unpackAtomically(r io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	staging, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dir)), ".runner-unpack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(staging)
	if err := unpack(r, staging); err != nil {
		return err
	}
	entries, err := os.ReadDir(staging)
	if err != nil {
		return err
	}
	move := func(name string) error {
		dst := filepath.Join(dir, name)
		if err := os.RemoveAll(dst); err != nil { // what an interrupted install left
			return err
		}
		return os.Rename(filepath.Join(staging, name), dst)
	}
	hasConfig := false
	for _, e := range entries {
		if e.Name() == "config.sh" {
			hasConfig = true
		} else if err := move(e.Name()); err != nil {
			return err
		}
	}
	if !hasConfig {
		return nil
	}
	return move("config.sh")
}

// stallLimit ends a download attempt that has received nothing for that
// long (the response's headers, or more of its body): a connection that
// stalls would otherwise hold the instance's boot for good. Install then
// retries.
var stallLimit = 60 * time.Second

func download(ctx context.Context, url string, to *os.File) (string, error) {
	if err := to.Truncate(0); err != nil {
		return "", err
	}
	if _, err := to.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stalled := fmt.Errorf("stalled: nothing received for %s", stallLimit)
	watchdog := time.AfterFunc(stallLimit, func() { cancel(stalled) })
	defer watchdog.Stop()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", orCause(actx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %s", resp.Status)
	}
	h := sha256.New()
	body := readFunc(func(p []byte) (int, error) {
		n, err := resp.Body.Read(p)
		if n > 0 {
			watchdog.Reset(stallLimit)
		}
		return n, err
	})
	if _, err := io.Copy(io.MultiWriter(to, h), body); err != nil {
		return "", orCause(actx, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

// orCause names why ctx ended (the stall watchdog) when err came of it.
func orCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// unpack extracts a .tar.gz into dir, refusing entries that would land
// outside it.
func unpack(r io.Reader, dir string) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	root := filepath.Clean(dir) + string(os.PathSeparator)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(target+string(os.PathSeparator), root) {
			return fmt.Errorf("entry %q escapes the runner directory", h.Name)
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
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			f.Close()
			if err != nil {
				return err
			}
		case tar.TypeSymlink:
			resolved := filepath.Join(filepath.Dir(target), h.Linkname)
			if filepath.IsAbs(h.Linkname) || !strings.HasPrefix(resolved+string(os.PathSeparator), root) {
				return fmt.Errorf("symlink %q → %q leaves the runner directory", h.Name, h.Linkname)
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return err
			}
		}
	}
}
