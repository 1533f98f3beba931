package listener

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/actions/scaleset"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// Scaler answers one scale set's messages (the library's listener.Scaler):
// it keeps one standing run of one instance for each runner the scale set
// needs, and releases a run once its job ended.
type Scaler struct {
	d     provision.Deps // minting from the scale set (mintFromScaleSet)
	pool  *state.PoolConfig
	setID string // the scale set's id at GitHub
	name  string
	max   int
	log   *slog.Logger
	// bg outlives the handling of one message: provisions and releases
	// run on after the message that started them was acknowledged.
	bg context.Context

	mu sync.Mutex
	// live are the standing runs not released: being provisioned, waiting
	// for a job, or running one. Each is one runner of the scale set.
	live map[string]*standing
	// pauseUntil holds new provisions back after one failed (capacity,
	// GitHub): the next count asks again then, not in a tight loop.
	pauseUntil time.Time
	failures   int
	// assigned is GitHub's last count of jobs assigned to the scale set;
	// releasing, the runs being released now.
	assigned, releasing int
	wg                  sync.WaitGroup
}

// standing is one standing run and its instance, once known.
type standing struct {
	instanceID string
	ready      bool // provisioned: its runner is online
	// ended: the job ended before the provision answered (a job can
	// start and end before provision sees the runner online); the run
	// is released once it does.
	ended bool
	// adopted: an earlier listener's claim, not yet running (reconcile).
	adopted bool
	// readyAt: when its provision answered; started: GitHub said its
	// runner started a job (or refused to delete it as busy); trimming:
	// its runner is being deleted as surplus (trim.go).
	readyAt           time.Time
	started, trimming bool
}

// newScaler makes the scaler of scale set set, served by pool p.
func newScaler(bg context.Context, d provision.Deps, p *state.PoolConfig, set *scaleset.RunnerScaleSet, log *slog.Logger) *Scaler {
	return &Scaler{d: d, pool: p, setID: strconv.Itoa(set.ID), name: set.Name, max: maxRunners(p), bg: bg,
		log: log.With("scaleSet", set.Name, "scaleSetId", set.ID), live: map[string]*standing{}}
}

// maxRunners is the scale set's bound: its own, else the pool's.
func maxRunners(p *state.PoolConfig) int {
	if p.ScaleSet != nil && p.ScaleSet.MaxRunners > 0 {
		return p.ScaleSet.MaxRunners
	}
	return p.MaxInstances
}

// runPrefix starts the id of every standing run of the scale set: a
// listener that restarts finds its runs again by it (adopt).
func (s *Scaler) runPrefix() string { return "ss" + s.setID + "-" }

func (s *Scaler) newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return s.runPrefix() + strconv.FormatInt(time.Now().Unix(), 10) + "-" + hex.EncodeToString(b[:])
}

// HandleDesiredRunnerCount sizes the scale set to count, GitHub's
// TotalAssignedJobs (never a count of messages: a response holds at most
// 50), bounded by the scale set's maximum. It starts a standing run for
// each runner missing; surplus runners that took no job are given back by
// the reconcile pass once they have waited trimAfter (trim.go).
func (s *Scaler) HandleDesiredRunnerCount(ctx context.Context, count int) (int, error) {
	s.mu.Lock()
	s.assigned = count
	s.mu.Unlock()
	s.resize()
	return min(count, s.max), nil
}

// resize starts a standing run for each runner the last count wants that
// is neither live nor on its way back to the pool. An instance being
// released is waited for (seconds: the wipe and check) rather than another
// launched (on EC2, minutes and a second instance's cost): release calls
// resize when it is done.
func (s *Scaler) resize() {
	s.mu.Lock()
	want := min(s.assigned, s.max)
	var ids []string
	for n := toStart(s.assigned, s.max, len(s.live), s.releasing, time.Now().Before(s.pauseUntil)); n > 0; n-- {
		id := s.newRunID()
		s.live[id] = &standing{}
		ids = append(ids, id)
	}
	live, releasing := len(s.live), s.releasing
	s.mu.Unlock()
	if len(ids) > 0 {
		s.log.Info("runners wanted", "assignedJobs", want, "max", s.max, "live", live, "releasing", releasing, "starting", len(ids))
	}
	for _, id := range ids {
		s.wg.Add(1)
		go s.provision(id)
	}
}

