package github

import (
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

// RateLimitError says GitHub refused a request for its rate limits and the
// wait was longer than the client may wait.
type RateLimitError struct {
	ResetAt   time.Time
	Secondary bool
}

func (e *RateLimitError) Error() string {
	kind := "primary"
	if e.Secondary {
		kind = "secondary"
	}
	return fmt.Sprintf("GitHub %s rate limit reached; it resets at %s", kind, e.ResetAt.UTC().Format(time.RFC3339))
}

// IsRateLimited reports a rate-limit refusal.
func IsRateLimited(err error) bool {
	var rl *RateLimitError
	return errors.As(err, &rl)
}

// retrying is the http.RoundTripper under every GitHub call: it retries
// server errors and network failures with backoff, waits out rate limits
// that end within maxWait, and notes the remaining quota.
type retrying struct {
	next        http.RoundTripper
	maxAttempts int
	maxWait     time.Duration
	sleep       func(time.Duration)
	now         func() time.Time
	remaining   atomic.Int64
}

func (t *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		r := req
		if attempt > 1 {
			if req.Body != nil && req.GetBody == nil {
				return nil, errors.New("github: cannot retry a request whose body cannot be read again")
			}
			r = req.Clone(req.Context())
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				r.Body = body
			}
		}
		resp, err := t.next.RoundTrip(r)
		if err != nil {
			if attempt >= t.maxAttempts || !retryable(req) || req.Context().Err() != nil {
				return nil, err
			}
			t.sleep(backoff(attempt))
			continue
		}
		if v := resp.Header.Get("X-Ratelimit-Remaining"); v != "" {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				t.remaining.Store(n)
			}
		}
		if wait, limited := t.rateLimited(resp); limited {
			if wait > t.maxWait || attempt >= t.maxAttempts {
				drain(resp)
				return nil, &RateLimitError{ResetAt: t.now().Add(wait), Secondary: resp.Header.Get("Retry-After") != ""}
			}
			drain(resp)
			t.sleep(wait)
			continue
		}
		if resp.StatusCode >= 500 && attempt < t.maxAttempts && retryable(req) {
			drain(resp)
			t.sleep(backoff(attempt))
			continue
		}
		return resp, nil
	}
}

// rateLimited reads GitHub's documented signals: Retry-After on a 403 or 429
// (secondary limits), or x-ratelimit-remaining 0 with x-ratelimit-reset
// (primary limit).
func (t *retrying) rateLimited(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests {
		return 0, false
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if secs, err := strconv.Atoi(v); err == nil {
			return time.Duration(secs) * time.Second, true
		}
	}
	if resp.Header.Get("X-Ratelimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(resp.Header.Get("X-Ratelimit-Reset"), 10, 64); err == nil {
			return max(time.Unix(reset, 0).Sub(t.now()), 0) + time.Second, true
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		return time.Minute, true // documented fallback: wait at least a minute
	}
	return 0, false
}

// retryable: reads, deletes and the token creations are safe to repeat.
func retryable(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodPut:
		return true
	case http.MethodPost:
		p := req.URL.Path
		return strings.HasSuffix(p, "/registration-token") || strings.HasSuffix(p, "/remove-token") || strings.HasSuffix(p, "/access_tokens")
	}
	return false
}

func backoff(attempt int) time.Duration {
	d := 250 * time.Millisecond << min(attempt-1, 6)
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}

func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// bearer adds a plain token.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
