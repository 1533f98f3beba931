package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
)

// hangAfterConfigure makes the next `config.sh` (not `config.sh remove`)
// hang once it has configured the runner, so that the test can kill the
// agent between config.sh writing .runner and the agent noting the
// registration.
func (w *world) hangAfterConfigure() {
	w.t.Helper()
	dir, marker := filepath.Join(w.dir, "runner"), filepath.Join(w.dir, "hang-after-configure")
	must(w.t, os.Rename(filepath.Join(dir, "config.sh"), filepath.Join(dir, "config.orig.sh")))
	must(w.t, os.WriteFile(filepath.Join(dir, "config.sh"), []byte(`#!/bin/bash
DIR="$(cd -P "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$DIR/config.orig.sh" "$@" || exit $?
if [ "$1" != remove ] && [ -e '`+marker+`' ]; then
	rm -f '`+marker+`'
	: >"$DIR/hung"
	exec sleep 600
fi
`), 0o755))
	must(w.t, os.WriteFile(marker, nil, 0o644))
}

// killAfterConfigure waits until config.sh hangs after configuring, then
// kills the agent there.
func (w *world) killAfterConfigure() {
	w.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(w.dir, "run", "hung")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("config.sh did not run\nagent log:\n%s", w.logs.String())
		}
	}
	w.kill()
	if _, err := os.Stat(filepath.Join(w.dir, "run", ".runner")); err != nil {
		w.t.Fatalf("no .runner after config.sh: %v", err)
	}
	if n := len(w.fake.Runners()); n != 1 {
		w.t.Fatalf("%d runners on GitHub after config.sh, want 1", n)
	}
}

// onlyRunner checks that GitHub holds exactly the runner the record names
// and that it takes the run's jobs.
func (w *world) onlyRunner(rec *state.Instance, name string) {
	w.t.Helper()
	rs := w.fake.Runners()
	if len(rs) != 1 || rs[0].Name != name || rs[0].ID != rec.GithubRunnerID || rec.RunnerName != name {
		w.t.Fatalf("runners on GitHub %+v, record names %d %q; want only %s", rs, rec.GithubRunnerID, rec.RunnerName, name)
	}
	if job := w.job(rec.RunID, "echo ok"); job.ExitCode != 0 || job.Runner != name {
		w.t.Fatalf("job: %+v", job)
	}
}

func TestAnAgentKilledBetweenConfigureAndItsNoteAdoptsTheRunner(t *testing.T) {
	t.Parallel()
	sideBySide(t,
		subtest{"the runner of the current assignment is adopted", func(t *testing.T) {
			w := newWorld(t, "")
			inst := w.create("run-1", "on-demand")
			w.hangAfterConfigure()
			w.start()
			w.killAfterConfigure()
			if rec, _ := w.store.Get(ctx, w.key); answered(rec, state.SignalRegOK, state.SignalRegFailed) {
				t.Fatalf("signals %v before the registration was noted", rec.Signals)
			}

			w.start()
			got := w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
			w.onlyRunner(got, fmt.Sprintf("ghr-1-%s", w.id))
			if h := w.fake.History(); len(h) != 1 {
				t.Fatalf("the runner was registered %d times: %+v", len(h), h)
			}
		}},
		subtest{"the runner of an earlier assignment is removed first", func(t *testing.T) {
			w := newWorld(t, "")
			pooled := statetest.Pooled(t, w.store, statetest.Spec{ID: w.id, RoleID: testRoleID, Pool: "linux", Owner: "acme", InstanceType: "c7i.large", UsageClass: "on-demand"})
			claimed, err := w.store.Claim(ctx, pooled.Key, state.ClaimRequest{RunID: "run-1", Pool: "linux", Owner: "acme", ClaimTTL: 5 * time.Minute, Registration: w.registration()})
			must(t, err)
			w.hangAfterConfigure()
			w.start()
			w.killAfterConfigure()
			// The claim timed out meanwhile: the control plane took the
			// instance back, with a remove token for the runner.
			idle, err := w.store.Unclaim(ctx, claimed.Ref(), 15*time.Minute, w.removal())
			must(t, err)
			// Files a newer runner's listener leaves beside .runner; config.sh
			// refuses to configure over them too.
			dir := filepath.Join(w.dir, "run")
			raw, err := os.ReadFile(filepath.Join(dir, ".runner"))
			must(t, err)
			must(t, os.WriteFile(filepath.Join(dir, ".runner_migrated"), raw, 0o644))
			must(t, os.WriteFile(filepath.Join(dir, ".credentials_migrated"), []byte(`{"scheme":"OAuth"}`), 0o600))

			w.start()
			w.wait(idle, state.SignalRemoveRegOK, state.SignalRemoveRegFailed)
			if rs := w.fake.Runners(); len(rs) != 0 {
				t.Fatalf("runner of the abandoned claim still on GitHub: %+v", rs)
			}
			for _, f := range []string{".runner", ".credentials", ".credentials_rsaparams", ".runner_migrated", ".credentials_migrated"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
					t.Fatalf("%s left after the runner was removed", f)
				}
			}
			next, err := w.store.Claim(ctx, idle.Key, state.ClaimRequest{RunID: "run-2", Pool: "linux", Owner: "acme", ClaimTTL: 5 * time.Minute, Registration: w.registration()})
			must(t, err)
			got := w.wait(next, state.SignalRegOK, state.SignalRegFailed)
			w.onlyRunner(got, fmt.Sprintf("ghr-%d-%s", next.Uses, w.id))
			if h := w.fake.History(); len(h) != 2 || h[0].To.IsZero() {
				t.Fatalf("registrations %+v, want the abandoned one ended and the new one", h)
			}
		}},
	)
}

func answered(rec *state.Instance, names ...string) bool {
	for _, n := range names {
		if _, ok := rec.SignalFor(n); ok {
			return true
		}
	}
	return false
}
