package lifecycle

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

const removedByGitHub = "√ Connected to GitHub\nThe runner no longer exists on the server."

func TestEachJustInTimeRunnersExitIsJudgedOnceByWhatItLeft(t *testing.T) {
	cases := []struct {
		name      string
		before    jitIdle // the count before the exit
		lived     time.Duration
		exit      jitExit
		want      verdict
		count     int
		removed   int
		holdUntil time.Duration // after now
	}{
		{name: "a runner that ran a job starts the count again",
			before: jitIdle{assignment: "a", judged: 1, count: 2}, lived: time.Hour,
			exit: jitExit{assignment: "a", seq: 2, ranAJob: true}, want: ranAJob, count: 0},
		{name: "a runner that ended without a job counts and holds the next request for the backoff",
			before: jitIdle{assignment: "a", judged: 1, count: 1}, lived: time.Hour,
			exit: jitExit{assignment: "a", seq: 2, output: "exited"}, want: endedIdle, count: 2, holdUntil: jitBackoff(2)},
		{name: "a runner GitHub removed after waiting long enough neither counts nor resets the count",
			before: jitIdle{assignment: "a", judged: 1, count: 2}, lived: 5 * time.Minute,
			exit: jitExit{assignment: "a", seq: 2, output: removedByGitHub, removedMin: time.Minute}, want: removedIdle, count: 2, removed: 1, holdUntil: jitRemovedHold},
		{name: "a runner removed sooner than GitHub removes an idle one counts as ended without a job",
			before: jitIdle{assignment: "a", judged: 1}, lived: 10 * time.Second,
			exit: jitExit{assignment: "a", seq: 2, output: removedByGitHub, removedMin: time.Minute}, want: endedIdle, count: 1, holdUntil: jitBackoff(1)},
		{name: "a runner already judged is not judged again",
			before: jitIdle{assignment: "a", judged: 2, count: 1}, lived: time.Hour,
			exit: jitExit{assignment: "a", seq: 2, output: "exited"}, want: judgedBefore, count: 1},
		{name: "another assignment starts counting at zero",
			before: jitIdle{assignment: "a", judged: 5, count: 2, removed: 3}, lived: time.Hour,
			exit: jitExit{assignment: "b", seq: 1, output: "exited"}, want: endedIdle, count: 1, holdUntil: jitBackoff(1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := jitMachine{idle: c.before, startedAt: t0.Add(-c.lived)}
			if got := m.judge(c.exit, t0); got != c.want {
				t.Errorf("verdict %d, want %d", got, c.want)
			}
			if m.idle.count != c.count || m.idle.removed != c.removed {
				t.Errorf("count %d, removed %d; want %d, %d", m.idle.count, m.idle.removed, c.count, c.removed)
			}
			if c.holdUntil != 0 && !m.idle.hold.Equal(t0.Add(c.holdUntil)) {
				t.Errorf("held until %s, want now + %s", m.idle.hold, c.holdUntil)
			}
			if c.want != judgedBefore && !m.judged(c.exit.assignment, c.exit.seq) {
				t.Error("the runner is not noted as judged")
			}
		})
	}
}

func TestAnAssignmentGetsNoFurtherRunnerAfterThreeIdleExitsInARow(t *testing.T) {
	m := jitMachine{startedAt: t0}
	now := t0
	for seq := 1; seq <= jitIdleCap; seq++ {
		if m.gaveUp("a") {
			t.Fatalf("gave up after %d idle exits, want %d", seq-1, jitIdleCap)
		}
		m.judge(jitExit{assignment: "a", seq: seq, output: "exited"}, now)
		if !m.held("a", now) {
			t.Fatalf("the request after idle exit %d is not held back", seq)
		}
		now = now.Add(time.Hour)
	}
	if !m.gaveUp("a") || !m.held("a", now) {
		t.Errorf("after %d idle exits in a row the assignment may still ask for a runner", jitIdleCap)
	}
	if m.gaveUp("b") || m.held("b", now) {
		t.Error("another assignment is held by the count of this one")
	}
}