// toStart is how many standing runs to start: the runners GitHub's count of
// assigned jobs wants, up to the scale set's maximum, less those live and
// those being released (their instances come back in seconds); none while
// paused after a failed provision.
func toStart(assigned, maxRunners, live, releasing int, paused bool) int {
	if paused {
		return 0
	}
	return max(min(assigned, maxRunners)-live-releasing, 0)
}

// provision gives run id its instance, as provision does for a workflow.
func (s *Scaler) provision(id string) {
	defer s.wg.Done()
	caller := idtoken.Identity{RepositoryID: "scaleset-" + s.setID, Repository: "scale set " + s.name, RunID: id}
	out, err := provision.ForScaleSet(s.bg, s.d, provision.Input{RunID: id, Pool: s.pool.Name, InstanceCount: new(1)}, caller, s.setID)
	s.mu.Lock()
	if err != nil {
		delete(s.live, id)
		s.failures++
		wait := min(time.Duration(s.failures)*5*time.Second, time.Minute)
		s.pauseUntil = time.Now().Add(wait)
		s.mu.Unlock()
		s.log.Error("standing run not provisioned; asking again later", "runId", id, "err", err, "retryIn", wait.String())
		// Asked again then, not only at the next poll (which may be 50 s
		// away while jobs wait).
		time.AfterFunc(wait, s.resize)
		return
	}
	s.failures = 0
	st := s.live[id]
	if st != nil && len(out.Instances) > 0 {
		st.ready, st.instanceID, st.readyAt = true, out.Instances[0].InstanceID, time.Now()
	}
	ended := st != nil && st.ended
	s.mu.Unlock() // release takes it
	s.log.Info("runner ready", "runId", id, "instances", out.Instances, "reused", out.Reused, "seconds", out.ElapsedSeconds)
	if ended {
		s.log.Info("its job ended already: releasing the run", "runId", id)
		s.release(id)
	}
}

// HandleJobStarted records, in the run a job started on, the job's
// repository and workflow run: what refresh re-runs should EC2 take the
// instance back under the job (refresh/rerun.go), and when GitHub queued
// it and gave it a runner (the cost report's queue time). A record that
// fails costs only that re-run and that figure.
func (s *Scaler) HandleJobStarted(ctx context.Context, job *scaleset.JobStarted) error {
	s.mu.Lock()
	id, st := s.runOfRunner(job.RunnerName)
	if st != nil {
		st.started = true // never given back as surplus (trim.go)
	}
	s.mu.Unlock()
	if st == nil {
		// Not a runner whose provision answered (yet): its record names
		// the run (a short job starts, and may end, before it answers).
		id = s.runOfRecord(ctx, job.RunnerName)
	}
	if id == "" {
		return nil
	}
	repo := job.OwnerName + "/" + job.RepositoryName
	s.log.Info("job started", "runId", id, "runner", job.RunnerName, "jobId", job.JobID, "repository", repo)
	if err := storeOf(s.d.Deps).SetRunJob(ctx, id, runJobOf(job)); err != nil {
		s.log.Warn("job of a standing run not recorded: it is not re-run should its instance be interrupted", "runId", id, "err", err)
	}
	return nil
}

