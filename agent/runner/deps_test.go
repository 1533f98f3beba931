package runner

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The distributions users boot, read from their real os-release files
// (testdata/os-release/README.md says where each comes from), get the
// packages their version names: libicu70/libssl3 on Ubuntu 22.04, the
// 64-bit time_t renames (libicu74, libssl3t64) on 24.04, the Fedora names
// with dnf on Amazon Linux 2023, which actions/runner's own script cannot
// place. The Debian 12 names were checked with apt-cache on a Debian 12
// machine.
func TestEachImageGetsThePackagesOfItsRelease(t *testing.T) {
	for _, c := range []struct {
		file      string
		distro    Distro
		family    Family
		required  [][]string
		lttng     []string
		candidate bool
	}{
		{"ubuntu-22.04", Distro{"ubuntu", []string{"debian"}, "22.04"}, Debian,
			[][]string{{"libicu70"}, {"libssl3"}, {"libkrb5-3"}, {"zlib1g"}}, []string{"liblttng-ust1"}, false},
		{"ubuntu-24.04", Distro{"ubuntu", []string{"debian"}, "24.04"}, Debian,
			[][]string{{"libicu74"}, {"libssl3t64"}, {"libkrb5-3"}, {"zlib1g"}}, []string{"liblttng-ust1t64"}, false},
		{"amzn-2023", Distro{"amzn", []string{"fedora"}, "2023"}, Fedora,
			[][]string{{"libicu"}, {"openssl-libs"}, {"krb5-libs"}, {"zlib"}}, []string{"lttng-ust"}, false},
		{"debian-12", Distro{"debian", nil, "12"}, Debian,
			[][]string{{"libicu72"}, {"libssl3"}, {"libkrb5-3"}, {"zlib1g"}}, []string{"liblttng-ust1"}, false},
	} {
		t.Run(c.file, func(t *testing.T) {
			d, err := ReadOSRelease(filepath.Join("testdata", "os-release", c.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d, c.distro) {
				t.Fatalf("read %+v, want %+v", d, c.distro)
			}
			plan, err := PlanFor(d)
			if err != nil {
				t.Fatal(err)
			}
			var required [][]string
			var optional []string
			for _, dep := range plan.Deps {
				if dep.Optional {
					optional = append(optional, dep.Packages...)
				} else {
					required = append(required, dep.Packages)
				}
			}
			if plan.Family != c.family || !reflect.DeepEqual(required, c.required) || !reflect.DeepEqual(optional, c.lttng) {
				t.Fatalf("plan %s %v optional %v, want %s %v optional %v", plan.Family, required, optional, c.family, c.required, c.lttng)
			}
		})
	}
}

// A release the table does not know is placed by ID_LIKE, and its
// packages picked by the package index among the candidates; a system
// neither Debian- nor Fedora-like is refused with its name.
func TestAnUnlistedReleaseIsPlacedByItsFamilyAndAnUnknownOneRefused(t *testing.T) {
	mint := Distro{ID: "linuxmint", IDLike: []string{"ubuntu", "debian"}, VersionID: "22"}
	plan, err := PlanFor(mint)
	if err != nil || plan.Family != Debian || len(plan.Deps[0].Packages) < 5 || plan.Deps[0].Packages[0] != icuCandidates[0] {
		t.Fatalf("Linux Mint 22: %+v %v, want the Debian family with every ICU candidate", plan, err)
	}
	rocky := Distro{ID: "rocky", IDLike: []string{"rhel", "centos", "fedora"}, VersionID: "9.4"}
	if plan, err := PlanFor(rocky); err != nil || plan.Family != Fedora {
		t.Fatalf("Rocky 9: %+v %v", plan, err)
	}
	_, err = PlanFor(Distro{ID: "alpine", VersionID: "3.20.0"})
	if err == nil || !strings.Contains(err.Error(), "alpine 3.20.0") {
		t.Fatalf("Alpine: %v, want a refusal naming it", err)
	}
}

// fakeTools puts stand-ins for dpkg-query, apt-cache, apt-get, rpm and dnf
// first on PATH: each logs its command line to the returned file;
// dpkg-query and rpm report the packages of installed installed, apt-cache
// knows the packages of known; apt-get and dnf run failWith when set.
func fakeTools(t *testing.T, installed, known []string, failWith string) string {
	bin := t.TempDir()
	log := filepath.Join(bin, "calls")
	in := func(list []string) string { return " " + strings.Join(list, " ") + " " }
	scripts := map[string]string{
		"dpkg-query": `p="${@: -1}"; case "` + in(installed) + `" in *" $p "*) printf 'install ok installed';; *) exit 1;; esac`,
		"rpm":        `p="${@: -1}"; case "` + in(installed) + `" in *" $p "*) exit 0;; *) exit 1;; esac`,
		"apt-cache":  `p="${@: -1}"; case "` + in(known) + `" in *" $p "*) echo "Package: $p";; *) echo "E: No packages found" >&2; exit 100;; esac`,
		"apt-get":    failWith,
		"dnf":        failWith,
	}
	for name, body := range scripts {
		script := "#!/bin/bash\necho \"" + name + " $*\" >> " + log + "\n" + body + "\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return log
}

func calls(t *testing.T, log string) []string {
	raw, _ := os.ReadFile(log)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if l != "" && !strings.HasPrefix(l, "dpkg-query") && !strings.HasPrefix(l, "rpm") {
			out = append(out, l)
		}
	}
	return out
}

func nolog(string, ...any) {}

// What is installed is not asked for; apt-get waits for a held dpkg lock
// (unattended-upgrades at first boot) instead of failing at once, and
// apt-get update is tried again while the lists lock is held; a system
// with everything runs no package manager at all. Shown to fail without
// the retry ("with the lists lock held once: runner dependencies on ubuntu
// 24.04 ...: exit status 100: E: Could not get lock ...").
func TestOnlyMissingPackagesAreInstalledAndAptWaitsForItsLock(t *testing.T) {
	ubuntu := filepath.Join("testdata", "os-release", "ubuntu-24.04")
	log := fakeTools(t, []string{"libssl3t64", "libkrb5-3", "zlib1g"}, nil, "")
	if err := InstallDependencies(context.Background(), ubuntu, nolog); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"apt-get -o DPkg::Lock::Timeout=300 -q update",
		"apt-get -o DPkg::Lock::Timeout=300 -q -y --no-install-recommends install libicu74",
		"apt-get -o DPkg::Lock::Timeout=300 -q -y --no-install-recommends install liblttng-ust1t64",
	}
	if got := calls(t, log); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// apt-daily holding the lists lock: apt-get update is tried again.
	lockRetry = 10 * time.Millisecond
	t.Cleanup(func() { lockRetry = 5 * time.Second })
	held := filepath.Join(t.TempDir(), "held")
	os.WriteFile(held, nil, 0o644)
	log = fakeTools(t, nil, nil, `case "$*" in *update*) if [ -e `+held+` ]; then rm `+held+`; echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 1234 (apt-get)" >&2; exit 100; fi;; esac`)
	if err := InstallDependencies(context.Background(), ubuntu, nolog); err != nil {
		t.Fatalf("with the lists lock held once: %v", err)
	}
	if got := calls(t, log); len(got) < 2 || !strings.HasSuffix(got[0], "update") || !strings.HasSuffix(got[1], "update") {
		t.Fatalf("calls with the lists lock held once: %v, want update tried again", got)
	}

	log = fakeTools(t, []string{"libicu", "openssl-libs", "krb5-libs", "zlib", "lttng-ust"}, nil, "exit 1")
	if err := InstallDependencies(context.Background(), filepath.Join("testdata", "os-release", "amzn-2023"), nolog); err != nil {
		t.Fatal(err)
	}
	if got := calls(t, log); len(got) != 0 {
		t.Fatalf("with everything installed: %v, want no package manager", got)
	}
}

