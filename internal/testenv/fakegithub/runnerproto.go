package fakegithub

import (
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The runner side. config.sh first exchanges its registration (or remove)
// token at POST /actions/runner-registration, as the real runner does
// ("Authorization: RemoteAuth <token>", body {url, runner_event}); GitHub
// answers 404 for a token that is invalid, expired or for another owner.
// What follows is private to the fake (the real runner talks to GitHub's
// Actions service with a protocol of its own, which our agent never sees):
//
//	POST   /_fake/runners               register (tenant token): {name, labels, replace, group}
//	DELETE /_fake/runners/{id}          deregister (tenant token of a remove)
//	POST   /_fake/runners/{id}/session  run.sh starts listening: online
//	DELETE /_fake/runners/{id}/session  run.sh stops: offline at once
//	POST   /_fake/runners/{id}/heartbeat
//	POST   /_fake/runners/{id}/poll     long poll for the next job of the runner's labels
//	POST   /_fake/jobs/{id}/start       the runner acknowledges a job it was handed
//	POST   /_fake/jobs/{id}/complete    {exitCode, result, output}
//
// The listener authenticates with "Bearer <secret>" (the secret config.sh
// got at registration) and names its session in X-Runner-Session.

const sessionHeader = "X-Runner-Session"

// ownerFromURL reads "acme" or "acme/api" from https://github.com/acme/api.
func ownerFromURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.Trim(u.Path, "/")
}

func (s *Server) runnerRegistration(w http.ResponseWriter, r *http.Request) (int, any) {
	var req struct {
		URL   string `json:"url"`
		Event string `json:"runner_event"`
	}
	if err := decode(r, &req); err != nil {
		return http.StatusBadRequest, apiError(http.StatusBadRequest, err.Error())
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "RemoteAuth ")
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.runnerTokens[tok]
	owner := ownerFromURL(req.URL)
	if !ok || !info.expires.After(s.now()) || info.purpose != req.Event || !sameOwner(info.owner, owner) {
		return notFound()
	}
	if msg := s.registrationRefused(r); msg != "" && req.Event == "register" {
		return http.StatusNotFound, apiError(http.StatusNotFound, msg)
	}
	exp := s.now().Add(tokenTTL)
	tenant := newTenantToken(s.now(), exp) // a JWT: the scale set client reads its expiry (scaleset_routes.go)
	s.tenantTokens[tenant] = tokenInfo{owner: info.owner, purpose: info.purpose, expires: exp}
	return http.StatusOK, map[string]any{"url": "http://" + r.Host + "/_fake/", "token": tenant, "token_schema": "OAuthAccessToken"}
}

// tenant returns the unexpired tenant token of the request, for purpose.
func (s *Server) tenant(r *http.Request, purpose string) (tokenInfo, bool) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	info, ok := s.tenantTokens[tok]
	return info, ok && info.purpose == purpose && info.expires.After(s.now())
}

