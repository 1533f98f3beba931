package fakegithub

import "time"

// CancelQueuedJob cancels a job no runner has taken yet, as cancelling its
// workflow run does on GitHub ("Canceling a workflow", GitHub Docs: a run
// cancelled while a job waits for a runner ends that job without it
// running). It reports false for a job that is not queued (running or
// settled: cancelling a running job is the runner's business, not this
// one's).
//
// A scale-set job leaves TotalAssignedJobs (the count the listener sizes
// the scale set by) and its session hears JobCompleted, result "canceled"
// and no runner. What the service sends for a job cancelled before a
// runner took it is not documented; the fake sends the message every
// ending job gets (actions/scaleset types.go, JobCompleted), so a
// listener that ignores it still sees the count drop.
func (s *Server) CancelQueuedJob(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil || j.State != JobQueued {
		return false
	}
	j.State, j.ExitCode, j.Result, j.Finished = JobCompleted, -1, "cancelled", time.Now()
	j.Output += "The run was cancelled before a runner took the job."
	close(j.done)
	if sj := s.ss.jobs[id]; sj != nil {
		sj.acquired = false // its pickup bound ends with it (pickupLapsed)
		if set := s.ss.sets[j.ScaleSetID]; set != nil {
			s.ssEvent(set, s.jobMessage("JobCompleted", j))
		}
	}
	s.wake()
	return true
}

// HoldScaleSetJobs stops (true) or resumes handing acquired scale-set jobs
// to runners: a test's hold on the moment between a job's assignment to
// the scale set and a runner taking it, which on GitHub lasts as long as
// the runner takes to poll. Nothing on GitHub holds it; a test uses it to
// act inside that moment without a race (a job cancelled before its runner
// took it).
func (s *Server) HoldScaleSetJobs(hold bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ss.hold = hold
	s.wake()
}

// ScaleSetJobAcquired says whether the scale set's session acquired job id
// (and it is still queued for a runner of it), as GitHub's statistics
// count it among the assigned.
func (s *Server) ScaleSetJobAcquired(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sj, j := s.ss.jobs[id], s.jobs[id]
	return sj != nil && j != nil && sj.acquired && j.State == JobQueued
}
