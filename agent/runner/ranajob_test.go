package runner

import (
	"os"
	"path/filepath"
	"testing"
)

// Issue 36: a job owns its runner's copy, so it can delete the Worker's
// trace (_diag/Worker_*.log) the agent judged "ran a job" by, or all of
// _diag; the agent then took the runner for one that ended without a job:
// it backed off before asking for the next, and after three such jobs in
// a row gave the assignment up ("exited 3 times without taking a job").
// The listener's own "Running job" line, in run.sh's output that only root
// can open, now says a job ran whatever became of the trace; a missing
// trace decides nothing on its own. (With RanAJob reading the trace alone
// — tried once — "a job that deleted its Worker trace" and "a job that
// deleted all of _diag" report "RanAJob = false, want true".)
func TestAJobThatDeletesItsWorkerTraceStillCountsAsAJob(t *testing.T) {
	const listenerRan = "√ Connected to GitHub\n\nCurrent runner version: '2.330.0'\n2026-11-28 17:00:00Z: Listening for Jobs\n" +
		"2026-11-28 17:00:03Z: Running job: build\n2026-11-28 17:00:09Z: Job build completed with result: Succeeded\n"
	const listenerIdle = "√ Connected to GitHub\n\nCurrent runner version: '2.330.0'\n2026-11-28 17:00:00Z: Listening for Jobs\n" +
		"Runner version v2.999.0-fake is deprecated and cannot receive messages.\n"
	for _, c := range []struct {
		name   string
		output string // run.sh's output ("": none)
		diag   []string
		want   bool
	}{
		{"a job, its trace kept", listenerRan, []string{"Runner_20261128-170000-utc.log", "Worker_20261128-170003-utc.log"}, true},
		{"a job that deleted its Worker trace", listenerRan, []string{"Runner_20261128-170000-utc.log"}, true},
		{"a job that deleted all of _diag", listenerRan, nil, true},
		{"no job", listenerIdle, []string{"Runner_20261128-170000-utc.log"}, false},
		{"no job, _diag gone too", listenerIdle, nil, false},
		{"no output to read: the trace alone", "", []string{"Worker_20261128-170003-utc.log"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, state := t.TempDir(), t.TempDir()
			r := &Runner{Dir: dir, StateDir: state}
			if c.output != "" {
				check(t, os.WriteFile(r.outputPath(), []byte(c.output), 0o600))
			}
			if c.diag != nil {
				check(t, os.MkdirAll(filepath.Join(dir, "_diag"), 0o755))
				for _, f := range c.diag {
					check(t, os.WriteFile(filepath.Join(dir, "_diag", f), []byte("trace\n"), 0o644))
				}
			}
			if got := r.RanAJob(); got != c.want {
				t.Fatalf("RanAJob = %v, want %v", got, c.want)
			}
		})
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
