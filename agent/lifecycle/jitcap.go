package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Just-in-time runners that end without a job (issue 31 item 3).
//
// A listener that exits at once (a version GitHub no longer accepts, a
// registration deleted, a library missing) would otherwise have the agent
// ask for the next configuration at once, and the control plane mint a
// runner every few seconds, each registered at GitHub for up to a day.
//
// Invariants: after a runner of the assignment exits without having run a
// job, the next configuration is asked for only after a backoff (jitBackoff,
// doubling from 2 s to 60 s); after jitIdleCap such exits in a row the agent
// asks for none: it signals UD_FAILED with the count and the last runner's
// output, and the runner is not restarted, so its lease is no longer kept
// ahead and the instance ends with it. A runner that ran a job resets the
// count. Whether it ran one is read from the listener's own "Running job"
// line in run.sh's output (root's: a job cannot delete it, as it can the
// Worker trace in its copy) or that trace (runner.RanAJob), before the
// copy is discarded.
//
// A runner GitHub removed while it waited for a job is no such exit (issue
// 37 item 7). GitHub removes a just-in-time runner whose listener took no
// job within a few minutes (actions/runner issue #4726 reports 2 to 6), so
// an assignment's later job behind a long upstream job or an environment
// approval would otherwise cost it three runners and then its instance.
// The listener says so ("The runner no longer exists on the server.",
// runner.RemovedByGitHub) and ends 0: such an exit, at least
// Config.JITRemovedMin (1 minute, under the least reported) after the
// runner started, is counted apart (jitIdle.removed, for the log) and
// neither counts towards jitIdleCap nor resets it; the next configuration
// is asked for after jitRemovedHold. One removed sooner is not GitHub's
// idle removal (a runner deleted by hand or by a script, over and over):
// it counts as ended without a job, so that a setup that removes every
// runner at once ends in UD_FAILED, not in a mint every few seconds.
// What bounds the replacements: the lease, which the agent keeps
// ahead only up to the runtime cap the control plane set (leaseCap), and
// the control plane, which mints only while it is live and bounds an
// instance's requests itself (controlplane/jitcap.go): an agent that lies
// here gains nothing it could not get by asking.

// jitIdleCap is how many runners in a row may end without a job.
const jitIdleCap = 3

// jitRemovedHold is the wait before asking for the runner that replaces one
// GitHub removed while it waited for a job.
const jitRemovedHold = 2 * time.Second

// jitBackoff is the wait before asking for the next configuration after
// the n-th runner in a row that ended without a job.
func jitBackoff(n int) time.Duration {
	return min(2*time.Second<<(n-1), time.Minute)
}

// jitIdle is the count of just-in-time runners that ended without a job.
type jitIdle struct {
	assignment string // the assignment counted; another starts again at 0
	judged     int    // the last runner (its seq) judged
	count      int
	removed    int    // runners GitHub removed while they waited for a job
	output     string // the last such runner's output, its tail
	hold       time.Time
}

// jitExit is what the agent knows of a runner that exited.
type jitExit struct {
	assignment string
	seq        int
	ranAJob    bool
	output     string // the tail of run.sh's output
	// removedMin is Config.JITRemovedMin.
	removedMin time.Duration
}

// verdict is what judge made of an exit.
type verdict int

const (
	judgedBefore verdict = iota // the runner was judged already
	ranAJob                     // it ran a job: the count starts again
	removedIdle                 // GitHub removed it while it waited: not counted
	endedIdle                   // it ended without a job: counted, held
)

// judge counts the runner that exited, once (see the invariants above).
func (m *jitMachine) judge(e jitExit, now time.Time) verdict {
	j := &m.idle
	if j.assignment != e.assignment {
		*j = jitIdle{assignment: e.assignment}
	}
	if j.judged == e.seq {
		return judgedBefore
	}
	j.judged = e.seq
	if e.ranAJob {
		j.count = 0
		return ranAJob
	}
	// Long when an earlier agent process started it.
	if runner.RemovedByGitHub(e.output) && m.lived(now) >= e.removedMin {
		// Not counted: GitHub ended a runner that waited for a job longer
		// than it keeps one. A job that forged the line (run.sh's output
		// is the runner user's to write to) and removed its Worker trace
		// ran a job all the same: its runner is spent, as after any job.
		j.removed++
		j.hold = now.Add(jitRemovedHold)
		return removedIdle
	}
	j.count++
	j.output = e.output
	j.hold = now.Add(jitBackoff(j.count))
	return endedIdle
}

// judged reports whether runner seq of the assignment was judged already
// (judge would change nothing): the agent then reads nothing of it.
func (m *jitMachine) judged(assignment string, seq int) bool {
	return m.idle.assignment == assignment && m.idle.judged == seq
}

// lived is how long the runner last started ran, until now.
func (m *jitMachine) lived(now time.Time) time.Duration { return now.Sub(m.startedAt) }

// held reports whether the next configuration of the assignment must not
// be asked for yet (backoff), or ever (the cap).
func (m *jitMachine) held(assignment string, now time.Time) bool {
	return m.gaveUp(assignment) || now.Before(m.idle.hold)
}

// gaveUp reports whether the assignment gets no further runner.
func (m *jitMachine) gaveUp(assignment string) bool {
	return m.idle.assignment == assignment && m.idle.count >= jitIdleCap
}

// judgeJITExit judges the runner that just exited, before its copy is
// cleaned up, and says what it made of it.
func (a *Agent) judgeJITExit() {
	if a.jit.judged(a.local.Assignment, a.local.Seq) {
		return
	}
	now := time.Now()
	e := jitExit{assignment: a.local.Assignment, seq: a.local.Seq, removedMin: a.Config.JITRemovedMin.Duration}
	if e.ranAJob = a.Runner.RanAJob(); !e.ranAJob {
		e.output = a.Runner.OutputTail()
	}
	j := &a.jit.idle
	switch a.jit.judge(e, now) {
	case removedIdle:
		a.Log.Info("just-in-time runner removed by GitHub while it waited for a job: replaced, not counted", "seq", e.seq, "lived", a.jit.lived(now).Round(time.Second), "removedInAssignment", j.removed, "inARow", j.count)
	case endedIdle:
		a.Log.Warn("just-in-time runner ended without taking a job", "seq", e.seq, "inARow", j.count, "cap", jitIdleCap, "output", j.output)
	}
}

// giveUpJIT says why the assignment gets no further runner.
func (a *Agent) giveUpJIT(ctx context.Context, rec *state.Instance) {
	a.signal(ctx, rec, state.SignalFailed, fmt.Sprintf("the just-in-time runner exited %d times without taking a job: %s", a.jit.idle.count, a.jit.idle.output))
}
