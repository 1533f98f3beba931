package fakegithub

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Scale-set jobs. A job for a scale set (EnqueueScaleSetJob, or
// EnqueueJob with a label that is a scale set's name or label) is
// announced to the scale set's session (JobAvailable); once the session
// acquires it (acquirejobs) it is assigned to the scale set (JobAssigned;
// TotalAssignedJobs counts it from then until it ends, as ARC's listener
// reads that count as the runners it needs) and only a runner of that
// scale set may take it: never a runner that merely has the label, never
// a runner of another scale set. JobStarted follows when the runner
// starts it, JobCompleted when it ends, however it ends. A job acquired
// but not taken by a runner of the scale set within
// ScaleSetOptions.JobPickup is requeued (JobAvailable again), at most
// MaxRequeues times, then cancelled (JobCompleted, result "canceled").

// EnqueueScaleSetJob queues a job for the scale set named name of owner
// (the organization, or the repository owner/repo when the scale set is
// the repository's) from repository repo; script runs as EnqueueJob's
// does. It panics if there is no such scale set.
func (s *Server) EnqueueScaleSetJob(owner, repo, name, script string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var set *scaleSet
	for _, c := range s.ss.ordered() {
		if strings.EqualFold(c.name, name) && (sameOwner(c.owner, owner) || sameOwner(c.owner, owner+"/"+repo)) {
			set = c
			break
		}
	}
	if set == nil {
		panic(fmt.Sprintf("fakegithub: %s has no scale set named %q", owner, name))
	}
	s.nextID++
	org, _, _ := strings.Cut(owner, "/")
	j := &Job{ID: s.nextID, Label: name, Owner: org, Repo: repo, Workflow: defaultWorkflow(org, repo), Script: script, State: JobQueued, Queued: time.Now(), done: make(chan struct{})}
	s.jobs[j.ID] = j
	if s.admits(set.owner, set.group, j) {
		// A scale set hears only of the jobs its runner group admits
		// (groupaccess.go); any other stays queued, for a runner with
		// the label whose group admits it.
		s.toScaleSet(j, set, owner)
	}
	s.wake()
	return j.ID
}

// routeToScaleSet makes a job EnqueueJob queued a scale-set job when its
// label is a scale set's name or one of its labels (the oldest such
// scale set whose runner group admits the job: groupaccess.go). Called
// with s.mu held.
func (s *Server) routeToScaleSet(j *Job) {
	for _, set := range s.ss.ordered() {
		if strings.EqualFold(set.name, j.Label) || slices.ContainsFunc(set.labels, func(l string) bool { return strings.EqualFold(l, j.Label) }) {
			org, repo, isRepo := strings.Cut(set.owner, "/")
			if isRepo && j.Owner == "" {
				j.Repo = repo
			}
			if !s.admits(set.owner, set.group, j) {
				continue
			}
			s.toScaleSet(j, set, org)
			return
		}
	}
}

func (s *Server) toScaleSet(j *Job, set *scaleSet, owner string) {
	org, _, _ := strings.Cut(owner, "/")
	j.ScaleSetID = set.id
	s.ss.jobs[j.ID] = &ssJob{owner: org}
	s.ssEvent(set, s.jobMessage("JobAvailable", j))
}

// ssEvent queues a job message for the scale set's session, if it has
// one: the real service's handling of messages while no listener holds a
// session is not documented; the fake drops them, and a new session hears
// of every job still available (ssSessionCreate).
func (s *Server) ssEvent(set *scaleSet, m map[string]any) {
	if set.session != nil {
		set.session.pending = append(set.session.pending, m)
	}
	s.wake()
}

// jobGUID: the service's job ids are GUIDs; the fake's spells the job id.
func jobGUID(id int64) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", id) }

// jobMessage is one entry of a message's batch, as the client decodes it
// (types.go, JobMessageBase and JobAvailable, JobAssigned, JobStarted,
// JobCompleted; client.go, parseRunnerScaleSetMessageResponse). The
// workflow fields are the fake's own; the runner request id is the job's.
func (s *Server) jobMessage(kind string, j *Job) map[string]any {
	sj := s.ss.jobs[j.ID]
	m := map[string]any{
		"messageType": kind, "runnerRequestId": j.ID, "repositoryName": j.Repo, "ownerName": sj.owner,
		"jobId": jobGUID(j.ID), "jobWorkflowRef": cmp.Or(j.Workflow, defaultWorkflow(sj.owner, j.Repo)),
		"jobDisplayName": fmt.Sprintf("job %d", j.ID), "workflowRunId": j.workflowRun(), "eventName": "workflow_dispatch",
		"requestLabels": []string{j.Label}, "queueTime": j.Queued.UTC(), "scaleSetAssignTime": sj.assigned.UTC(),
		"runnerAssignTime": j.Started.UTC(), "finishTime": j.Finished.UTC(),
	}
	switch kind {
	case "JobAvailable":
		m["acquireJobUrl"] = fmt.Sprintf("%s/%d/acquirejobs", ssRoot, j.ScaleSetID)
	case "JobStarted":
		m["runnerId"], m["runnerName"] = j.RunnerID, j.Runner
	case "JobCompleted":
		// Results as the service's TaskResult names them, in lower case
		// ("succeeded", "failed", "canceled"); the values the service
		// sends are not documented.
		result := j.Result
		if result == "cancelled" {
			result = "canceled"
		}
		m["result"], m["runnerId"], m["runnerName"] = result, j.RunnerID, j.Runner
	}
	return m
}

// ssStats are a scale set's statistics (types.go,
// RunnerScaleSetStatistic). Available: queued, not acquired; acquired:
// acquired, not yet taken by a runner; assigned: acquired or running (a
// job is assigned to the scale set from its acquisition until it ends);
// runners: the scale set's registered runners, busy or idle. The
// service's exact definitions are not documented.
func (s *Server) ssStats(set *scaleSet) map[string]any {
	var available, acquired, running, registered, busy int
	for _, j := range s.jobs {
		switch {
		case j.ScaleSetID != set.id:
		case j.State == JobQueued && s.ss.jobs[j.ID].acquired:
			acquired++
		case j.State == JobQueued:
			available++
		case j.State == JobRunning:
			running++
		}
	}
	for id, rn := range s.runners {
		if s.ss.runners[id] == set.id {
			registered++
			if rn.busy {
				busy++
			}
		}
	}
	return map[string]any{
		"totalAvailableJobs": available, "totalAcquiredJobs": acquired, "totalAssignedJobs": acquired + running,
		"totalRunningJobs": running, "totalRegisteredRunners": registered, "totalBusyRunners": busy, "totalIdleRunners": registered - busy,
	}
}

func (s *Server) ssJobsOf(set *scaleSet, state string) []*Job {
	var out []*Job
	for _, j := range s.jobs {
		if j.ScaleSetID == set.id && j.State == state {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *Job) int { return int(a.ID - b.ID) })
	return out
}

// acquire assigns a job to the scale set and starts its pickup bound.
func (s *Server) acquire(set *scaleSet, id int64) bool {
	j, sj := s.jobs[id], s.ss.jobs[id]
	if j == nil || sj == nil || j.ScaleSetID != set.id || j.State != JobQueued || sj.acquired {
		return false
	}
	sj.acquired, sj.assigned = true, time.Now()
	sj.gen++
	gen := sj.gen
	s.ssEvent(set, s.jobMessage("JobAssigned", j))
	time.AfterFunc(s.ss.opts.JobPickup, func() { s.pickupLapsed(id, gen) })
	return true
}

// pickupLapsed: the job acquired (for the gen-th time) was not taken by a
// runner in time: requeued, or cancelled after MaxRequeues requeues.
func (s *Server) pickupLapsed(id int64, gen int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, sj := s.jobs[id], s.ss.jobs[id]
	if j == nil || sj == nil || sj.gen != gen || !sj.acquired || j.State != JobQueued {
		return
	}
	sj.acquired = false
	set := s.ss.sets[j.ScaleSetID]
	if sj.requeues >= MaxRequeues {
		j.State, j.ExitCode, j.Result, j.Finished = JobCompleted, -1, "cancelled", time.Now()
		j.Output += fmt.Sprintf("No runner of the scale set picked the job up; cancelled after %d requeues.", sj.requeues)
		close(j.done)
		if set != nil {
			s.ssEvent(set, s.jobMessage("JobCompleted", j))
		}
		s.wake()
		return
	}
	sj.requeues++
	if set != nil {
		s.ssEvent(set, s.jobMessage("JobAvailable", j))
	}
	s.wake()
}

// mayTake says whether runner rn may take job j: a runner of a scale set
// only its scale set's acquired jobs (its group admitted them when they
// were routed to it), any other runner only jobs of no scale set, with a
// label it has, that its runner group admits (groupaccess.go). Called
// with s.mu held.
func (s *Server) mayTake(rn *runner, j *Job) bool {
	set := s.ss.runners[rn.id]
	if set == 0 && j.ScaleSetID == 0 {
		return slices.ContainsFunc(rn.labels, func(l string) bool { return strings.EqualFold(l, j.Label) }) && s.admits(rn.owner, rn.group, j)
	}
	return set != 0 && j.ScaleSetID == set && s.ss.jobs[j.ID].acquired && !s.ss.hold
}

// ssJobStarted, ssJobEnded and ssJobReturned tell a scale-set job's
// scale set what became of it. Called with s.mu held.
func (s *Server) ssJobStarted(j *Job) {
	if set := s.ss.sets[j.ScaleSetID]; set != nil && j.ScaleSetID != 0 {
		s.ssEvent(set, s.jobMessage("JobStarted", j))
	}
}

func (s *Server) ssJobEnded(j *Job) {
	if set := s.ss.sets[j.ScaleSetID]; set != nil && j.ScaleSetID != 0 {
		s.ssEvent(set, s.jobMessage("JobCompleted", j))
	}
}

// ssJobReturned: a runner was handed the job but never started it (its
// listener died): the job is available again, to be acquired anew.
func (s *Server) ssJobReturned(j *Job) {
	if sj := s.ss.jobs[j.ID]; sj != nil {
		sj.acquired = false
		if set := s.ss.sets[j.ScaleSetID]; set != nil {
			s.ssEvent(set, s.jobMessage("JobAvailable", j))
		}
	}
}

// ssGenerateJIT registers a just-in-time runner of the scale set
// (client.go, GenerateJitRunnerConfig: {name, workFolder} →
// {runner, encodedJITConfig}). The runner is the REST path's just-in-time
// runner (jit.go): ephemeral, one listener, removed when idle or unused,
// and a linger after its job; its labels are the scale set's, its group
// the scale set's, and its
// DisableUpdate the scale set's RunnerSetting. A taken name is refused
// with AgentExistsException, which the client maps to RunnerExistsError
// (errors.go); the status, 409, is not documented.
func (s *Server) ssGenerateJIT(w http.ResponseWriter, r *http.Request) (int, any) {
	var req struct {
		Name       string `json:"name"`
		WorkFolder string `json:"workFolder"`
	}
	if err := decode(r, &req); err != nil {
		return actionsError(http.StatusBadRequest, "ArgumentException", err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	set, st, b := s.ssFind(r)
	if set == nil {
		return st, b
	}
	if req.Name == "" {
		return actionsError(http.StatusBadRequest, "ArgumentException", "The runner name is required.")
	}
	s.expireJIT()
	for _, rn := range s.runners {
		if sameOwner(rn.owner, set.owner) && strings.EqualFold(rn.name, req.Name) {
			return actionsError(http.StatusConflict, "GitHub.DistributedTask.WebApi.AgentExistsException, GitHub.DistributedTask.WebApi",
				"A runner exists with the same name "+req.Name+".")
		}
	}
	if req.WorkFolder == "" {
		req.WorkFolder = "_work"
	}
	s.nextID++
	rn := &runner{id: s.nextID, owner: set.owner, name: req.Name, os: "Linux", labels: slices.Clone(set.labels), group: set.group,
		secret: randomToken("secret_"), jit: true, created: s.now()}
	s.runners[rn.id] = rn
	s.ss.runners[rn.id] = set.id
	s.registered(rn)
	return http.StatusOK, map[string]any{"runner": s.agentJSON(rn), "encodedJITConfig": s.encodeJIT(r, rn, int64(set.groupID), req.WorkFolder, set.disableUpdate)}
}

// ScaleSetInfo is a scale set as tests see it.
type ScaleSetInfo struct {
	ID            int
	Owner, Name   string
	GroupID       int
	Group         string
	Labels        []string
	DisableUpdate bool
	// SessionOwner is the ownerName of the live message session ("":
	// none), MaxCapacity the X-ScaleSetMaxCapacity of its last poll.
	SessionOwner string
	MaxCapacity  int
	// Delivered counts messages answered to polls (a message delivered
	// again counts again), Acknowledged the messages deleted.
	Delivered, Acknowledged int
	// Redelivered counts the acknowledgements RedeliverMessage lost: each
	// message delivered once more.
	Redelivered int
}

// ScaleSets lists the scale sets, by id.
func (s *Server) ScaleSets() []ScaleSetInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ScaleSetInfo
	for _, set := range s.ss.ordered() {
		info := ScaleSetInfo{ID: set.id, Owner: set.owner, Name: set.name, GroupID: set.groupID, Group: set.group,
			Labels: slices.Clone(set.labels), DisableUpdate: set.disableUpdate, Delivered: set.delivered, Acknowledged: set.acked, Redelivered: set.lost}
		if set.session != nil {
			info.SessionOwner, info.MaxCapacity = set.session.owner, set.session.capacity
		}
		out = append(out, info)
	}
	return out
}

// ScaleSet returns one scale set.
func (s *Server) ScaleSet(id int) (ScaleSetInfo, bool) {
	for _, info := range s.ScaleSets() {
		if info.ID == id {
			return info, true
		}
	}
	return ScaleSetInfo{}, false
}

// ScaleSetOf is the scale set a runner belongs to (0: none).
func (s *Server) ScaleSetOf(runnerID int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ss.runners[runnerID]
}
