package listener

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/actions/scaleset"
	sslistener "github.com/actions/scaleset/listener"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// What a listener saw of a scale set, for the operator (issue 38 item 6):
// the scale set's status item (state.ScaleSetStatus, ghrunner status) and
// the listener's metrics (metrics.go). Neither decides anything: the
// records say which runs exist, GitHub's statistics how many are wanted.
//
// The status item is written at most every reportEvery while the listener
// holds the session (a poll answers every few seconds to a minute: a write
// per poll would cost more than it tells), and at once when the session is
// taken or lost. A listener that does not hold the session writes only an
// error of its own, and only when no other listener serves the scale set
// (anotherServes): a second listener waiting for the session never hides
// the holder's status.

// StatusWriter keeps the status of each scale set (*state.Store).
type StatusWriter interface {
	PutScaleSetStatus(ctx context.Context, st state.ScaleSetStatus) error
	GetScaleSetStatus(ctx context.Context, pool string) (*state.ScaleSetStatus, error)
}

// reportEvery is how often the status is written and the scale set's
// metrics reported. Each one-minute period then holds four reports: the
// alarm on no polls (ListenerPolls) never sees a healthy minute empty.
const reportEvery = 15 * time.Second

// holderFresh is how long after its last poll (or its taking the session)
// another listener is taken to serve the scale set.
const holderFresh = 2 * time.Minute

// writeFor bounds one status write: the listener's work does not wait on it.
const writeFor = 5 * time.Second

// anotherServes says whether the status cur names another listener that
// served the scale set lately: then a listener without the session leaves
// the status to it.
func anotherServes(cur *state.ScaleSetStatus, me string, now time.Time) bool {
	if cur == nil || cur.Holder == "" || cur.Holder == me {
		return false
	}
	return now.Unix()-max(cur.PolledAt, cur.SessionAt) < int64(holderFresh/time.Second)
}

// seen is one scale set's: the library's MetricsRecorder, the watcher of
// its polls, and the writer of its status.
type seen struct {
	w    StatusWriter // nil: no status kept
	out  io.Writer    // EMF lines; nil: none
	env  string
	name string // this listener, the session's owner
	pool string
	log  *slog.Logger
	now  func() time.Time
	// usage: the listener's usage ledger counts (nil: not reported).
	usage *UsageSpans

	mu      sync.Mutex
	st      state.ScaleSetStatus
	seq     uint64 // of the last snapshot of st taken to be written
	holding bool
	live    func() int
	rep     report

	// wmu orders the writes: a snapshot older than one written already
	// (a report's, overtaken by the session's loss) is not written.
	wmu     sync.Mutex
	written uint64
}

var _ sslistener.MetricsRecorder = (*seen)(nil)

func newSeen(c Config, p *state.PoolConfig, log *slog.Logger) *seen {
	return &seen{w: c.Status, out: c.Metrics, env: c.Environment, name: c.Name, pool: p.Name, log: log, now: time.Now, usage: c.Usage,
		st: state.ScaleSetStatus{Pool: p.Name, ScaleSet: p.ScaleSet.Name}}
}

// taken: this listener holds the scale set's session.
func (s *seen) taken(ctx context.Context, set *scaleset.RunnerScaleSet, live func() int) {
	s.mu.Lock()
	now := s.now().Unix()
	s.holding, s.live = true, live
	s.st.ScaleSet, s.st.ScaleSetID, s.st.Holder, s.st.SessionAt = set.Name, set.ID, s.name, now
	st, seq := s.snapshot()
	s.mu.Unlock()
	s.write(ctx, st, seq)
}

// ended: serving the scale set ended (err nil or ctx done: the listener
// stops). A session held is said lost at once; an error without one is
// written when no other listener serves the scale set.
func (s *seen) ended(ctx context.Context, err error) {
	stopping := ctx.Err() != nil
	s.mu.Lock()
	now := s.now().Unix()
	held := s.holding
	s.holding, s.live = false, nil
	if err != nil && !stopping {
		s.rep.errors++
		s.st.Error, s.st.ErrorAt = err.Error(), now
	}
	if held {
		s.st.Holder, s.st.SessionAt, s.st.LiveRuns = "", now, 0
	}
	st, seq := s.snapshot()
	s.mu.Unlock()
	if held {
		s.write(ctx, st, seq)
		return
	}
	if stopping || err == nil || s.w == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeFor)
	defer cancel()
	cur, rerr := s.w.GetScaleSetStatus(rctx, s.pool)
	if rerr != nil {
		s.log.Warn("scale set status not read", "err", rerr)
		return
	}
	if anotherServes(cur, s.name, s.now()) {
		return
	}
	if cur != nil && st.ScaleSetID == 0 {
		// What this listener never learned is kept from the last status.
		st.ScaleSetID, st.Statistics, st.PolledAt = cur.ScaleSetID, cur.Statistics, cur.PolledAt
	}
	st.Holder = ""
	s.write(ctx, st, seq)
}

