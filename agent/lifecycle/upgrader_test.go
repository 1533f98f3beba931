package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
)

var (
	v330 = runnerrelease.Target{Version: "2.330.0", URL: "http://releases.invalid/2.330.0.tar.gz", SHA256: strings.Repeat("a", 64)}
	v331 = runnerrelease.Target{Version: "2.331.0", URL: "http://releases.invalid/2.331.0.tar.gz", SHA256: strings.Repeat("b", 64)}
)

// stagings is the runner's Stage and Swap as the upgrade machine sees
// them: Stage answers err; every call is counted.
type stagings struct {
	err    error
	staged []string // the URLs asked for
	swaps  int
}

func (s *stagings) Stage(_ context.Context, url, _ string) (string, error) {
	s.staged = append(s.staged, url)
	return "", s.err
}
func (s *stagings) Swap(string) error { s.swaps++; return nil }

func newUpgrader(r stager, installed string) *upgrader {
	return &upgrader{runner: r, install: "/nonexistent/runner", log: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)), installed: installed}
}

func TestAnIdlePassStagesATargetOnlyWhenNothingElseStandsForIt(t *testing.T) {
	ending := make(chan struct{})
	ended := make(chan struct{})
	close(ended)
	for _, c := range []struct {
		name string
		u    *upgrader
		want idleAction
	}{
		{"installed already", &upgrader{installed: v331.Version}, idleNothing},
		{"under way", &upgrader{installed: v330.Version, staging: &v331}, idleNothing},
		{"failed before", &upgrader{installed: v330.Version, failed: map[runnerrelease.Target]string{v331: "checksum"}}, idleNothing},
		{"a cancelled staging is still ending", &upgrader{installed: v330.Version, done: ending}, idleWait},
		{"the last staging ended", &upgrader{installed: v330.Version, done: ended}, idleStartStep},
		{"another target under way", &upgrader{installed: v330.Version, staging: &v330, done: ending}, idleWait},
		{"nothing yet", &upgrader{installed: v330.Version}, idleStartStep},
	} {
		if got := c.u.idleStep(v331); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

func TestTheInstalledVersionIsReportedUntilTheRecordAndTheLastReportHoldIt(t *testing.T) {
	for _, c := range []struct {
		installed, reported, recorded, want string
	}{
		{"", "", "2.330.0", ""},                      // unknown: nothing to say
		{"2.331.0", "", "2.331.0", "2.331.0"},        // never reported by this agent
		{"2.331.0", "2.331.0", "2.330.0", "2.331.0"}, // the record says another
		{"2.331.0", "2.331.0", "2.331.0", ""},
	} {
		u := upgrader{installed: c.installed, reported: c.reported}
		if got := u.toReport(c.recorded); got != c.want {
			t.Errorf("installed %q, reported %q, recorded %q: report %q, want %q", c.installed, c.reported, c.recorded, got, c.want)
		}
	}
}

func TestOnlyAnInstallKnownToBeOlderIsBehindItsTarget(t *testing.T) {
	for installed, want := range map[string]bool{"2.330.0": true, "2.331.0": false, "2.332.0": false, "": false, "garbage": false} {
		if got := newUpgrader(nil, installed).behind(v331); got != want {
			t.Errorf("installed %q behind %s: %v, want %v", installed, v331.Version, got, want)
		}
	}
}

func TestATargetThatCouldNotBeStagedIsNotStagedAgain(t *testing.T) {
	r := &stagings{err: errors.New("checksum differs")}
	u := newUpgrader(r, v330.Version)
	u.bringToTarget(context.Background(), v331)
	u.bringToTarget(context.Background(), v331)
	u.idle(context.Background(), v331)
	u.wait()
	if len(r.staged) != 1 || r.swaps != 0 {
		t.Errorf("staged %v and swapped %d times, want one staging and no swap", r.staged, r.swaps)
	}
}

func TestAStagedReleaseIsSwappedInOnlyForTheTargetItIs(t *testing.T) {
	r := &stagings{}
	u := newUpgrader(r, v330.Version)
	u.staged = &v330
	if u.swapStaged(context.Background(), v331) || r.swaps != 0 {
		t.Fatal("a release staged for another target was swapped in")
	}
	u.bringToTarget(context.Background(), v331)
	if len(r.staged) != 1 || r.staged[0] != v331.URL || r.swaps != 1 {
		t.Errorf("staged %v and swapped %d times, want %s staged and swapped in once", r.staged, r.swaps, v331.URL)
	}
}
