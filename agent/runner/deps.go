package runner

// The runner's dependencies, installed by the agent.
//
// The runner is a .NET program: it needs ICU, OpenSSL, Kerberos and zlib
// from the distribution (LTTng only for tracing, which .NET skips when it is
// missing). Its own bin/installdependencies.sh tells distributions apart by
// /etc/debian_version and /etc/redhat-release, and Amazon Linux 2023 has
// neither (ID_LIKE="fedora", no redhat-release): it exits 1 there ("Can't
// detect current OS type", actions/runner PRs #2523 and #4223). So the
// agent reads /etc/os-release itself (ID, ID_LIKE, VERSION_ID) and asks the
// family's package manager for the packages its version names.
//
// Invariants: what is installed already is not asked for (no package
// manager runs at all when nothing is missing); a package manager's lock
// held by someone else (unattended-upgrades at Ubuntu's first boot) is
// waited out, for a bounded time, instead of failing at once; a
// distribution the agent cannot place is an error that names it.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// Distro is what /etc/os-release (os-release(5)) says of the system.
type Distro struct {
	ID        string
	IDLike    []string
	VersionID string
}

func (d Distro) String() string {
	return fmt.Sprintf("%s %s (ID_LIKE %q)", d.ID, d.VersionID, strings.Join(d.IDLike, " "))
}

// ReadOSRelease parses an os-release file: KEY=value lines, the value
// possibly quoted with shell quoting, comments and blank lines ignored.
func ReadOSRelease(path string) (Distro, error) {
	f, err := os.Open(path)
	if err != nil {
		return Distro{}, err
	}
	defer f.Close()
	var d Distro
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		key, value, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		value = unquote(value)
		switch key {
		case "ID":
			d.ID = strings.ToLower(value)
		case "ID_LIKE":
			d.IDLike = strings.Fields(strings.ToLower(value))
		case "VERSION_ID":
			d.VersionID = value
		}
	}
	if err := sc.Err(); err != nil {
		return Distro{}, err
	}
	if d.ID == "" {
		d.ID = "linux" // os-release(5): the default when ID is not set
	}
	return d, nil
}