func (s *Server) runnerAdd(w http.ResponseWriter, r *http.Request) (int, any) {
	var req struct {
		Name    string   `json:"name"`
		Labels  []string `json:"labels"`
		Replace bool     `json:"replace"`
		Group   string   `json:"group"`
		OS      string   `json:"os"`
		// DisableUpdate is kept on the runner's record, and answered,
		// unless the server does not support it (NoDisableUpdate).
		DisableUpdate bool `json:"disableUpdate"`
	}
	if err := decode(r, &req); err != nil {
		return http.StatusBadRequest, apiError(http.StatusBadRequest, err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.tenant(r, "register")
	if !ok {
		return http.StatusUnauthorized, apiError(http.StatusUnauthorized, "Bad credentials")
	}
	group := "Default"
	if !strings.Contains(info.owner, "/") && req.Group != "" {
		if !slices.Contains(s.groups[strings.ToLower(info.owner)], req.Group) {
			return http.StatusNotFound, apiError(http.StatusNotFound, `Could not find any self-hosted runner group named "`+req.Group+`".`)
		}
		group = req.Group
	}
	if req.OS == "" {
		req.OS = "Linux"
	}
	for _, rn := range s.runners {
		if !sameOwner(rn.owner, info.owner) || !strings.EqualFold(rn.name, req.Name) {
			continue
		}
		if !req.Replace {
			return http.StatusConflict, apiError(http.StatusConflict, "A runner exists with the same name "+req.Name+".")
		}
		// --replace updates the existing runner: same id, new labels and
		// key; a listener holding the old key is cut off.
		s.abandon(rn, "")
		rn.labels, rn.group, rn.os, rn.busy, rn.session, rn.lastSeen, rn.permanent = req.Labels, group, req.OS, false, "", time.Time{}, false
		rn.secret = randomToken("secret_")
		s.registered(rn)
		return http.StatusOK, map[string]any{"id": rn.id, "name": rn.name, "secret": rn.secret, "poolId": 1, "poolName": group, "replaced": true,
			"disableUpdate": req.DisableUpdate && !s.noDisableUpdate}
	}
	s.nextID++
	rn := &runner{id: s.nextID, owner: info.owner, name: req.Name, os: req.OS, labels: req.Labels, group: group, secret: randomToken("secret_")}
	s.runners[rn.id] = rn
	s.registered(rn)
	return http.StatusOK, map[string]any{"id": rn.id, "name": rn.name, "secret": rn.secret, "poolId": 1, "poolName": group,
		"disableUpdate": req.DisableUpdate && !s.noDisableUpdate}
}

func (s *Server) runnerDelete(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.tenant(r, "remove")
	if !ok {
		return http.StatusUnauthorized, apiError(http.StatusUnauthorized, "Bad credentials")
	}
	rn, ok := s.runners[idParam(r, "id")]
	if !ok || !sameOwner(rn.owner, info.owner) {
		return notFound()
	}
	if rn.busy {
		return busyRunner(rn)
	}
	s.abandon(rn, "")
	delete(s.runners, rn.id)
	s.unregistered(rn.id, "runner")
	s.wake() // a listener long-polling for this runner learns at once
	return http.StatusNoContent, nil
}

// listener authenticates the runner's listener. A runner that is gone
// answers 404, a key replaced by a later registration 401; the fake runner
// takes both as "the registration has been deleted".
func (s *Server) listener(r *http.Request) (*runner, int, any) {
	rn, ok := s.runners[idParam(r, "id")]
	if !ok {
		return nil, http.StatusNotFound, apiError(http.StatusNotFound, "The runner registration has been deleted from the server.")
	}
	if r.Header.Get("Authorization") != "Bearer "+rn.secret {
		return nil, http.StatusUnauthorized, apiError(http.StatusUnauthorized, "invalid_client")
	}
	return rn, 0, nil
}

// poll hands the runner the oldest queued job of one of its labels,
// waiting a little for one; it also keeps the runner online.
func (s *Server) poll(w http.ResponseWriter, r *http.Request) (int, any) {
	// Read the body, so that the server watches the connection and a
	// listener that dies mid-poll cancels the request: its poll must
	// neither keep the runner online nor be handed a job.
	io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	deadline := time.Now().Add(s.pollWait())
	s.mu.Unlock()
	for {
		s.mu.Lock()
		s.expireJIT() // an idle just-in-time runner's listener learns here
		rn, status, body := s.listener(r)
		if rn == nil {
			s.mu.Unlock()
			return status, body
		}
		session := r.Header.Get(sessionHeader)
		if !s.ownSession(rn, r) {
			s.mu.Unlock()
			return sessionInvalid()
		}
		if r.Context().Err() != nil {
			s.mu.Unlock()
			return http.StatusNoContent, nil
		}
		rn.lastSeen = s.now()
		if msg := s.versionRefused(r); msg != "" {
			s.mu.Unlock()
			return brokerError(http.StatusForbidden, kindVersionTooOld, msg)
		}
		if msg := s.updateFor(r, rn, session); msg != nil && !rn.busy {
			s.mu.Unlock()
			return http.StatusOK, msg
		}
		if rn.busy {
			// A listener polls only between jobs: whatever it holds, it
			// never got (the answer was lost) or could not report.
			s.abandon(rn, "")
		}
		if r.Context().Err() == nil {
			if job := s.nextJob(rn); job != nil {
				job.State, job.RunnerID, job.Runner, job.session, job.acked, job.Started = JobRunning, rn.id, rn.name, session, false, time.Now()
				job.RunnerVersion = runnerVersion(r)
				rn.busy = true
				s.mu.Unlock()
				return http.StatusOK, map[string]any{"id": job.ID, "script": job.Script, "post": job.Post, "repo": job.Repo, "label": job.Label}
			}
		}
		wake := s.jobWake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-time.After(time.Until(deadline)):
			return http.StatusNoContent, nil
		case <-r.Context().Done():
			return http.StatusNoContent, nil
		}
	}
}

// nextJob: the oldest queued job the runner may take: one whose label it
// has (GitHub compares labels without regard to case), or, for a runner
// of a scale set, one its scale set acquired (mayTake, scaleset_jobs.go).
func (s *Server) nextJob(rn *runner) *Job {
	var best *Job
	for _, j := range s.jobs {
		if j.State != JobQueued || best != nil && j.ID > best.ID {
			continue
		}
		if s.mayTake(rn, j) {
			best = j
		}
	}
	return best
}

// abandon settles the job a runner holds for a session other than keep: a
// job never acknowledged goes back to the queue (as an undelivered message
// would); a started one fails, as GitHub reports a runner that lost
// communication.
func (s *Server) abandon(rn *runner, keep string) {
	for _, j := range s.jobs {
		if j.State != JobRunning || j.RunnerID != rn.id || keep != "" && j.session == keep {
			continue
		}
		if j.acked {
			j.State, j.ExitCode, j.Result, j.Output, j.Finished = JobFailed, -1, "failed", j.Output+"The runner has lost communication with the server.", time.Now()
			close(j.done)
			s.ssJobEnded(j)
		} else {
			j.State, j.RunnerID, j.Runner, j.session, j.Started = JobQueued, 0, "", "", time.Time{}
			s.ssJobReturned(j)
			s.wake()
		}
		rn.busy = false
	}
}

// job returns the job of the request if the request's runner session holds it.
func (s *Server) heldJob(r *http.Request) (*Job, *runner, bool) {
	j, ok := s.jobs[idParam(r, "id")]
	if !ok || j.State != JobRunning || j.session != r.Header.Get(sessionHeader) {
		return nil, nil, false
	}
	rn, ok := s.runners[j.RunnerID]
	if !ok || r.Header.Get("Authorization") != "Bearer "+rn.secret {
		return nil, nil, false
	}
	return j, rn, true
}

func (s *Server) jobStart(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, rn, ok := s.heldJob(r)
	if !ok {
		return http.StatusConflict, apiError(http.StatusConflict, "The job is not assigned to this session.")
	}
	j.acked = true
	rn.lastSeen = s.now()
	s.ssJobStarted(j)
	return http.StatusNoContent, nil
}

func (s *Server) jobComplete(w http.ResponseWriter, r *http.Request) (int, any) {
	var req struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
		Output   string `json:"output"`
	}
	if err := decode(r, &req); err != nil {
		return http.StatusBadRequest, apiError(http.StatusBadRequest, err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	j, rn, ok := s.heldJob(r)
	if !ok {
		return http.StatusConflict, apiError(http.StatusConflict, "The job is not assigned to this session.")
	}
	if req.Result == "" {
		req.Result = "succeeded"
		if req.ExitCode != 0 {
			req.Result = "failed"
		}
	}
	j.State, j.ExitCode, j.Result, j.Output, j.Finished = JobCompleted, req.ExitCode, req.Result, req.Output, time.Now()
	rn.busy = false
	rn.lastSeen = s.now()
	close(j.done)
	s.ssJobEnded(j)
	s.jobDone(rn)
	s.wake()
	return http.StatusNoContent, nil
}
