package listener

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actions/scaleset"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

var t0 = time.Unix(1_800_000_000, 0)

// newTestSeen is pool linux's seen with a fixed clock, writing its EMF
// lines to out and its status to w.
func newTestSeen(w StatusWriter, out *bytes.Buffer) *seen {
	p := &state.PoolConfig{Name: "linux", ScaleSet: &state.ScaleSetConfig{Name: "linux-large"}}
	c := Config{Name: "task-1", Status: w, Environment: "prod"}
	if out != nil {
		c.Metrics = out
	}
	s := newSeen(c, p, slog.New(slog.DiscardHandler))
	s.now = func() time.Time { return t0 }
	return s
}

// points renders EMF lines as name{dimensions}=values, sorted.
func points(t *testing.T, out *bytes.Buffer) []string {
	t.Helper()
	ps, err := metrics.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		var dims []string
		for _, k := range slices.Sorted(maps.Keys(p.Dimensions)) {
			dims = append(dims, k+"="+p.Dimensions[k])
		}
		got = append(got, fmt.Sprintf("%s{%s}=%v", p.Name, strings.Join(dims, ","), p.Values))
	}
	slices.Sort(got)
	return got
}

func started(queued, toSet, toRunner time.Duration) *scaleset.JobStarted {
	j := &scaleset.JobStarted{RunnerName: "ghr-1-1-i-0abc\x1b]52;c;evil\x07"}
	j.RepositoryName, j.OwnerName, j.JobDisplayName = "evil\nrepo", "acme", "build"
	j.QueueTime = t0.Add(-queued)
	if toSet >= 0 {
		j.ScaleSetAssignTime = j.QueueTime.Add(toSet)
	}
	if toRunner >= 0 {
		j.RunnerAssignTime = j.ScaleSetAssignTime.Add(toRunner)
	}
	return j
}

