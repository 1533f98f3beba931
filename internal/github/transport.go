package github

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// RateLimitError says GitHub refused a request for one of its rate limits
// and the client did not wait: the wait was longer than Config.MaxWait, or
// the attempts ran out.
type RateLimitError struct {
	Status    int       // 403 or 429
	Secondary bool      // a secondary (abuse) limit rather than the hourly budget
	ResetAt   time.Time // when GitHub says a retry may succeed
	Wait      time.Duration
	MaxWait   time.Duration
}

func (e *RateLimitError) Error() string {
	kind := "primary"
	if e.Secondary {
		kind = "secondary"
	}
	return fmt.Sprintf("GitHub %s rate limit exceeded (HTTP %d): it resets at %s, in %s (this client waits at most %s)",
		kind, e.Status, e.ResetAt.UTC().Format(time.RFC3339), e.Wait.Round(time.Second), e.MaxWait)
}

// IsRateLimited reports a rate-limit refusal the client did not wait out.
func IsRateLimited(err error) bool {
	var rl *RateLimitError
	return errors.As(err, &rl)
}

// retrying is the http.RoundTripper under every GitHub call. It
//   - waits out rate limits (403/429 with Retry-After, or with
//     x-ratelimit-remaining 0 and x-ratelimit-reset, or a secondary-limit
//     message with neither) when the wait is within maxWait, and fails at
//     once with a *RateLimitError otherwise;
//   - retries 5xx answers and network errors of requests that are safe to
//     repeat, with exponential backoff and jitter, up to maxAttempts;
//   - bounds each attempt with its own timeout (an http.Client timeout would
//     also cover the waits);
//   - notes the last x-ratelimit-remaining it saw.
type retrying struct {
	next        http.RoundTripper
	maxAttempts int
	maxWait     time.Duration
	timeout     time.Duration
	sleep       func(context.Context, time.Duration) error
	now         func() time.Time
	jitter      func(n int64) int64
	remaining   atomic.Int64
}

func (t *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	guesses := 0 // secondary limits that named no wait
	for attempt := 1; ; attempt++ {
		r, cancel, err := t.attemptRequest(req, attempt)
		if err != nil {
			return nil, err
		}
		resp, err := t.next.RoundTrip(r)
		if err != nil {
			cancel()
			if req.Context().Err() != nil || attempt >= t.maxAttempts || !retryable(req) {
				return nil, err
			}
			if err := t.sleep(req.Context(), t.backoff(attempt)); err != nil {
				return nil, err
			}
			continue
		}
		t.noteRemaining(resp)

		if wait, kind := t.rateLimited(resp, guesses); kind != notLimited {
			drain(resp)
			cancel()
			secondary := kind != primaryLimit
			if kind == secondaryGuess {
				guesses++
			}
			if wait > t.maxWait || attempt >= t.maxAttempts {
				return nil, &RateLimitError{Status: resp.StatusCode, Secondary: secondary, ResetAt: t.now().Add(wait), Wait: wait, MaxWait: t.maxWait}
			}
			if err := t.sleep(req.Context(), wait); err != nil {
				return nil, err
			}
			continue
		}

		if resp.StatusCode >= 500 && attempt < t.maxAttempts && retryable(req) {
			drain(resp)
			cancel()
			if err := t.sleep(req.Context(), t.backoff(attempt)); err != nil {
				return nil, err
			}
			continue
		}

		// go-github remembers a remaining count of 0 from a successful
		// answer and then refuses every call until the reset, locally and
		// without waiting. This transport decides about waits (MaxWait), so
		// go-github does not get to see that 0.
		if resp.StatusCode < 400 && resp.Header.Get("X-Ratelimit-Remaining") == "0" {
			resp.Header.Del("X-Ratelimit-Remaining")
		}
		resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		return resp, nil
	}
}

// attemptRequest prepares one attempt: its own timeout, and a fresh body
// for a repeat.
func (t *retrying) attemptRequest(req *http.Request, attempt int) (*http.Request, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(req.Context(), t.timeout)
	r := req.Clone(ctx)
	if attempt > 1 && req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			cancel()
			return nil, nil, errors.New("github: cannot repeat a request whose body cannot be read again")
		}
		body, err := req.GetBody()
		if err != nil {
			cancel()
			return nil, nil, err
		}
		r.Body = body
	}
	return r, cancel, nil
}

func (t *retrying) noteRemaining(resp *http.Response) {
	if v := resp.Header.Get("X-Ratelimit-Remaining"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			t.remaining.Store(n)
		}
	}
}

// secondaryFallback is GitHub's documented wait for a secondary limit that
// names no time: at least a minute, growing exponentially on repeats.
const secondaryFallback = time.Minute

type limitKind int

const (
	notLimited     limitKind = iota
	primaryLimit             // x-ratelimit-remaining 0: wait for x-ratelimit-reset
	secondaryTimed           // Retry-After says how long
	secondaryGuess           // a secondary limit naming no time
)

// rateLimited reads GitHub's documented rate-limit answers (403 or 429):
// Retry-After gives the wait; otherwise x-ratelimit-remaining 0 means the
// primary limit, over at x-ratelimit-reset; otherwise a secondary limit (a
// 429, or a 403 whose message says so) means wait a minute, doubling on
// each repeat. A 403 that is none of these (a permission problem) is no
// rate limit.
func (t *retrying) rateLimited(resp *http.Response, guesses int) (time.Duration, limitKind) {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return 0, notLimited
	}
	if d, ok := t.retryAfter(resp.Header.Get("Retry-After")); ok {
		return d, secondaryTimed
	}
	if resp.Header.Get("X-Ratelimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-Ratelimit-Reset"), 10, 64); err == nil {
			// The reset is in whole seconds: one more keeps us past it.
			return max(time.Unix(reset, 0).Sub(t.now()), 0) + time.Second, primaryLimit
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests || mentionsSecondaryLimit(resp) {
		return secondaryFallback << min(guesses, 5), secondaryGuess
	}
	return 0, notLimited
}

func (t *retrying) retryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(t.now()), 0), true
	}
	return 0, false
}

// mentionsSecondaryLimit peeks at a 403's body for GitHub's wording, and
// puts the body back for whoever reads the answer.
func mentionsSecondaryLimit(resp *http.Response) bool {
	if resp.StatusCode != http.StatusForbidden || resp.Body == nil {
		return false
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	if err != nil {
		return false
	}
	text := strings.ToLower(string(head))
	return strings.Contains(text, "secondary rate limit") || strings.Contains(text, "abuse detection")
}

// retryable: reads and deletes are idempotent; of the POSTs only the token
// creations are repeated (a second token is harmless).
func retryable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodDelete, http.MethodPut:
		return true
	case http.MethodPost:
		p := req.URL.Path
		return strings.HasSuffix(p, "/actions/runners/registration-token") ||
			strings.HasSuffix(p, "/actions/runners/remove-token") ||
			strings.HasSuffix(p, "/access_tokens")
	}
	return false
}

// backoff is exponential from 250 ms (capped at 16 s) with jitter: a
// uniform pick in [d/2, 3d/2).
func (t *retrying) backoff(attempt int) time.Duration {
	d := 250 * time.Millisecond << min(attempt-1, 6)
	return d/2 + time.Duration(t.jitter(int64(d)))
}

func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// cancelOnClose ends an attempt's context once its answer has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// sleepContext is the default Config.Sleep.
func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func defaultJitter(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return rand.Int64N(n)
}

// bearer authenticates with a plain token.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
