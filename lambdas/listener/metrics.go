package listener

import (
	"cmp"
	"sync"
	"time"

	"github.com/actions/scaleset"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The listener's metrics, written as the functions' are (EMF lines on
// stdout, internal/metrics), under function=listener. The "pool" dimension
// is the pool's name, which the provider validated when it wrote the pool's
// configuration; nothing of a message (repository, workflow, runner name)
// is ever a dimension: GitHub's text, chosen by whoever pushes a workflow,
// would make a new metric series, billed by the month, with every value.
const (
	// Per job, from GitHub's own timestamps in the JobStarted message.
	mQueuedToAssigned = "JobQueuedToAssignedSeconds" // queued → assigned to the scale set
	mAssignedToRunner = "JobAssignedToRunnerSeconds" // assigned to the scale set → to a runner
	mQueuedToStarted  = "JobQueuedToStartedSeconds"  // queued → on a runner: the wait a workflow sees
	mJobsStarted      = "JobsStarted"
	mJobsCompleted    = "JobsCompleted"
	// Per scale set, each time the listener reports (reportEvery).
	mPolls        = "ListenerPolls" // polls of the session that answered (202 or a message)
	mErrors       = "ListenerErrors"
	mAssignedJobs = "AssignedJobs" // GitHub's TotalAssignedJobs
	mLiveRuns     = "LiveRuns"     // standing runs the listener holds
	// Per listener, each report: the usage ledger's spans its claims and
	// releases wrote and lost (as the functions' UsageSpans*).
	mSpansRecorded = "UsageSpansRecorded"
	mSpansLost     = "UsageSpansLost"
)

// UsageCounter counts the usage ledger's spans a store wrote and lost
// since it was made (*state.Store).
type UsageCounter interface {
	UsageCounts() (recorded, lost int64, lastErr error)
}

// UsageSpans hands out the spans written and lost since it last did: the
// listener's one store serves every scale set, so whichever scale set
// reports takes the counts, and their sum over reports is the store's.
type UsageSpans struct {
	mu             sync.Mutex
	src            UsageCounter
	recorded, lost int64
}

// NewUsageSpans counts src's spans from now.
func NewUsageSpans(src UsageCounter) *UsageSpans {
	u := &UsageSpans{src: src}
	u.recorded, u.lost, _ = src.UsageCounts()
	return u
}

// take returns the spans written and lost since the last take, and why the
// last one was lost.
func (u *UsageSpans) take() (recorded, lost int64, lastErr error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	rec, l, err := u.src.UsageCounts()
	recorded, lost = rec-u.recorded, l-u.lost
	u.recorded, u.lost = rec, l
	return recorded, lost, err
}

// functionListener is the "function" dimension of the listener's metrics.
const functionListener = "listener"

// poolDimension is the pool's name as a dimension: a name the pool's rule
// does not allow is never written (it cannot come from the provider).
func poolDimension(pool string) string {
	if !state.ValidPoolName(pool) {
		return "invalid"
	}
	return pool
}

// jobStartedRecords are a started job's waits, each from two of GitHub's
// timestamps; a wait whose timestamps are missing or out of order is left
// out rather than written as a zero or a negative.
func jobStartedRecords(pool string, job *scaleset.JobStarted) []metrics.Record {
	r := metrics.Record{Dimensions: map[string]string{"function": functionListener, "pool": poolDimension(pool)}}
	r.Add(mJobsStarted, metrics.Count, 1)
	if job != nil {
		b := job.JobMessageBase
		addWait(&r, mQueuedToAssigned, b.QueueTime, b.ScaleSetAssignTime)
		addWait(&r, mAssignedToRunner, b.ScaleSetAssignTime, b.RunnerAssignTime)
		addWait(&r, mQueuedToStarted, b.QueueTime, b.RunnerAssignTime)
	}
	return []metrics.Record{r}
}

func addWait(r *metrics.Record, name string, from, to time.Time) {
	if from.IsZero() || to.IsZero() || to.Before(from) {
		return
	}
	r.Add(name, metrics.Seconds, to.Sub(from).Seconds())
}

// jobCompletedRecords count a completed job. Its result is GitHub's word,
// not a dimension: the function's log has it.
func jobCompletedRecords(pool string) []metrics.Record {
	r := metrics.Record{Dimensions: map[string]string{"function": functionListener, "pool": poolDimension(pool)}}
	r.Add(mJobsCompleted, metrics.Count, 1)
	return []metrics.Record{r}
}

// report is what the listener saw of a scale set since its last report.
type report struct {
	polls, errors int
	assigned      int // GitHub's TotalAssignedJobs, as last given
	live          int // standing runs held now
	// usage: the ledger's spans written and lost since the last report
	// (none without a UsageSpans).
	usage                    bool
	spansRecorded, spansLost int64
}

// reportRecords are a scale set's report: per pool, and its polls again
// without the pool, so that one alarm watches the deployment's listener
// whatever pools it serves (a sum over every scale set: missing data, or
// zero, is a listener that polls nothing).
func reportRecords(pool string, r report) []metrics.Record {
	per := metrics.Record{Dimensions: map[string]string{"function": functionListener, "pool": poolDimension(pool)}}
	per.Add(mPolls, metrics.Count, float64(r.polls))
	per.Add(mErrors, metrics.Count, float64(r.errors))
	per.Add(mAssignedJobs, metrics.Count, float64(r.assigned))
	per.Add(mLiveRuns, metrics.Count, float64(r.live))
	all := metrics.Record{Dimensions: map[string]string{"function": functionListener}}
	all.Add(mPolls, metrics.Count, float64(r.polls))
	if r.usage {
		all.Add(mSpansRecorded, metrics.Count, float64(r.spansRecorded))
		all.Add(mSpansLost, metrics.Count, float64(r.spansLost))
	}
	return []metrics.Record{per, all}
}

// ReportLines are the EMF lines of a scale set's report of polls answered
// (and nothing else seen) at at: the monitoring's tests evaluate the
// listener's alarm on what the listener writes.
func ReportLines(env, pool string, at time.Time, polls int) ([]byte, error) {
	return encode(env, at, reportRecords(pool, report{polls: polls}))
}

// encode writes records as EMF lines at at, with the deployment's
// environment dimension; a record that cannot be encoded is dropped and
// its error returned (metrics never stop the listener).
func encode(env string, at time.Time, recs []metrics.Record) ([]byte, error) {
	var out []byte
	var first error
	for _, r := range recs {
		r.Dimensions["environment"] = env
		line, err := r.Encode(at)
		if err != nil {
			first = cmp.Or(first, err)
			continue
		}
		out = append(out, line...)
	}
	return out, first
}
