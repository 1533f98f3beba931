package lifecycle

import (
	"context"
	"fmt"
	"time"

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

// jitIdleCap is how many runners in a row may end without a job.
const jitIdleCap = 3

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
	output     string // the last such runner's output, its tail
	hold       time.Time
}

// judgeJITExit counts the runner that just exited, once, before its copy is
// cleaned up.
func (a *Agent) judgeJITExit() {
	j := &a.jitIdle
	if j.assignment != a.local.Assignment {
		*j = jitIdle{assignment: a.local.Assignment}
	}
	if j.judged == a.local.Seq {
		return
	}
	j.judged = a.local.Seq
	if a.Runner.RanAJob() {
		j.count = 0
		return
	}
	j.count++
	j.output = a.Runner.OutputTail()
	j.hold = time.Now().Add(jitBackoff(j.count))
	a.Log.Warn("just-in-time runner ended without taking a job", "seq", a.local.Seq, "inARow", j.count, "cap", jitIdleCap, "output", j.output)
}

// jitHeld reports whether the next configuration must not be asked for
// yet (backoff), or ever (the cap).
func (a *Agent) jitHeld() bool {
	return a.jitGaveUp() || time.Now().Before(a.jitIdle.hold)
}

func (a *Agent) jitGaveUp() bool {
	return a.jitIdle.assignment == a.local.Assignment && a.jitIdle.count >= jitIdleCap
}

// giveUpJIT says why the assignment gets no further runner.
func (a *Agent) giveUpJIT(ctx context.Context, rec *state.Instance) {
	a.signal(ctx, rec, state.SignalFailed, fmt.Sprintf("the just-in-time runner exited %d times without taking a job: %s", a.jitIdle.count, a.jitIdle.output))
}
