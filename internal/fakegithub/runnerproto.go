package fakegithub

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The private protocol of the fake runner. The real runner talks to
// GitHub's broker with a protocol of its own; our agent never sees it, only
// the config.sh/run.sh contract, so this one is simple.

type registerRequest struct {
	URL     string   `json:"url"`
	Token   string   `json:"token"`
	Name    string   `json:"name"`
	Labels  []string `json:"labels"`
	Replace bool     `json:"replace"`
	Group   string   `json:"group"`
}

// ownerFromURL reads "acme" or "acme/api" from https://github.com/acme/api.
func ownerFromURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return strings.Trim(u.Path, "/")
}

func (s *Server) runnerRegister(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if json.NewDecoder(r.Body).Decode(&req) != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "bad request"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	owner := ownerFromURL(req.URL)
	tok, ok := s.regTokens[req.Token]
	switch {
	case !ok:
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Http response code: NotFound from 'POST /actions/runner-registration' (the registration token is invalid)"})
		return
	case tok.expires.Before(s.now()):
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "the registration token has expired"})
		return
	case tok.owner != owner:
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "the registration token is for " + tok.owner + ", not " + owner})
		return
	}
	for id, rn := range s.runners {
		if rn.owner == owner && rn.name == req.Name {
			if !req.Replace {
				writeJSON(w, http.StatusConflict, map[string]string{"message": "A runner exists with the same name " + req.Name})
				return
			}
			delete(s.runners, id)
		}
	}
	s.nextID++
	rn := &runner{id: s.nextID, owner: owner, name: req.Name, os: "Linux", labels: req.Labels, lastSeen: time.Time{}, credential: randomToken("cred"), group: req.Group}
	s.runners[rn.id] = rn
	writeJSON(w, http.StatusOK, map[string]any{"id": rn.id, "credential": rn.credential, "poolId": 1})
}

func (s *Server) runnerRemove(w http.ResponseWriter, r *http.Request) {
	var req struct {
		URL   string `json:"url"`
		Token string `json:"token"`
		ID    int64  `json:"id"`
	}
	if json.NewDecoder(r.Body).Decode(&req) != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "bad request"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.removeTokens[req.Token]
	owner := ownerFromURL(req.URL)
	if !ok || tok.expires.Before(s.now()) || tok.owner != owner {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "the remove token is invalid, expired or for another owner"})
		return
	}
	if rn, ok := s.runners[req.ID]; ok && rn.owner == owner {
		delete(s.runners, req.ID)
	}
	w.WriteHeader(http.StatusNoContent)
}

// runnerPoll marks the runner online and hands it the oldest queued job of
// one of its labels, waiting up to a second for one.
func (s *Server) runnerPoll(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	deadline := time.Now().Add(time.Second)
	for {
		s.mu.Lock()
		rn, ok := s.runners[id]
		if !ok || r.Header.Get("Authorization") != "Bearer "+rn.credential {
			s.mu.Unlock()
			writeJSON(w, http.StatusNotFound, map[string]string{"message": "runner registration has been deleted from the server"})
			return
		}
		rn.lastSeen = s.now()
		session := r.Header.Get("X-Runner-Session")
		s.abandon(rn, session)
		if !rn.busy && r.Context().Err() == nil {
			if job := s.nextJob(rn); job != nil {
				job.State, job.RunnerID, job.Runner, job.session, job.acked = "running", rn.id, rn.name, session, false
				rn.busy = true
				body := map[string]any{"id": job.ID, "script": job.Script, "repo": job.Repo, "label": job.Label}
				s.mu.Unlock()
				writeJSON(w, http.StatusOK, body)
				return
			}
		}
		wake := s.jobWake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-time.After(time.Until(deadline)):
			w.WriteHeader(http.StatusNoContent)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// abandon settles the job of a runner whose run.sh session changed (it was
// restarted): a job it never acknowledged goes back to the queue, as the
// broker's message would; a job it started fails, as GitHub reports a runner
// that lost communication.
func (s *Server) abandon(rn *runner, session string) {
	if !rn.busy {
		return
	}
	for _, j := range s.jobs {
		if j.State != "running" || j.RunnerID != rn.id || j.session == session {
			continue
		}
		if j.acked {
			j.State, j.ExitCode, j.Output = "failed", -1, "The runner has lost communication with the server."
			close(j.done)
		} else {
			j.State, j.RunnerID, j.Runner = "queued", 0, ""
			s.wake()
		}
		rn.busy = false
	}
}

func (s *Server) jobStart(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok || j.State != "running" || j.session != r.Header.Get("X-Runner-Session") {
		writeJSON(w, http.StatusConflict, map[string]string{"message": "job is not assigned to this session"})
		return
	}
	j.acked = true
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) nextJob(rn *runner) *Job {
	var best *Job
	for _, j := range s.jobs {
		if j.State == "queued" && slices.Contains(rn.labels, j.Label) && (best == nil || j.ID < best.ID) {
			best = j
		}
	}
	return best
}

func (s *Server) jobComplete(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var req struct {
		ExitCode int    `json:"exitCode"`
		Output   string `json:"output"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok || j.State != "running" {
		writeJSON(w, http.StatusConflict, map[string]string{"message": "job is not running"})
		return
	}
	j.State, j.ExitCode, j.Output = "completed", req.ExitCode, req.Output
	if rn, ok := s.runners[j.RunnerID]; ok {
		rn.busy = false
		rn.lastSeen = s.now()
	}
	close(j.done)
	w.WriteHeader(http.StatusNoContent)
}
