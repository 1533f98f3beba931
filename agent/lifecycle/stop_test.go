package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// idleStore is the record of an idle instance whose runner target the
// agent does not have: it stages that release.
type idleStore struct{ rec state.Instance }

func (s *idleStore) Get(context.Context, state.Key) (*state.Instance, error) {
	c := s.rec
	return &c, nil
}
func (s *idleStore) Heartbeat(context.Context, state.Key) error { return nil }
func (s *idleStore) PutSignal(context.Context, state.Key, string, string, string) error {
	return nil
}
func (s *idleStore) SetRunner(context.Context, state.Key, string, int64, string) error { return nil }
func (s *idleStore) SetRunnerAndSignal(context.Context, state.Key, string, int64, string, string, string) error {
	return nil
}
func (s *idleStore) ExtendLease(context.Context, state.Key, string, int64, int64) (*state.Instance, error) {
	return nil, errors.New("not running")
}
func (s *idleStore) SetRunnerVersion(context.Context, state.Key, string) error { return nil }

// slowDownload answers the staging's download only when its request is
// cancelled, and then a while later, as a download or an unpack slow to
// unwind would.
type slowDownload struct {
	asked    chan struct{}
	returned atomic.Bool
}

func (d *slowDownload) RoundTrip(r *http.Request) (*http.Response, error) {
	close(d.asked)
	<-r.Context().Done()
	time.Sleep(300 * time.Millisecond)
	d.returned.Store(true)
	return nil, r.Context().Err()
}

// Run must not return while its staging of a runner release still runs:
// the agent would be stopped (or started again, staging alongside) with a
// goroutine still writing the runner's folders.
//
// Without the wait (Run returned once its loops had), the test failed
// (tried once): "Run returned before its staging goroutine did".
func TestRunReturnsOnlyOnceItsStagingOfARunnerReleaseHasEnded(t *testing.T) {
	dl := &slowDownload{asked: make(chan struct{})}
	saved := http.DefaultClient.Transport
	http.DefaultClient.Transport = dl
	t.Cleanup(func() { http.DefaultClient.Transport = saved })

	dir := t.TempDir()
	c := config.Defaults()
	c.StateDir, c.RunnerDir = filepath.Join(dir, "state"), filepath.Join(dir, "runner")
	c.IdlePoll = config.Duration{Duration: 50 * time.Millisecond}
	c.HeartbeatInterval = config.Duration{Duration: 50 * time.Millisecond}
	if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The pre-runner step is over (and failed: the instance never offers
	// itself clean), so the idle pass goes straight to the upgrade.
	if err := os.WriteFile(filepath.Join(c.StateDir, "prerunner.json"), []byte(`{"done":true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	target := runnerrelease.Target{Version: "2.999.0", URL: "http://releases.invalid/runner.tar.gz", SHA256: strings.Repeat("0", 64)}
	a := &Agent{Config: c, InstanceID: "i-0stage", Store: &idleStore{rec: state.Instance{State: state.Idle, RunnerTarget: &target}},
		Runner: &runner.Runner{Install: c.RunnerDir}, Log: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))}

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx) }()
	select {
	case <-dl.asked:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never staged the record's runner target")
	}
	cancel()
	select {
	case <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
	}
	if !dl.returned.Load() {
		t.Error("Run returned before its staging goroutine did")
	}
}

// saveFile must say why a state file could not be written, and must never
// replace a good file with what it could not encode.
//
// Before the fix (the encoding error dropped, the write error logged
// without its cause) the test failed (tried once): the lease file was
// left empty, nothing was logged of it, and the write failure's line had
// no err.
func TestASaveThatFailsKeepsTheFileAndSaysWhy(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	a := &Agent{Config: config.Config{StateDir: dir}, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	a.saveFile("lease.json", map[string]int{"threshold": 7})
	a.saveFile("lease.json", map[string]float64{"threshold": math.Inf(1)}) // json cannot encode it
	if raw, _ := os.ReadFile(filepath.Join(dir, "lease.json")); string(raw) != `{"threshold":7}` {
		t.Errorf("lease.json = %q after a save that could not encode, want the earlier file", raw)
	}
	if !strings.Contains(logs.String(), "unsupported value") {
		t.Errorf("the encoding error is not logged:\n%s", logs.String())
	}
	logs.Reset()
	a.Config.StateDir = filepath.Join(dir, "gone")
	a.saveFile("lease.json", map[string]int{"threshold": 8})
	if !strings.Contains(logs.String(), "no such file or directory") {
		t.Errorf("the write error's cause is not logged:\n%s", logs.String())
	}
}