func TestTheListenerMetricsAreWhatItsMessagesSay(t *testing.T) {
	const dims = "environment=prod,function=listener,pool=linux"
	for _, tc := range []struct {
		name string
		feed func(s *seen)
		want []string
	}{
		{"a started job gives its three waits from GitHub's timestamps, and nothing of its repository or runner",
			func(s *seen) { s.RecordJobStarted(started(time.Minute, 4*time.Second, 6*time.Second)) },
			[]string{
				"JobAssignedToRunnerSeconds{" + dims + "}=[6]",
				"JobQueuedToAssignedSeconds{" + dims + "}=[4]",
				"JobQueuedToStartedSeconds{" + dims + "}=[10]",
				"JobsStarted{" + dims + "}=[1]",
			}},
		{"a wait whose timestamp GitHub left out is not written",
			func(s *seen) { s.RecordJobStarted(started(time.Minute, 3*time.Second, -1)) },
			[]string{"JobQueuedToAssignedSeconds{" + dims + "}=[3]", "JobsStarted{" + dims + "}=[1]"}},
		{"a wait whose timestamps are out of order is not written",
			func(s *seen) { s.RecordJobStarted(started(time.Minute, -1, 0)) },
			[]string{"JobsStarted{" + dims + "}=[1]"}},
		{"a completed job is counted, its result is no dimension",
			func(s *seen) { s.RecordJobCompleted(&scaleset.JobCompleted{Result: "failed\x1b[2J"}) },
			[]string{"JobsCompleted{" + dims + "}=[1]"}},
		{"a report counts the polls answered and the errors since the last, GitHub's assigned jobs and the live runs; the polls again per deployment",
			func(s *seen) {
				s.RecordStatistics(&scaleset.RunnerScaleSetStatistic{TotalAssignedJobs: 3})
				s.polled(nil)
				s.polled(errors.New("503")) // the session ends with it: counted once, there
				s.ended(context.Background(), errors.New("failed to get message: 503"))
				s.taken(context.Background(), &scaleset.RunnerScaleSet{ID: 7, Name: "linux-large"}, func() int { return 2 })
				s.polled(nil)
				s.report(context.Background())
			},
			[]string{
				"AssignedJobs{" + dims + "}=[3]",
				"ListenerErrors{" + dims + "}=[1]",
				"ListenerPolls{" + dims + "}=[2]",
				"ListenerPolls{environment=prod,function=listener}=[2]",
				"LiveRuns{" + dims + "}=[2]",
			}},
		{"a report with no poll says zero polls (the alarm's breach), and the counts start again each report",
			func(s *seen) {
				s.polled(nil)
				s.report(context.Background())
				s.report(context.Background())
			},
			[]string{
				"AssignedJobs{" + dims + "}=[0]", "AssignedJobs{" + dims + "}=[0]",
				"ListenerErrors{" + dims + "}=[0]", "ListenerErrors{" + dims + "}=[0]",
				"ListenerPolls{" + dims + "}=[0]", "ListenerPolls{" + dims + "}=[1]",
				"ListenerPolls{environment=prod,function=listener}=[0]", "ListenerPolls{environment=prod,function=listener}=[1]",
				"LiveRuns{" + dims + "}=[0]", "LiveRuns{" + dims + "}=[0]",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			s := newTestSeen(nil, &out)
			tc.feed(s)
			if got := points(t, &out); !slices.Equal(got, tc.want) {
				t.Errorf("metrics\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestAPoolNameThePoolRuleRefusesIsNoDimension(t *testing.T) {
	recs := jobCompletedRecords("linux\nprod")
	if got := recs[0].Dimensions["pool"]; got != "invalid" {
		t.Errorf("pool dimension %q, want invalid", got)
	}
}

func TestAListenerWithoutTheSessionLeavesTheStatusToTheOneServing(t *testing.T) {
	now := t0.Unix()
	for _, tc := range []struct {
		name string
		cur  *state.ScaleSetStatus
		want bool
	}{
		{"no status yet", nil, false},
		{"nobody holds the session", &state.ScaleSetStatus{PolledAt: now}, false},
		{"this listener held it", &state.ScaleSetStatus{Holder: "task-1", PolledAt: now}, false},
		{"another polled a moment ago", &state.ScaleSetStatus{Holder: "task-2", PolledAt: now - 10}, true},
		{"another just took the session and has not polled yet", &state.ScaleSetStatus{Holder: "task-2", SessionAt: now - 5, PolledAt: now - 3600}, true},
		{"another has not polled for two minutes (killed: its session lingers)", &state.ScaleSetStatus{Holder: "task-2", SessionAt: now - 600, PolledAt: now - 120}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := anotherServes(tc.cur, "task-1", t0); got != tc.want {
				t.Errorf("anotherServes = %v, want %v", got, tc.want)
			}
		})
	}
}

// statuses is a StatusWriter that keeps every write.
type statuses struct {
	mu     sync.Mutex
	writes []state.ScaleSetStatus
	cur    *state.ScaleSetStatus
}

func (f *statuses) PutScaleSetStatus(_ context.Context, st state.ScaleSetStatus) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes = append(f.writes, st)
	f.cur = &st
	return nil
}

func (f *statuses) GetScaleSetStatus(context.Context, string) (*state.ScaleSetStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur, nil
}

func TestTheStatusIsWrittenWhenTheSessionIsTakenOrLostAndOtherwiseOncePerReport(t *testing.T) {
	ctx := context.Background()
	w := &statuses{}
	s := newTestSeen(w, nil)
	s.taken(ctx, &scaleset.RunnerScaleSet{ID: 7, Name: "linux-large"}, func() int { return 2 })
	if len(w.writes) != 1 || w.writes[0].Holder != "task-1" || w.writes[0].SessionAt != t0.Unix() || w.writes[0].ScaleSetID != 7 {
		t.Fatalf("taking the session wrote %+v; want one write naming task-1", w.writes)
	}
	for range 20 {
		s.RecordStatistics(&scaleset.RunnerScaleSetStatistic{TotalAssignedJobs: 3, TotalRunningJobs: 2, TotalIdleRunners: 1})
		s.polled(nil)
	}
	if len(w.writes) != 1 {
		t.Fatalf("polls wrote %d times; want none between reports", len(w.writes)-1)
	}
	s.report(ctx)
	last := w.writes[len(w.writes)-1]
	if len(w.writes) != 2 || last.PolledAt != t0.Unix() || last.LiveRuns != 2 || last.Statistics.Assigned != 3 || last.Statistics.Idle != 1 {
		t.Fatalf("the report wrote %+v; want one write with the last poll, statistics and live runs", w.writes[1:])
	}
	s.ended(ctx, errors.New("failed to get message: 401"))
	last = w.writes[len(w.writes)-1]
	if len(w.writes) != 3 || last.Holder != "" || last.Error != "failed to get message: 401" || last.ErrorAt != t0.Unix() || last.LiveRuns != 0 {
		t.Fatalf("losing the session wrote %+v; want one write with no holder and the error", w.writes[2:])
	}
	s.report(ctx)
	if len(w.writes) != 3 {
		t.Errorf("a report without the session wrote %+v", w.writes[3:])
	}
	// Another listener takes the session; this one's next error (GitHub's
	// 409 to its own ask) is not written over the holder's status.
	w.cur = &state.ScaleSetStatus{Pool: "linux", Holder: "task-2", SessionAt: t0.Unix()}
	s.ended(ctx, errors.New("409 Conflict"))
	if len(w.writes) != 3 {
		t.Errorf("an error without the session, another serving, wrote %+v", w.writes[3:])
	}
	// Nobody serves: this listener's error is the news.
	w.cur = &state.ScaleSetStatus{Pool: "linux", ScaleSetID: 7}
	s.ended(ctx, errors.New("runner group \"big\": not found"))
	if len(w.writes) != 4 || w.writes[3].Error != "runner group \"big\": not found" || w.writes[3].Holder != "" {
		t.Errorf("an error with nobody serving wrote %+v; want it written", w.writes[3:])
	}
}

// A report's write that the session's loss overtook is not written over
// the loss: the status never names a holder that let the session go.
func TestAReportOvertakenByTheSessionsLossIsNotWritten(t *testing.T) {
	ctx := context.Background()
	w := &statuses{}
	s := newTestSeen(w, nil)
	s.taken(ctx, &scaleset.RunnerScaleSet{ID: 7, Name: "linux-large"}, func() int { return 1 })
	s.mu.Lock()
	held, seq := s.snapshot() // the report's, before its write
	s.mu.Unlock()
	s.ended(ctx, errors.New("session lost"))
	s.write(ctx, held, seq)
	if last := w.writes[len(w.writes)-1]; len(w.writes) != 2 || last.Holder != "" {
		t.Errorf("writes %+v; want the loss last, the overtaken report not written", w.writes)
	}
}
