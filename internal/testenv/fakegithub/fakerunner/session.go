package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
)

// The listener's session, as actions/runner's listener keeps it; fakegithub
// session.go has the sources and what is not documented.

// recreatesSessions is the first release whose listener creates a new
// session when the broker says its session is invalid (actions/runner
// #4556); it still reads any other 403 of GET /message as a deprecated
// version, a branch #4633 removed after it.
const recreatesSessions = "2.336.0"

// createSession is CreateSessionAsync: the session, or (false) the code
// the listener returns. A session another listener holds is asked for
// again every retry until the conflicts reach the limit, then it returns
// SessionConflict (5).
func (l *listener) createSession(ctx context.Context) (sessionInfo, int, bool) {
	conflicts := 0
	for {
		var sess sessionInfo
		status, msg, err := call(ctx, http.MethodPost, l.url("runners/%d/session")+versionQuery(l.settings.DisableUpdate), l.auth(), "", nil, &sess)
		if err == nil && status == http.StatusConflict {
			retry, limit := time.Duration(sess.RetryMillis)*time.Millisecond, time.Duration(sess.LimitMillis)*time.Millisecond
			if retry <= 0 { // the real listener's
				retry, limit = 30*time.Second, 4*time.Minute
			}
			conflicts++
			fmt.Fprintln(os.Stderr, "A session for this runner already exists.")
			if conflicts > 1 && time.Duration(conflicts)*retry >= limit {
				fmt.Fprintf(os.Stderr, "Stop retry on SessionConflictException after retried for %g seconds.\n", limit.Seconds())
				fmt.Fprintln(os.Stderr, "Failed to create session. A session for this runner already exists.")
				return sess, codeSessionConflict, false
			}
			if conflicts == 1 {
				fmt.Fprintf(os.Stderr, "%s: Runner connect error: A session for this runner already exists.. Retrying until reconnected.\n", stamp())
			}
			sleep(ctx, retry)
			if ctx.Err() != nil {
				return sess, codeSuccess, false
			}
			continue
		}
		if err == nil && (status == http.StatusNotFound || status == http.StatusUnauthorized) {
			fmt.Fprintln(os.Stderr, deletedMessage)
			return sess, codeTerminatedError, false
		}
		if err == nil && status == http.StatusForbidden {
			// A refusal that no retry changes (Server.RefuseListeners: a
			// deprecated version, say): the listener ends at once.
			fmt.Fprintf(os.Stderr, "%s: An error occurred: %s\n", stamp(), msg)
			if strings.Contains(msg, "is deprecated and cannot receive messages") {
				return sess, deprecatedCode(), false
			}
			return sess, codeTerminatedError, false
		}
		if err == nil && status < 300 {
			return sess, 0, true
		}
		if ctx.Err() != nil {
			return sess, codeSuccess, false
		}
		fmt.Fprintf(os.Stderr, "%s: Failed to create a session (%v, HTTP %d). Retrying until reconnected.\n", stamp(), err, status)
		sleep(ctx, time.Second)
	}
}

// forbidden reads a 403 of a poll as the listener's version does
// (BrokerHttpClient.cs, BrokerMessageListener.cs, Program.cs): it returns
// whether the listener goes on (with a new session in sess, when it made
// one) or the code it returns.
func (l *listener) forbidden(ctx context.Context, kind, msg string, sess *sessionInfo) (int, bool) {
	v := version()
	switch {
	case kind == "RunnerVersionTooOld":
		fmt.Fprintf(os.Stderr, "An error occurred: %s\n", msg)
		return deprecatedCode(), false
	case kind == "RunnerSessionInvalid" && runnerrelease.Compare(v, recreatesSessions) >= 0:
		next, _, ok := l.createSession(ctx)
		if ctx.Err() != nil {
			return codeSuccess, false
		}
		if !ok {
			// TaskAgentSessionExpiredException is not retriable:
			// NonRetryableException, TerminatedError.
			fmt.Fprintln(os.Stderr, "An error occurred: Get next message failed with non-retryable error.")
			return codeTerminatedError, false
		}
		*sess, l.session = next, next.SessionID
		return 0, true
	case runnerrelease.Compare(v, recreatesSessions) <= 0:
		// "temporary back compat": any other 403 is a deprecated version.
		fmt.Fprintf(os.Stderr, "An error occurred: %s Runner version v%s is deprecated and cannot receive messages.\n", msg, v)
		return deprecatedCode(), false
	default:
		// After #4633 a 403 of no known kind is a retriable error (the
		// real listener backs off 15 to 30 s; the fake 1 s).
		fmt.Fprintf(os.Stderr, "%s: Runner connect error: Failed to get job message. Request failed with status: Forbidden. Error message %s. Retrying until reconnected.\n", stamp(), msg)
		sleep(ctx, time.Second)
		return 0, true
	}
}
