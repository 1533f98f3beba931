package fakegithub

import (
	"net/http"
	"strings"
	"time"
)

// Re-running a workflow run's failed jobs:
// POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs
// (operation actions/re-run-workflow-failed-jobs in GitHub's description,
// @octokit/openapi api.github.com.json: an optional body, 201 with an
// empty object; "Re-run all of the failed jobs and their dependent jobs in
// a workflow run"; enabled for GitHub Apps, category actions).
//
// The fake's workflow runs hold one job each: a job's workflow run id is
// its own id, and a re-run's job keeps its workflow run's id, as a new
// attempt of the run does on GitHub (the run's id stays, run_attempt
// grows). What the description does not say, and the fake answers as
// users report GitHub to:
//   - the permission: the description names none for Apps (only the repo
//     scope for OAuth and classic tokens); the fake asks the installation
//     for actions: write, the permission of the actions category's writes
//     in GitHub's permission tables (not part of the description), and
//     answers 403 "Resource not accessible by integration" without it;
//   - a run still in progress: 403 (cli/cli issue 9221: `gh run rerun
//     --failed` of a run not finished yet; NVIDIA-NeMo/RL pull request
//     1193: "The workflow run containing this job is already running" for
//     a job's re-run), with "This workflow is already running" as
//     metabase/metabase pull request 70916 reports for the run's failed
//     jobs; the description documents no 403 for this operation at all;
//   - a run with no failed job: 403 "This workflow run cannot be
//     retried" (metabase/metabase pull request 70916), the fake's guess
//     of which refusal applies.

// rerunFailedJobs serves POST .../actions/runs/{run_id}/rerun-failed-jobs.
func (s *Server) rerunFailedJobs(w http.ResponseWriter, r *http.Request) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owner := ownerOf(r)
	if status, body, ok := s.ownerDenied(r, owner); !ok {
		return status, body
	}
	if !s.tokenMay(r, "actions", "write") {
		return forbidden()
	}
	run := idParam(r, "run_id")
	var jobs []*Job
	for _, j := range s.jobs {
		if j.workflowRun() == run && s.jobOwnedBy(j, owner) && j.RerunAs == 0 {
			jobs = append(jobs, j)
		}
	}
	if len(jobs) == 0 {
		return notFound()
	}
	var failed []*Job
	for _, j := range jobs {
		switch {
		case j.State == JobQueued || j.State == JobRunning:
			return http.StatusForbidden, apiError(http.StatusForbidden, "This workflow is already running")
		case j.Result == "failed" || j.Result == "cancelled":
			failed = append(failed, j)
		}
	}
	if len(failed) == 0 {
		return http.StatusForbidden, apiError(http.StatusForbidden, "This workflow run cannot be retried")
	}
	for _, j := range failed {
		s.nextID++
		again := &Job{ID: s.nextID, Label: j.Label, Repo: j.Repo, Script: j.Script, Post: j.Post, State: JobQueued, Queued: time.Now(),
			WorkflowRun: j.workflowRun(), RerunOf: j.ID, done: make(chan struct{})}
		j.RerunAs = again.ID
		s.jobs[again.ID] = again
		if set := s.ss.sets[j.ScaleSetID]; set != nil && j.ScaleSetID != 0 {
			s.toScaleSet(again, set, s.ss.jobs[j.ID].owner)
		} else {
			s.routeToScaleSet(again)
		}
	}
	s.wake()
	return http.StatusCreated, map[string]any{}
}

// workflowRun is the id of the job's workflow run.
func (j *Job) workflowRun() int64 {
	if j.WorkflowRun != 0 {
		return j.WorkflowRun
	}
	return j.ID
}

// jobOwnedBy: the job is of repository owner ("org/repo"). Called with s.mu held.
func (s *Server) jobOwnedBy(j *Job, owner string) bool {
	org, repo, _ := strings.Cut(owner, "/")
	if !strings.EqualFold(j.Repo, repo) {
		return false
	}
	if sj := s.ss.jobs[j.ID]; sj != nil {
		return sameOwner(sj.owner, org)
	}
	return true // a label job: the fake keeps no owner for it
}

// tokenMay: the request's installation token carries the permission at
// level (a personal access token may everything). Called with s.mu held.
func (s *Server) tokenMay(r *http.Request, permission, level string) bool {
	tok := strings.TrimPrefix(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), "token ")
	if s.pats[tok] {
		return true
	}
	got := s.permissions()[permission]
	return got == level || level == "read" && got == "write"
}

// permissions are the App's permissions now (appPermissions, less what
// WithoutAppPermission took away). Called with s.mu held.
func (s *Server) permissions() map[string]string {
	out := map[string]string{}
	for k, v := range appPermissions {
		if !s.withheld[k] {
			out[k] = v
		}
	}
	return out
}

// WithoutAppPermission takes a permission away from the App, as an owner
// who has not accepted an App's new permission leaves its installation:
// its tokens carry the others only.
func (s *Server) WithoutAppPermission(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.withheld[name] = true
}

// WithAppPermission gives a permission WithoutAppPermission took away
// back to the App, as the owner accepting the App's new permissions does.
func (s *Server) WithAppPermission(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.withheld, name)
}

// runnersDenied answers a runner write about owner (a registration or
// remove token, a just-in-time configuration) as GitHub does when the
// installation's token lacks the permission over owner's runners:
// organization_self_hosted_runners for an organization's ("view and
// manage GitHub Actions self-hosted runners available to an
// organization", the app-permissions schema of GitHub's description,
// @octokit/openapi api.github.com.json), administration for a
// repository's. The operations' descriptions name no App permission and
// document no 403: the fake answers 403 "Resource not accessible by
// integration", GitHub's answer to an integration's token without the
// permission an operation needs, as it does for rerun above. Called with
// s.mu held.
func (s *Server) runnersDenied(r *http.Request, owner string) (status int, body any, ok bool) {
	permission := "organization_self_hosted_runners"
	if strings.Contains(owner, "/") {
		permission = "administration"
	}
	if s.tokenMay(r, permission, "write") {
		return 0, nil, true
	}
	status, body = forbidden()
	return status, body, false
}

// LoseJob settles a job as GitHub settles one whose runner went away
// mid-job (an interrupted spot instance), as abandon does: failed. How
// soon GitHub does so after losing the runner is not documented; tests
// call it.
func (s *Server) LoseJob(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil || j.State == JobCompleted || j.State == JobFailed {
		return
	}
	j.State, j.ExitCode, j.Result, j.Output, j.Finished = JobFailed, -1, "failed", j.Output+"The runner has lost communication with the server.", time.Now()
	close(j.done)
	s.ssJobEnded(j)
	s.wake()
}
