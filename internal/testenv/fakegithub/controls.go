package fakegithub

import (
	"strings"
	"time"
)

// What tests set on the fake GitHub and read of its traffic: the clock, a
// runner's offline delay, refused listeners, tokens and runner groups,
// injected faults, the rate-limit budget, and request counts and issued
// tokens.

// Fault makes matching requests fail or slow down. It applies to the REST
// API (and to the runner protocol only when Path names /_fake/).
type Fault struct {
	Method string // "" any
	Path   string // a substring of the request path ("" any)
	// Count is how many requests it hits; 0: no bound (until ClearFaults).
	Count int
	// Fraction, when set, is the probability that a matching request is
	// hit; 0: every one.
	Fraction float64

	Status     int           // 500-599; 403 or 429 for rate limits; 0: latency only
	Primary    bool          // rate limit: the hourly budget (x-ratelimit-remaining 0)
	Secondary  bool          // rate limit: a secondary limit
	RetryAfter int           // seconds, sent as Retry-After (implies Secondary)
	Latency    time.Duration // added before answering
}

// SetClock replaces the server's clock.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// SetOfflineAfter sets how long a runner stays online without hearing from
// its listener.
func (s *Server) SetOfflineAfter(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offlineAfter = d
}

// RefuseListeners makes the next n listeners that connect end at once,
// without a job: their session is refused with message (HTTP 403), and
// the fake listener exits 1 saying "An error occurred: <message>", as a
// real one does for a version GitHub no longer accepts or a library it
// lacks. The registration stays.
func (s *Server) RefuseListeners(n int, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuseListeners, s.refusal = n, message
}

// AddToken makes a personal access token valid for every organization of
// the fake.
func (s *Server) AddToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pats[token] = true
}

// AddRunnerGroup adds a runner group to an organization.
func (s *Server) AddRunnerGroup(org, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(org)
	if _, ok := s.groups[key]; !ok {
		s.groups[key] = []string{"Default"}
	}
	s.groups[key] = append(s.groups[key], name)
}

// Inject adds a fault.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes the faults not used up yet.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// SetRateBudget sets the primary rate limit's remaining requests and its
// reset time.
func (s *Server) SetRateBudget(remaining int, reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateUsed = s.rateLimit - remaining
	s.rateReset = reset
}

// RateRemaining is what the next answer's x-ratelimit-remaining will be
// before it is counted.
func (s *Server) RateRemaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rollRateWindow()
	return max(s.rateLimit-s.rateUsed, 0)
}

// Count returns how many requests matched a route pattern, e.g.
// "GET /orgs/{org}/actions/runners" (GHES-prefixed requests count under the
// same pattern).
func (s *Server) Count(pattern string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[pattern]
}

// IssuedTokens lists every installation, registration and remove token
// the server ever issued: what must never reach an instance of a
// just-in-time pool.
func (s *Server) IssuedTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for t := range s.instTokens {
		out = append(out, t)
	}
	for t := range s.runnerTokens {
		out = append(out, t)
	}
	return out
}

// Counts returns a copy of every route's count.
func (s *Server) Counts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}
