package fakegithub

import (
	"context"
	"fmt"
	"time"
)

// The jobs tests queue for runners by label, and waiting for their
// outcome.

// Job states.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobCompleted = "completed" // the runner reported a result
	JobFailed    = "failed"    // the runner was lost during the job
)

// Job is a queued unit of work for runners with its label.
type Job struct {
	ID    int64
	Label string
	// Owner is the organization of the job's repository Repo (its name);
	// "" for EnqueueJob's jobs, taken for a repository of the runner's
	// own organization (groupaccess.go). Workflow is its workflow ref
	// ("": none).
	Owner, Repo, Workflow string
	Script                string
	// Post runs after Script however it ended, cancelled too, as an
	// action's post step does (EnqueueJobWithPost).
	Post     string
	State    string // JobQueued, JobRunning, JobCompleted, JobFailed
	RunnerID int64
	Runner   string // the name of the runner that took it
	// RunnerVersion is the version the listener that took it announced
	// in its poll (runnerVersion): what the real runner prints first in
	// the job's log, "Current runner version: '<v>'"
	// (src/Runner.Worker/JobExtension.cs, InitializeJob).
	RunnerVersion string
	ExitCode      int
	Result        string // succeeded, failed or cancelled, once completed
	ScaleSetID    int    // the scale set the job is for (0: any runner with its label)
	// WorkflowRun is the id of the job's workflow run (0: the job's own
	// id); RerunOf is the job a re-run copied, RerunAs the job that
	// re-ran this one (0: none), rerun.go.
	WorkflowRun, RerunOf, RerunAs int64
	Output                        string
	// When it was queued, handed to a runner (zero again if the runner
	// never confirmed it and it went back to the queue) and settled:
	// wall-clock times, for the timings the sandbox and benchmarks show.
	Queued, Started, Finished time.Time
	done                      chan struct{}
	session                   string // the listener session that took it
	acked                     bool   // the runner confirmed it started the job
}

// EnqueueJob queues a job for runners with label (compared without regard
// to case, as GitHub does); script runs under bash -c in the runner's
// <work>/repo/repo folder. A label naming a scale set makes it a job of
// that scale set (scaleset_jobs.go).
func (s *Server) EnqueueJob(label, script string) int64 {
	return s.EnqueueJobWithPost(label, script, "")
}

// EnqueueJobWithPost queues a job with a post step: post runs after
// script however it ended, cancelled by a stopping runner too (a job's
// post steps and always() steps run after a cancellation: actions/runner
// src/Runner.Worker/StepsRunner.cs), its output appended to the job's.
func (s *Server) EnqueueJobWithPost(label, script, post string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	s.jobs[s.nextID] = &Job{ID: s.nextID, Label: label, Repo: "repo", Script: script, Post: post, State: JobQueued, Queued: time.Now(), done: make(chan struct{})}
	s.routeToScaleSet(s.jobs[s.nextID])
	s.wake()
	return s.nextID
}

// Job returns a copy of a job.
func (s *Server) Job(id int64) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return Job{}, false
	}
	return *j, true
}

// WaitJob waits until a job completed (or failed) and returns it.
func (s *Server) WaitJob(id int64, timeout time.Duration) (Job, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.WaitJobContext(ctx, id)
}

// WaitJobContext waits until a job completed (or failed), or ctx ends.
func (s *Server) WaitJobContext(ctx context.Context, id int64) (Job, error) {
	s.mu.Lock()
	j, ok := s.jobs[id]
	s.mu.Unlock()
	if !ok {
		return Job{}, fmt.Errorf("no job %d", id)
	}
	select {
	case <-j.done:
		got, _ := s.Job(id)
		return got, nil
	case <-ctx.Done():
		got, _ := s.Job(id)
		return got, fmt.Errorf("job %d still %s: %w", id, got.State, ctx.Err())
	}
}