// polled notes a poll of the session that answered (err nil: a 202 or a
// message). A poll that failed ends the session: ended counts its error.
func (s *seen) polled(err error) {
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep.polls++
	s.st.PolledAt = s.now().Unix()
}

// RecordStatistics keeps GitHub's statistics of the last poll.
func (s *seen) RecordStatistics(stat *scaleset.RunnerScaleSetStatistic) {
	if stat == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Statistics = state.ScaleSetStatistics{Available: stat.TotalAvailableJobs, Assigned: stat.TotalAssignedJobs,
		Running: stat.TotalRunningJobs, Registered: stat.TotalRegisteredRunners, Busy: stat.TotalBusyRunners, Idle: stat.TotalIdleRunners}
	s.rep.assigned = stat.TotalAssignedJobs
}

// RecordJobStarted writes the job's waits.
func (s *seen) RecordJobStarted(msg *scaleset.JobStarted) {
	s.emit(jobStartedRecords(s.pool, msg))
}

// RecordJobCompleted counts the job.
func (s *seen) RecordJobCompleted(msg *scaleset.JobCompleted) {
	s.emit(jobCompletedRecords(s.pool))
}

// RecordDesiredRunners: the runners wanted are the live runs, reported
// with them.
func (s *seen) RecordDesiredRunners(int) {}

// report writes the scale set's metrics since the last report, and its
// status while the session is held.
func (s *seen) report(ctx context.Context) {
	s.mu.Lock()
	live := s.live
	s.mu.Unlock()
	n := 0
	if live != nil {
		n = live() // the scaler's lock, never under ours
	}
	s.mu.Lock()
	s.rep.live, s.st.LiveRuns = n, n
	rep, held := s.rep, s.holding
	st, seq := s.snapshot()
	s.rep = report{assigned: rep.assigned}
	s.mu.Unlock()
	if s.usage != nil {
		var why error
		rep.usage = true
		rep.spansRecorded, rep.spansLost, why = s.usage.take()
		if rep.spansLost > 0 {
			s.log.Warn("usage spans lost: the cost report undercounts them", "lost", rep.spansLost, "err", why)
		}
	}
	s.emit(reportRecords(s.pool, rep))
	if held {
		s.write(ctx, st, seq)
	}
}

func (s *seen) emit(recs []metrics.Record) {
	if s.out == nil {
		return
	}
	lines, err := encode(s.env, s.now(), recs)
	if err != nil {
		s.log.Warn("metric dropped", "err", err)
	}
	if len(lines) > 0 {
		_, _ = s.out.Write(lines)
	}
}

// snapshot is the status now, numbered; s.mu is held.
func (s *seen) snapshot() (state.ScaleSetStatus, uint64) {
	s.seq++
	return s.st, s.seq
}

// write writes snapshot seq of the status, unless a later one was written.
func (s *seen) write(ctx context.Context, st state.ScaleSetStatus, seq uint64) {
	if s.w == nil {
		return
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if seq < s.written {
		return
	}
	s.written = seq
	st.WrittenAt = s.now().Unix()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeFor)
	defer cancel()
	if err := s.w.PutScaleSetStatus(wctx, st); err != nil {
		s.log.Warn("scale set status not written", "err", err)
	}
}

// watch is the session with each poll noted.
func (s *seen) watch(c sslistener.Client) sslistener.Client { return polling{Client: c, seen: s} }

type polling struct {
	sslistener.Client
	seen *seen
}

// GetMessage polls, and notes it: a poll cut short by the listener's
// stopping is none.
func (p polling) GetMessage(ctx context.Context, lastMessageID, maxCapacity int) (*scaleset.RunnerScaleSetMessage, error) {
	msg, err := p.Client.GetMessage(ctx, lastMessageID, maxCapacity)
	if ctx.Err() == nil {
		p.seen.polled(err)
	}
	return msg, err
}
