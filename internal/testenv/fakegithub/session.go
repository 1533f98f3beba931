package fakegithub

import (
	"net/http"
	"time"
)

// Listener sessions, as actions/runner (v2.336.0, the release this
// provider pins) and GitHub's service handle them. Invariants of the fake:
// a runner has at most one session; another listener gets it only once
// its listener has not been heard from for SessionExpiry; before that only
// its own listener ends it (DELETE, as run.sh does on SIGINT/SIGTERM), or
// a test playing GitHub (ExpireSession).
//
// A second listener (src/Runner.Listener/MessageListener.cs and
// BrokerMessageListener.cs, CreateSessionAsync and
// IsSessionCreationExceptionRetriable; BrokerHttpClient.cs turns the
// service's 409 into TaskAgentSessionConflictException): refused while
// another listener's session lives, it says "A session for this runner
// already exists.", waits _sessionCreationRetryInterval (30 s) and asks
// again; once the conflicts counted times 30 s reach
// _sessionConflictRetryLimit (4 minutes: the 8th conflict, 210 s after
// the first) it says "Stop retry on SessionConflictException after
// retried for 240 seconds." and returns SessionConflict, which Runner.cs
// turns into exit code 5 (Constants.Runner.ReturnCode.SessionConflict)
// and run-helper.sh into "Runner listener exit with Session Conflict
// error, stop the service, no retry needed." and exit 0. The first
// listener keeps its session throughout. The fake tells its listener the
// interval and the limit in the 409's answer (retryMillis, limitMillis:
// fields of the fake's own protocol).
//
// A dead listener's session: how long GitHub keeps the session of a
// listener that died without deleting it is not documented. What is
// known: actions/runner issue #1506 shows a restarted listener giving up
// after its 240 s of conflicts (so a dead session can outlive the
// limit), and the service GitHub's descends from (Azure Pipelines,
// microsoft/vso-agent issue #202, a maintainer) expires an abandoned
// session "after 5 minutes". The fake keeps it SessionExpiry, by default
// five fourths of the conflict limit (5 minutes to the real 4): a
// listener restarted at once after a kill gives up (exit 5) before the
// session lapses, and only the next one connects. Whoever restarts
// runners must restart one that exited 5.
//
// A listener whose session is gone (expired, or taken over once it
// lapsed): the broker answers its GET /message with the error kind
// RunnerSessionInvalid (BrokerErrorKind.cs; with which HTTP status is not
// documented: the fake answers 403, the status the runner's back-compat
// branch reads). Since actions/runner #4556 (v2.336.0) BrokerHttpClient.cs
// maps it to TaskAgentSessionExpiredException and
// BrokerMessageListener.cs creates a new session (conflicts as above;
// failing that, "Get next message failed with non-retryable error." and
// exit 1); before, its "temporary back compat" branch read every 403 of
// GET /message as a deprecated version (AccessDeniedException with
// ErrorCode 1; Program.cs: TerminatedError, or 7 with
// ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE). #4633 removed that
// branch after v2.336.0: later listeners retry a 403 of no known kind.
// fakerunner plays each by its version.

// brokerError is the body of a broker refusal the listener reads by its
// kind (BrokerError.cs: source, errorKind, statusCode, errorMessage).
func brokerError(status int, kind, msg string) (int, any) {
	return status, map[string]any{"source": "fakegithub", "errorKind": kind, "statusCode": status, "errorMessage": msg, "message": msg}
}

// The broker's error kinds the listener reads (BrokerErrorKind.cs).
const (
	kindSessionInvalid = "RunnerSessionInvalid"
	kindVersionTooOld  = "RunnerVersionTooOld"
)

// sessionInvalid: the request's session is not the runner's live one.
func sessionInvalid() (int, any) {
	return brokerError(http.StatusForbidden, kindSessionInvalid, "Runner session is invalid.")
}

// sessionLive: the runner's session is held by a listener heard from
// within SessionExpiry. s.mu is held.
func (s *Server) sessionLive(rn *runner) bool {
	return rn.session != "" && !rn.lastSeen.IsZero() && s.now().Sub(rn.lastSeen) < s.sessionExpiry
}

// ownSession: the request names the runner's session. A session lapses
// only when another listener asks for one (sessionCreate): the fake's
// clock moves in jumps in tests while a listener polls on, which in real
// time is never silent for long. ExpireSession ends one outright.
func (s *Server) ownSession(rn *runner, r *http.Request) bool {
	return rn.session != "" && rn.session == r.Header.Get(sessionHeader)
}

// ExpireSession ends runner id's session as GitHub does when it expires
// one: its listener's next poll is answered RunnerSessionInvalid.
func (s *Server) ExpireSession(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rn, ok := s.runners[id]; ok && rn.session != "" {
		s.abandon(rn, "")
		rn.session = ""
		s.wake()
	}
}

// pollWait is how long a poll waits for a job: short enough that the
// runner's polls keep it online.
func (s *Server) pollWait() time.Duration { return min(time.Second, s.offlineAfter/2) }

func (s *Server) sessionCreate(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, status, body := s.listener(r)
	if rn == nil {
		return status, body
	}
	if msg := s.versionRefused(r); msg != "" {
		return http.StatusForbidden, apiError(http.StatusForbidden, msg)
	}
	if s.refuseListeners > 0 {
		// RefuseListeners: this listener ends at once, without a job.
		s.refuseListeners--
		return http.StatusForbidden, apiError(http.StatusForbidden, s.refusal)
	}
	if rn.jit && rn.listened && rn.relaunches == 0 {
		// A just-in-time configuration starts one listener, and one more
		// after each update message: the listener run.sh launches again
		// once the update is in place (releases.go; agent's
		// TestARunnerThatUpdatedItselfRunsItsJobAndTheInstallStaysAtItsTarget
		// fails without it). That GitHub takes the same configuration
		// again then is what run.sh's relaunch implies; it is not
		// documented.
		return http.StatusNotFound, apiError(http.StatusNotFound, "The runner registration has been deleted from the server.")
	}
	if rn.jit && rn.listened {
		rn.relaunches--
	}
	if s.sessionLive(rn) {
		// Another listener holds a live session: this one is refused
		// and retries; the first keeps its session (above).
		return http.StatusConflict, map[string]any{
			"message":     "A session for this runner already exists.",
			"retryMillis": s.sessionRetry.Milliseconds(),
			"limitMillis": s.conflictLimit.Milliseconds(),
		}
	}
	if !rn.listened {
		s.cameOnline(rn.id)
		rn.listenedAt = s.now()
	}
	rn.listened = true
	session := randomToken("session_")
	// A new listener for a runner whose last one went silent (killed,
	// its session never deleted): the job the old one was handed is
	// settled first.
	s.abandon(rn, session)
	rn.session, rn.lastSeen = session, s.now()
	return http.StatusOK, map[string]any{
		"sessionId":       session,
		"heartbeatMillis": max(s.offlineAfter/3, 50*time.Millisecond).Milliseconds(),
	}
}

func (s *Server) sessionDelete(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, status, body := s.listener(r)
	if rn == nil {
		return status, body
	}
	if rn.session == r.Header.Get(sessionHeader) {
		s.abandon(rn, "")
		rn.session = ""
	}
	return http.StatusNoContent, nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rn, status, body := s.listener(r)
	if rn == nil {
		return status, body
	}
	if !s.ownSession(rn, r) {
		return sessionInvalid()
	}
	rn.lastSeen = s.now()
	return http.StatusNoContent, nil
}