// On an unlisted Debian-family release the index picks the newest ICU it
// has; a failing install of a required package is an error with its
// output, an optional one (LTTng) is not.
func TestTheIndexPicksTheCandidateAndAFailedInstallSaysWhy(t *testing.T) {
	dir := t.TempDir()
	mint := filepath.Join(dir, "os-release")
	os.WriteFile(mint, []byte("NAME=\"Linux Mint\"\nID=linuxmint\nID_LIKE=\"ubuntu debian\"\nVERSION_ID=\"22\"\n"), 0o644)
	log := fakeTools(t, []string{"libssl3t64", "libkrb5-3", "zlib1g"}, []string{"libicu74", "liblttng-ust1t64"},
		`case "$*" in *liblttng*) exit 100;; esac`)
	if err := InstallDependencies(context.Background(), mint, nolog); err != nil {
		t.Fatalf("a failed optional package failed the install: %v", err)
	}
	if got := strings.Join(calls(t, log), "\n"); !strings.Contains(got, "install libicu74\n") {
		t.Fatalf("calls:\n%s\nwant libicu74 installed", got)
	}

	fakeTools(t, nil, nil, `echo "E: Unable to locate package libicu74" >&2; exit 100`)
	err := InstallDependencies(context.Background(), filepath.Join("testdata", "os-release", "ubuntu-24.04"), nolog)
	if err == nil || !strings.Contains(err.Error(), "Unable to locate package libicu74") || !strings.Contains(err.Error(), "ubuntu 24.04") {
		t.Fatalf("err %v, want the distribution and apt-get's output", err)
	}
}
