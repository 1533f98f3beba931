package runner

// What a run.sh that ended leaves for the agent to judge it by: its output
// (why it ended, in its own words) and whether it ran a job.

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// OutputFile is where, in StateDir, run.sh's output (standard output and
// error) goes, truncated at each start. A file, not a pipe to the agent:
// run.sh outlives an agent restart (its job may be under way), and a pipe
// without a reader would kill it at its next line (SIGPIPE). The agent
// copies the file to its own output (the journal) while it waits on the
// runner it started.
const OutputFile = "run.sh.out"

func (r *Runner) outputPath() string { return filepath.Join(r.StateDir, OutputFile) }

// openOutput creates run.sh's output file afresh; StateDir is the agent's,
// and O_NOFOLLOW refuses a link planted in its place all the same.
func (r *Runner) openOutput() (*os.File, error) {
	return os.OpenFile(r.outputPath(), os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
}

// mirror copies the output file to the agent's standard output until
// exited is closed and everything written before is copied.
func mirror(path string, exited <-chan struct{}) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	for {
		if n, _ := io.Copy(os.Stdout, f); n > 0 {
			continue
		}
		select {
		case <-exited:
			io.Copy(os.Stdout, f)
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// OutputTail returns the end of the last run.sh's output ("" when there
// is none).
func (r *Runner) OutputTail() string {
	f, err := os.Open(r.outputPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 800
	if st, err := f.Stat(); err == nil && st.Size() > max {
		f.Seek(st.Size()-max, io.SeekStart)
	}
	raw, _ := io.ReadAll(io.LimitReader(f, max))
	return tail(raw)
}

// RanAJob reports whether the runner of the current copy ran a job. Two
// witnesses, of which only one is out of a job's reach:
//
//   - the listener's own words: before it starts the Worker of a job it
//     prints "<time>: Running job: <name>" to its standard output
//     (actions/runner src/Runner.Listener/JobDispatcher.cs), which is
//     run.sh's output, OutputFile in the agent's StateDir: root's, 0600,
//     opened by the agent and handed to run.sh, so the runner user cannot
//     open it (not even again through /proc/<pid>/fd) and can delete
//     nothing in it; at most a process holding run.sh's own descriptor
//     adds lines, and a line it adds there says a job ran while one did;
//   - the Worker's trace: every Worker writes _diag/Worker_<yyyyMMdd-
//     HHmmss>-utc.log in the runner's root (src/Runner.Worker/Program.cs,
//     HostContext("Worker"); src/Runner.Common/HostTraceListener.cs names
//     the file), the listener its own to Runner_*.log. The copy is the
//     runner user's: a job can delete the file, or all of _diag.
//
// A missing trace therefore decides nothing on its own: the listener's
// line is read first, and a job that deleted its Worker's trace still
// counts as a job (the agent is not led to back off, nor to give its
// assignment up as a run of runners ending without one). Neither the exit
// code (run.sh ends 0 whatever the listener returned) nor how long the
// runner lived (a short job, a listener retrying for minutes) tells the
// two apart.
func (r *Runner) RanAJob() bool {
	if r.listenerSaysAJobRan() {
		return true
	}
	logs, _ := filepath.Glob(filepath.Join(r.Dir, "_diag", "Worker_*.log"))
	return len(logs) > 0
}

// runningJob is what the listener prints as it starts a job.
var runningJob = []byte(": Running job: ")

// listenerSaysAJobRan looks for the listener's "Running job" line in the
// last run.sh's output (its first 8 MiB: a listener's output is a few
// lines per job and per retry).
func (r *Runner) listenerSaysAJobRan() bool {
	f, err := os.Open(r.outputPath())
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 8<<20))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if bytes.Contains(sc.Bytes(), runningJob) {
			return true
		}
	}
	return false
}

// selfUpdate is what actions/runner's listener prints when it updates
// itself (SelfUpdaterV2.cs, SelfUpdater.cs: "Runner update in progress, do
// not shutdown runner." then "Downloading <version> runner"); run.sh then
// launches the updated listener in the same copy (run-helper.sh.template
// exits 2 after an update exit, run.sh loops).
var selfUpdate = regexp.MustCompile(`Downloading (\d+\.\d+\.\d+) runner`)

// SelfUpdated returns the version the last run.sh's listener said it
// updated itself to ("" none), from the first 8 MiB of its output. Words
// the runner user could write too: for the log, never for a decision.
func (r *Runner) SelfUpdated() string {
	f, err := os.Open(r.outputPath())
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 8<<20))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	v := ""
	for sc.Scan() {
		if m := selfUpdate.FindSubmatch(sc.Bytes()); m != nil {
			v = string(m[1])
		}
	}
	return v
}

// removedLine is what actions/runner's listener says when its runner
// disappears from GitHub while it waits for a message: GitHub removed it
// (a just-in-time runner that took no job within a few minutes,
// actions/runner issue #4726) or someone deleted it. The listener then
// deletes its local configuration and returns 0 (src/Runner.Listener/
// Runner.cs, RunAsync, since actions/runner #4551).
const removedLine = "The runner no longer exists on the server."

// RemovedByGitHub reports whether a run.sh's output (OutputTail) says its
// runner was removed from GitHub while it waited for a job.
func RemovedByGitHub(output string) bool {
	return strings.Contains(output, removedLine)
}