// unquote undoes the shell quoting os-release values may carry.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		v = v[1 : len(v)-1]
		if v != "" {
			v = strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\$`, `$`, "\\`", "`").Replace(v)
		}
	}
	return v
}

// Family is a group of distributions sharing a package manager and
// package names.
type Family string

const (
	Debian Family = "debian" // apt-get, dpkg
	Fedora Family = "fedora" // dnf, rpm (RHEL, Amazon Linux, Rocky, Alma)
)

// Family places the distribution by its ID, then by ID_LIKE.
func (d Distro) Family() (Family, bool) {
	for _, id := range append([]string{d.ID}, d.IDLike...) {
		switch id {
		case "debian", "ubuntu":
			return Debian, true
		case "fedora", "rhel", "centos", "amzn":
			return Fedora, true
		}
	}
	return "", false
}

// Dependency is one library the runner needs: the first package of
// Packages that the distribution has. Known versions name one package;
// others list the candidates, newest first, and the package manager's
// index picks.
type Dependency struct {
	Packages []string
	// Optional: its absence does not stop the runner (LTTng: .NET only
	// loads it for tracing).
	Optional bool
}

// Plan is how to install the runner's dependencies on a distribution.
type Plan struct {
	Family Family
	Deps   []Dependency
}

// The libraries that change names with the release. A Debian-family
// version not listed here gets every candidate, and apt-get's index picks.
var debianVersions = map[string]struct{ icu, ssl, lttng string }{
	"ubuntu 20.04": {"libicu66", "libssl1.1", "liblttng-ust0"},
	"ubuntu 22.04": {"libicu70", "libssl3", "liblttng-ust1"},
	"ubuntu 24.04": {"libicu74", "libssl3t64", "liblttng-ust1t64"},
	"debian 11":    {"libicu67", "libssl1.1", "liblttng-ust0"},
	"debian 12":    {"libicu72", "libssl3", "liblttng-ust1"},
	"debian 13":    {"libicu76", "libssl3t64", "liblttng-ust1t64"},
}

var (
	icuCandidates   = []string{"libicu78", "libicu77", "libicu76", "libicu75", "libicu74", "libicu73", "libicu72", "libicu71", "libicu70", "libicu69", "libicu68", "libicu67", "libicu66"}
	sslCandidates   = []string{"libssl3t64", "libssl3", "libssl1.1"}
	lttngCandidates = []string{"liblttng-ust1t64", "liblttng-ust1", "liblttng-ust0"}
)

// PlanFor returns the packages the runner needs on d, or an error naming d
// when the agent cannot place it.
func PlanFor(d Distro) (Plan, error) {
	family, ok := d.Family()
	if !ok {
		return Plan{}, fmt.Errorf("cannot install the runner's dependencies on %s: neither Debian- nor Fedora-like; use an image with them installed and the runner preinstalled in runnerDir", d)
	}
	if family == Fedora {
		// Stable names across Fedora, RHEL 8/9 and Amazon Linux 2023.
		return Plan{Family: Fedora, Deps: []Dependency{
			{Packages: []string{"libicu"}}, {Packages: []string{"openssl-libs"}}, {Packages: []string{"krb5-libs"}},
			{Packages: []string{"zlib"}}, {Packages: []string{"lttng-ust"}, Optional: true},
		}}, nil
	}
	icu, ssl, lttng := icuCandidates, sslCandidates, lttngCandidates
	if v, ok := debianVersions[d.ID+" "+d.VersionID]; ok {
		icu, ssl, lttng = []string{v.icu}, []string{v.ssl}, []string{v.lttng}
	}
	return Plan{Family: Debian, Deps: []Dependency{
		{Packages: icu}, {Packages: ssl}, {Packages: []string{"libkrb5-3"}}, {Packages: []string{"zlib1g"}},
		{Packages: lttng, Optional: true},
	}}, nil
}

// lockWait bounds the wait for another package manager's lock, tried
// again every lockRetry where the tool does not wait by itself.
const lockWait = 5 * time.Minute

var lockRetry = 5 * time.Second

// InstallDependencies installs what the runner needs on the distribution
// osRelease describes, skipping what is installed already. Progress goes
// to logf. An empty osRelease is /etc/os-release.
func InstallDependencies(ctx context.Context, osRelease string, logf func(string, ...any)) error {
	if osRelease == "" {
		osRelease = "/etc/os-release"
	}
	d, err := ReadOSRelease(osRelease)
	if err != nil {
		return fmt.Errorf("runner dependencies: cannot tell the distribution: %w", err)
	}
	plan, err := PlanFor(d)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	pm := managers[plan.Family]
	var missing []Dependency
	for _, dep := range plan.Deps {
		if !slices.ContainsFunc(dep.Packages, func(p string) bool { return pm.installed(ctx, p) }) {
			missing = append(missing, dep)
		}
	}
	if len(missing) == 0 {
		logf("runner dependencies already installed", "distro", d.String())
		return nil
	}
	if pm.refresh != nil {
		if out, err := pm.refresh(ctx); err != nil {
			return fmt.Errorf("runner dependencies on %s: %w: %s", d, err, tail(out))
		}
	}
	var required, optional []string
	for _, dep := range missing {
		name := dep.Packages[0]
		if len(dep.Packages) > 1 {
			if i := slices.IndexFunc(dep.Packages, func(p string) bool { return pm.available(ctx, p) }); i >= 0 {
				name = dep.Packages[i]
			}
		}
		if dep.Optional {
			optional = append(optional, name)
		} else {
			required = append(required, name)
		}
	}
	logf("installing the runner's dependencies", "distro", d.String(), "packages", strings.Join(required, " "), "optional", strings.Join(optional, " "))
	if len(required) > 0 {
		if out, err := pm.install(ctx, required); err != nil {
			return fmt.Errorf("runner dependencies on %s (%s): %w: %s", d, strings.Join(required, " "), err, tail(out))
		}
	}
	if len(optional) > 0 {
		if out, err := pm.install(ctx, optional); err != nil {
			logf("optional runner dependencies not installed", "packages", strings.Join(optional, " "), "err", err.Error(), "output", tail(out))
		}
	}
	return nil
}

// manager is one family's package manager.
type manager struct {
	installed func(ctx context.Context, pkg string) bool
	available func(ctx context.Context, pkg string) bool
	refresh   func(ctx context.Context) ([]byte, error)
	install   func(ctx context.Context, pkgs []string) ([]byte, error)
}

var managers = map[Family]manager{
	Debian: {
		installed: func(ctx context.Context, pkg string) bool {
			out, err := command(ctx, "dpkg-query", "-W", "-f=${Status}", pkg).Output()
			return err == nil && strings.HasSuffix(strings.TrimSpace(string(out)), "install ok installed")
		},
		available: func(ctx context.Context, pkg string) bool {
			out, err := command(ctx, "apt-cache", "show", "--no-all-versions", pkg).Output()
			return err == nil && len(out) > 0
		},
		// DPkg::Lock::Timeout makes apt-get wait for dpkg's lock, which
		// unattended-upgrades holds at an Ubuntu first boot, instead of
		// failing at once (apt 1.9.11+); the lists lock apt-get update
		// takes (apt-daily holds it then) is waited out here.
		refresh: func(ctx context.Context) ([]byte, error) {
			deadline := time.Now().Add(lockWait)
			for {
				out, err := command(ctx, "apt-get", "-o", aptLockWait(), "-q", "update").CombinedOutput()
				if err == nil || !strings.Contains(string(out), "Could not get lock") || time.Now().After(deadline) {
					return out, err
				}
				select {
				case <-ctx.Done():
					return out, err
				case <-time.After(lockRetry):
				}
			}
		},
		install: func(ctx context.Context, pkgs []string) ([]byte, error) {
			args := append([]string{"-o", aptLockWait(), "-q", "-y", "--no-install-recommends", "install"}, pkgs...)
			return command(ctx, "apt-get", args...).CombinedOutput()
		},
	},
	Fedora: {
		installed: func(ctx context.Context, pkg string) bool {
			return command(ctx, "rpm", "-q", "--whatprovides", pkg).Run() == nil
		},
		available: func(context.Context, string) bool { return true },
		// dnf waits for another dnf's lock by itself.
		install: func(ctx context.Context, pkgs []string) ([]byte, error) {
			return command(ctx, "dnf", append([]string{"install", "-y", "-q"}, pkgs...)...).CombinedOutput()
		},
	},
}

func aptLockWait() string {
	return fmt.Sprintf("DPkg::Lock::Timeout=%d", int(lockWait.Seconds()))
}

// command runs a package tool non-interactively (debconf asks nothing).
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.WaitDelay = 5 * time.Second
	return cmd
}