// HandleJobCompleted releases the run whose runner ran the job: its
// instance is reaped, wiped and checked as at any run's end, then pooled
// (the next job may be another repository's).
func (s *Scaler) HandleJobCompleted(ctx context.Context, job *scaleset.JobCompleted) error {
	s.mu.Lock()
	id, st := s.runOfRunner(job.RunnerName)
	s.mu.Unlock()
	if st == nil {
		// Not a runner whose provision answered (yet): its record names
		// the run.
		id = s.runOfRecord(ctx, job.RunnerName)
	}
	if id == "" {
		s.log.Warn("job completed on a runner of no standing run", "runner", job.RunnerName, "jobId", job.JobID)
		return nil
	}
	s.mu.Lock()
	st = s.live[id]
	if st != nil && !st.ready {
		// Its provision still waits: releasing now would fail it (a run
		// released while provisioned gives its instance up). Released
		// when the provision answers.
		st.ended = true
		s.mu.Unlock()
		s.log.Info("job completed before its run's provision answered", "runId", id, "runner", job.RunnerName, "result", job.Result)
		return nil
	}
	s.mu.Unlock()
	s.log.Info("job completed: releasing its run", "runId", id, "runner", job.RunnerName, "result", job.Result)
	s.release(id)
	return nil
}

// release releases run id in the background; it is no longer live.
func (s *Scaler) release(id string) {
	s.wg.Add(1)
	s.mu.Lock()
	// One step: a resize between the two would see a runner neither live
	// nor releasing, and start another.
	delete(s.live, id)
	s.releasing++
	s.mu.Unlock()
	go s.whileReleasing(func() {
		out, err := release.ForScaleSet(s.bg, release.Deps{Deps: s.d.Deps}, id, s.setID)
		if err != nil {
			// The run's lease still ends: refresh retires its instance.
			s.log.Error("release of a standing run failed", "runId", id, "err", err)
			return
		}
		s.log.Info("standing run released", "runId", id, "released", out.Released, "expired", out.Expired)
	})
}

// whileReleasing runs a release counted in s.releasing (taken by the
// caller, with s.wg) and gives the count back when it ends: its instance
// is claimable again (or retired), so the runners wanted are looked at
// again.
func (s *Scaler) whileReleasing(release func()) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		s.releasing--
		s.mu.Unlock()
		s.resize()
	}()
	release()
}

// runOfRunner finds the live run whose instance a runner of ours names:
// state.JITRunnerName ends with the instance id. s.mu is held.
func (s *Scaler) runOfRunner(name string) (string, *standing) {
	inst := instanceOfRunner(name)
	if inst == "" {
		return "", nil
	}
	for id, st := range s.live {
		if st.instanceID == inst {
			return id, st
		}
	}
	return "", nil
}

// runOfRecord reads the run of a runner's instance from its record.
func (s *Scaler) runOfRecord(ctx context.Context, runner string) string {
	inst := instanceOfRunner(runner)
	if inst == "" {
		return ""
	}
	rec, err := storeOf(s.d.Deps).Get(ctx, s.pool.RecordKey(inst))
	if err != nil || !strings.HasPrefix(rec.RunID, s.runPrefix()) {
		return ""
	}
	return rec.RunID
}

// instanceOfRunner is the instance id a runner name of ours ends with
// (ghr-<uses>-<n>-<instance id>), "" for any other name.
func instanceOfRunner(name string) string {
	parts := strings.SplitN(name, "-", 4)
	if len(parts) != 4 || parts[0] != "ghr" || !strings.HasPrefix(parts[3], "i-") {
		return ""
	}
	return parts[3]
}

// Wait waits for the provisions and releases under way.
func (s *Scaler) Wait() { s.wg.Wait() }

// Live is how many standing runs the scaler holds.
func (s *Scaler) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live)
}

// runJobOf is what the run keeps of the job that started on it.
func runJobOf(job *scaleset.JobStarted) state.RunJob {
	return state.RunJob{Repository: job.OwnerName + "/" + job.RepositoryName, WorkflowRunID: job.WorkflowRunID,
		QueuedAt: unixOrZero(job.QueueTime), StartedAt: unixOrZero(job.RunnerAssignTime)}
}

// unixOrZero is t in unix seconds, 0 for a time the message left out.
func unixOrZero(t time.Time) int64 {
	if t.IsZero() || t.Unix() <= 0 {
		return 0
	}
	return t.Unix()
}
