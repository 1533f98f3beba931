package lifecycle

import (
	"time"
)

// jitMachine is the state of a just-in-time assignment's runners, one
// after the other (jit.go says how they follow each other, jitcap.go how
// those that end without a job are held back). Its methods decide; the
// Agent acts on what they decide (starts, asks, cleans, signals, logs).
//
// Invariants:
//   - the next configuration (seq+1) is asked for at most every
//     jitAskEvery, and not while held (askDue, held);
//   - a runner's exit is judged once (judge), before the cleanup discards
//     what it left: a job resets the count of idle exits; GitHub's idle
//     removal, late enough, neither counts nor resets; any other exit
//     without a job counts and holds the next request for jitBackoff;
//   - after jitIdleCap idle exits in a row the assignment gets no next
//     runner (gaveUp); another assignment starts counting at 0;
//   - the leftovers of runner seq are cleaned up once, and the next runner
//     waits until they were (needsCleaning, cleaned);
//   - a claimed record found without its first configuration is read
//     every jitAnswerPoll, for at most jitAnswerFor after it was first
//     found so (firstMissing, unassignedWait), else at the idle poll.
//
// Synchronisation: none of its own. Only the main loop's goroutine
// touches it (reconcile and the main loop's wait, startJIT included):
// it is owned by that goroutine, so no lock is needed and none is taken.
type jitMachine struct {
	// askedSeq is the configuration last asked for, and askedAt when.
	askedSeq int
	askedAt  time.Time
	// cleanedSeq is the runner whose job's leftovers were last cleaned up.
	cleanedSeq int
	// idle counts the runners that ended without a job (jitcap.go).
	idle jitIdle
	// updateNoted is the runner (assignment/seq) whose self-update, if
	// any, was last looked for (Agent.noteSelfUpdate).
	updateNoted string
	// startedAt is when this process last started a runner (zero: an
	// earlier agent process did).
	startedAt time.Time
	// awaited is the assignment whose first configuration the agent found
	// missing from its claimed record, and awaitedSince when it first
	// did; awaiting says the last pass found it missing (firstMissing).
	awaited      string
	awaitedSince time.Time
	awaiting     bool
}

// wait is how long the main loop sleeps before it reads the record again
// while runner seq is the assignment's latest, and whether the runner's
// exit ends the sleep early (it is alive: its exit means ask for the next
// configuration now). A request just made is answered within about a
// second: the record is read every jitAnswerPoll for jitAnswerFor.
func (m *jitMachine) wait(seq int, alive bool, now time.Time, assignedPoll time.Duration) (wait time.Duration, wakeOnExit bool) {
	switch {
	case alive:
		return assignedPoll, true
	case m.askedSeq == seq+1 && now.Sub(m.askedAt) < jitAnswerFor:
		return jitAnswerPoll, false
	}
	return assignedPoll, false
}

// firstMissing notes that the record holds assignment without its first
// configuration yet: provision writes it right after the claim (or the
// record of a launch), so the record is read every jitAnswerPoll until it
// comes, for at most jitAnswerFor after it was first found missing
// (unassignedWait). The idle poll (a second) would otherwise be paid by
// about one claim in three, whose read fell between the two writes.
func (m *jitMachine) firstMissing(assignment string, now time.Time) {
	if m.awaited != assignment {
		m.awaited, m.awaitedSince = assignment, now
	}
	m.awaiting = true
}

// newPass forgets what the last pass found missing; firstMissing says it
// again while it still is.
func (m *jitMachine) newPass() { m.awaiting = false }

// unassignedWait is how long the main loop sleeps while no runner is
// registered: the idle poll, or jitAnswerPoll while a first configuration
// is due (firstMissing).
func (m *jitMachine) unassignedWait(now time.Time, idlePoll time.Duration) time.Duration {
	if m.awaiting && now.Sub(m.awaitedSince) < jitAnswerFor {
		return min(jitAnswerPoll, idlePoll)
	}
	return idlePoll
}

// askDue reports whether configuration seq should be asked for at now:
// not when it was asked for less than jitAskEvery ago.
func (m *jitMachine) askDue(seq int, now time.Time) bool {
	return m.askedSeq != seq || now.Sub(m.askedAt) >= jitAskEvery
}

// asked notes that configuration seq was asked for at now; it reports
// whether it is the first request for it (the one worth a log line).
func (m *jitMachine) asked(seq int, now time.Time) (first bool) {
	first = m.askedSeq != seq
	m.askedSeq, m.askedAt = seq, now
	return first
}

// needsCleaning reports whether what runner seq left is still to clean up.
func (m *jitMachine) needsCleaning(seq int) bool { return m.cleanedSeq != seq }

// cleaned notes that what runner seq left was cleaned up.
func (m *jitMachine) cleaned(seq int) { m.cleanedSeq = seq }

// firstLook reports whether the runner key (assignment/seq) is looked at
// for a self-update for the first time, and notes it.
func (m *jitMachine) firstLook(key string) bool {
	if m.updateNoted == key {
		return false
	}
	m.updateNoted = key
	return true
}

// started notes that this process started a runner at now.
func (m *jitMachine) started(now time.Time) { m.startedAt = now }
