package github

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v62/github"
)

// Errors the callers tell apart; each wraps GitHub's own message.
var (
	// ErrNotFound: GitHub answered 404 (a runner that is gone, say).
	ErrNotFound = errors.New("not found on GitHub")
	// ErrBusy: GitHub refused to delete a runner that runs a job (422).
	ErrBusy = errors.New("runner is still running a job")
	// ErrUnauthorized: GitHub rejected the credentials (401): a wrong App
	// key or id, an expired JWT, a revoked token.
	ErrUnauthorized = errors.New("GitHub rejected the credentials")
	// ErrNotInstalled: the App has no installation on the owner. Not an
	// ErrNotFound, so that "runner gone" never follows from it.
	ErrNotInstalled = errors.New("GitHub App not installed")
)

// IsNotFound reports a 404.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsBusy reports GitHub refusing to delete a runner that runs a job (422).
func IsBusy(err error) bool { return errors.Is(err, ErrBusy) }

// IsUnauthorized reports GitHub rejecting the credentials (401).
func IsUnauthorized(err error) bool { return errors.Is(err, ErrUnauthorized) }

// classify maps go-github and ghinstallation errors to ours, keeping the
// original text (method, URL, status and GitHub's message).
func classify(err error) error {
	if err == nil {
		return nil
	}
	if IsRateLimited(err) {
		return err
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		case http.StatusUnprocessableEntity:
			// Busy only where GitHub documents it: deleting a runner that
			// runs a job. Elsewhere a 422 is bad input (the OpenAPI
			// descriptions' "Validation failed, or the endpoint has been
			// spammed"), and a caller waiting for "busy" to pass would
			// wait for nothing.
			if er.Response.Request != nil && er.Response.Request.Method == http.MethodDelete {
				return fmt.Errorf("%w: %w", ErrBusy, err)
			}
		case http.StatusUnauthorized:
			return fmt.Errorf("%w: %w", ErrUnauthorized, err)
		}
	}
	// An installation token refused by GitHub (the App's JWT was rejected).
	var he *ghinstallation.HTTPError
	if errors.As(err, &he) && he.Response != nil && he.Response.StatusCode == http.StatusUnauthorized {
		return fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	// go-github's own rate-limit errors, should one get through.
	var rl *gh.RateLimitError
	if errors.As(err, &rl) {
		return &RateLimitError{Status: http.StatusForbidden, ResetAt: rl.Rate.Reset.Time, Wait: time.Until(rl.Rate.Reset.Time)}
	}
	var ab *gh.AbuseRateLimitError
	if errors.As(err, &ab) {
		return &RateLimitError{Status: http.StatusForbidden, Secondary: true, ResetAt: time.Now().Add(ab.GetRetryAfter()), Wait: ab.GetRetryAfter()}
	}
	return err
}