func TestTheBackoffDoublesFromTwoSecondsUpToAMinute(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 2 * time.Second, 2: 4 * time.Second, 3: 8 * time.Second, 6: time.Minute, 10: time.Minute} {
		if got := jitBackoff(n); got != want {
			t.Errorf("jitBackoff(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestTheNextConfigurationIsAskedForAgainOnlyAfterAFewSeconds(t *testing.T) {
	m := jitMachine{}
	if !m.askDue(2, t0) || !m.asked(2, t0) {
		t.Fatal("the first request for configuration 2 is not due, or not said to be the first")
	}
	for _, c := range []struct {
		seq   int
		after time.Duration
		due   bool
	}{
		{2, 0, false}, {2, jitAskEvery - time.Millisecond, false}, {2, jitAskEvery, true}, {3, 0, true},
	} {
		if got := m.askDue(c.seq, t0.Add(c.after)); got != c.due {
			t.Errorf("configuration %d, %s after asking for 2: due %v, want %v", c.seq, c.after, got, c.due)
		}
	}
	if m.asked(2, t0.Add(jitAskEvery)) {
		t.Error("a repeated request is said to be the first")
	}
}

func TestTheMainLoopWakesOnTheRunnersExitAndReadsOftenWhileAnAnswerIsDue(t *testing.T) {
	const poll = 3 * time.Second
	m := jitMachine{}
	m.asked(4, t0)
	for _, c := range []struct {
		name  string
		seq   int
		alive bool
		at    time.Duration
		wait  time.Duration
		wake  bool
	}{
		{"a live runner: the usual poll, woken by its exit", 3, true, 0, poll, true},
		{"its next configuration just asked for: read often", 3, false, time.Second, jitAnswerPoll, false},
		{"no answer for long: the usual poll", 3, false, jitAnswerFor, poll, false},
		{"another configuration asked for: the usual poll", 4, false, time.Second, poll, false},
	} {
		wait, wake := m.wait(c.seq, c.alive, t0.Add(c.at), poll)
		if wait != c.wait || wake != c.wake {
			t.Errorf("%s: wait %s, wake %v; want %s, %v", c.name, wait, wake, c.wait, c.wake)
		}
	}
}

func TestTheLeftoversOfEachRunnerAreCleanedUpOnce(t *testing.T) {
	m := jitMachine{}
	if !m.needsCleaning(1) {
		t.Fatal("runner 1's leftovers need no cleaning")
	}
	m.cleaned(1)
	if m.needsCleaning(1) || !m.needsCleaning(2) {
		t.Error("cleaning runner 1 was not noted, or counted for runner 2")
	}
	if !m.firstLook("a/1") || m.firstLook("a/1") || !m.firstLook("a/2") {
		t.Error("a runner's self-update is not looked for exactly once")
	}
}

func TestAClaimedRecordWithoutItsFirstConfigurationIsReadAgainSoonForABoundedTime(t *testing.T) {
	idle := time.Second
	var m jitMachine
	if got := m.unassignedWait(t0, idle); got != idle {
		t.Fatalf("nothing awaited: wait %s, want the idle poll %s", got, idle)
	}
	m.newPass()
	m.firstMissing("a", t0)
	if got := m.unassignedWait(t0, idle); got != jitAnswerPoll {
		t.Errorf("first configuration missing: wait %s, want %s", got, jitAnswerPoll)
	}
	// Still missing later in the same assignment: the bound counts from
	// the first time it was found missing.
	m.newPass()
	m.firstMissing("a", t0.Add(jitAnswerFor))
	if got := m.unassignedWait(t0.Add(jitAnswerFor), idle); got != idle {
		t.Errorf("missing for jitAnswerFor: wait %s, want the idle poll %s", got, idle)
	}
	// Another assignment starts its own bound.
	m.newPass()
	m.firstMissing("b", t0.Add(jitAnswerFor))
	if got := m.unassignedWait(t0.Add(jitAnswerFor), idle); got != jitAnswerPoll {
		t.Errorf("another assignment's first configuration missing: wait %s, want %s", got, jitAnswerPoll)
	}
	// A pass that no longer finds it missing (written, or the claim given
	// back) is back at the idle poll.
	m.newPass()
	if got := m.unassignedWait(t0.Add(jitAnswerFor), idle); got != idle {
		t.Errorf("no longer missing: wait %s, want the idle poll %s", got, idle)
	}
}
