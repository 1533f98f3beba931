package fakegithub_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actions/scaleset"
	"github.com/actions/scaleset/listener"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// The fake's scale set side is held to the real client: every request
// below goes through github.com/actions/scaleset (Client,
// MessageSessionClient, listener.Listener), never a hand-written client.

// newScaleSetClient builds the library's client against the fake as a
// consumer would: the fake's config URL for the owner, the App id, the
// installation id and the App's private key.
func newScaleSetClient(t *testing.T, fake *fakegithub.Server, owner string) *scaleset.Client {
	t.Helper()
	c, err := scaleset.NewClientWithGitHubApp(scaleset.ClientWithGitHubAppConfig{
		GitHubConfigURL: fake.ScaleSetConfigURL(owner),
		GitHubAppAuth: scaleset.GitHubAppAuth{
			ClientID:       strconv.FormatInt(fake.AppID, 10),
			InstallationID: fake.InstallationID(owner),
			PrivateKey:     string(fake.PrivateKeyPEM),
		},
		SystemInfo: scaleset.SystemInfo{System: "ghrunner-tests", Subsystem: "listener"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newScaleSetFake(t *testing.T, o fakegithub.ScaleSetOptions) *fakegithub.Server {
	fake := fakegithub.NewServer(fakegithub.Options{Orgs: []string{"acme"}, ScaleSet: o})
	t.Cleanup(fake.Close)
	return fake
}

// createScaleSet makes a scale set in the default group, as the library's
// example listener does.
func createScaleSet(t *testing.T, c *scaleset.Client, name string, disableUpdate bool) *scaleset.RunnerScaleSet {
	t.Helper()
	ctx := context.Background()
	group, err := c.GetRunnerGroupByName(ctx, scaleset.DefaultRunnerGroup)
	if err != nil {
		t.Fatal(err)
	}
	set, err := c.CreateRunnerScaleSet(ctx, &scaleset.RunnerScaleSet{
		Name: name, RunnerGroupID: group.ID, Labels: []scaleset.Label{{Name: name}},
		RunnerSetting: scaleset.RunnerSetting{DisableUpdate: disableUpdate},
	})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// startJITRunner starts the fake runner with a scale set's JIT
// configuration, in a runner directory of its own.
func startJITRunner(t *testing.T, encoded string) *runSh {
	r := &rig{t: t, dir: fakegithub.NewRunnerDir(t), cwd: t.TempDir()}
	return r.start("--jitconfig", encoded)
}

// recorder is the listener's MetricsRecorder: what it was told.
type recorder struct {
	mu        sync.Mutex
	stats     []scaleset.RunnerScaleSetStatistic
	started   []scaleset.JobStarted
	completed []scaleset.JobCompleted
}

func (r *recorder) RecordStatistics(s *scaleset.RunnerScaleSetStatistic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats = append(r.stats, *s)
}
func (r *recorder) RecordJobStarted(m *scaleset.JobStarted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, *m)
}
func (r *recorder) RecordJobCompleted(m *scaleset.JobCompleted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.completed = append(r.completed, *m)
}
func (r *recorder) RecordDesiredRunners(int) {}

func (r *recorder) snapshot() ([]scaleset.RunnerScaleSetStatistic, []scaleset.JobStarted, []scaleset.JobCompleted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]scaleset.RunnerScaleSetStatistic(nil), r.stats...), append([]scaleset.JobStarted(nil), r.started...), append([]scaleset.JobCompleted(nil), r.completed...)
}

// jitScaler is the test's Scaler: it keeps as many runners as the scale
// set has assigned jobs (up to max), each a fake runner started with a
// JIT configuration from GenerateJitRunnerConfig; start false: it starts
// none.
type jitScaler struct {
	t       *testing.T
	client  *scaleset.Client
	setID   int
	max     int
	start   bool
	mu      sync.Mutex
	n       int
	active  map[string]bool
	configs []string // the encoded JIT configurations it was given
}

func (s *jitScaler) HandleDesiredRunnerCount(ctx context.Context, count int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.start && len(s.active) < min(count, s.max) {
		s.n++
		name := fmt.Sprintf("ss%d-runner-%d", s.setID, s.n)
		jit, err := s.client.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: name}, s.setID)
		if err != nil {
			return 0, err
		}
		s.active[jit.Runner.Name] = true
		s.configs = append(s.configs, jit.EncodedJITConfig)
		startJITRunner(s.t, jit.EncodedJITConfig)
	}
	return len(s.active), nil
}

func (s *jitScaler) HandleJobStarted(ctx context.Context, m *scaleset.JobStarted) error { return nil }

func (s *jitScaler) HandleJobCompleted(ctx context.Context, m *scaleset.JobCompleted) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.active, m.RunnerName)
	return nil
}

// runListener runs the library's listener until stop is called (at the
// latest when the test ends).
func runListener(t *testing.T, c listener.Client, setID int, scaler listener.Scaler, rec *recorder) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	l, err := listener.New(c, listener.Config{ScaleSetID: setID, MaxRunners: 2}, listener.WithMetricsRecorder(rec))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, scaler) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("listener: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestAScaleSetJobIsAcquiredRunOnAJITRunnerOfTheScaleSetAndReported: the
// library's listener hears of a job queued for its scale set, acquires
// it, and the scaler's JIT runner (the fake runner, started with the
// scale set's configuration) runs it; JobStarted and JobCompleted name
// that runner, and TotalAssignedJobs counts the job while it is assigned.
// (Were an acquired job not counted assigned until a runner takes it, the
// scaler would start no runner and this fails with "job: {... State:queued".)
func TestAScaleSetJobIsAcquiredRunOnAJITRunnerOfTheScaleSetAndReported(t *testing.T) {
	fake := newScaleSetFake(t, fakegithub.ScaleSetOptions{PollWait: 300 * time.Millisecond})
	c := newScaleSetClient(t, fake, "acme")
	ctx := context.Background()
	set := createScaleSet(t, c, "ssa", true)
	if got, err := c.GetRunnerScaleSet(ctx, set.RunnerGroupID, "ssa"); err != nil || got == nil || got.ID != set.ID || !got.RunnerSetting.DisableUpdate {
		t.Fatalf("GetRunnerScaleSet: %+v %v (created %+v)", got, err, set)
	}
	if got, err := c.GetRunnerScaleSetByID(ctx, set.ID); err != nil || got.Name != "ssa" || got.Statistics == nil {
		t.Fatalf("GetRunnerScaleSetByID: %+v %v", got, err)
	}
	session, err := c.MessageSessionClient(ctx, set.ID, "listener-1")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	scaler := &jitScaler{t: t, client: c, setID: set.ID, max: 2, start: true, active: map[string]bool{}}
	stop := runListener(t, session, set.ID, scaler, rec)

	id := fake.EnqueueJob("ssa", "echo hello from the scale set")
	job, err := fake.WaitJob(id, 30*time.Second)
	if err != nil || job.ExitCode != 0 || !strings.Contains(job.Output, "hello from the scale set") {
		t.Fatalf("job: %+v %v", job, err)
	}
	if job.ScaleSetID != set.ID || fake.ScaleSetOf(job.RunnerID) != set.ID || !strings.HasPrefix(job.Runner, fmt.Sprintf("ss%d-runner-", set.ID)) {
		t.Fatalf("the job ran on %q (runner %d of scale set %d), want a runner of scale set %d", job.Runner, job.RunnerID, fake.ScaleSetOf(job.RunnerID), set.ID)
	}
	eventually(t, 5*time.Second, "JobStarted and JobCompleted", func() bool {
		_, started, completed := rec.snapshot()
		return len(started) == 1 && len(completed) == 1
	})
	stats, started, completed := rec.snapshot()
	if started[0].RunnerName != job.Runner || started[0].RunnerRequestID != id || int64(started[0].RunnerID) != job.RunnerID {
		t.Errorf("JobStarted %+v, want runner %s (%d), request %d", started[0], job.Runner, job.RunnerID, id)
	}
	if completed[0].RunnerName != job.Runner || completed[0].Result != "succeeded" || completed[0].RunnerRequestID != id {
		t.Errorf("JobCompleted %+v, want runner %s, succeeded", completed[0], job.Runner)
	}
	assigned := false
	for _, s := range stats {
		assigned = assigned || s.TotalAssignedJobs == 1
	}
	eventually(t, 5*time.Second, "no assigned job once it completed", func() bool {
		stats, _, _ := rec.snapshot()
		return stats[len(stats)-1].TotalAssignedJobs == 0
	})
	if !assigned {
		t.Errorf("TotalAssignedJobs never 1: %+v", stats)
	}
	// The runner's configuration carries the scale set's DisableUpdate.
	if runner := jitRunnerFile(t, scaler.configs[0]); runner["disableUpdate"] != true || runner["agentName"] != job.Runner {
		t.Errorf(".runner of the JIT configuration: %v", runner)
	}
	if info, _ := fake.ScaleSet(set.ID); info.SessionOwner != "listener-1" || info.Delivered == 0 || info.Acknowledged != info.Delivered || info.MaxCapacity != 2 {
		t.Errorf("scale set as the fake saw it: %+v", info)
	}
	stop()
	if err := session.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteRunnerScaleSet(ctx, set.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetRunnerScaleSet(ctx, set.RunnerGroupID, "ssa"); err != nil || got != nil {
		t.Fatalf("after DeleteRunnerScaleSet: %+v %v", got, err)
	}
}

// jitRunnerFile decodes the .runner file of an encoded JIT configuration.
func jitRunnerFile(t *testing.T, encoded string) map[string]any {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		t.Fatal(err)
	}
	var files map[string]string
	if err := json.Unmarshal(raw, &files); err != nil {
		t.Fatal(err)
	}
	raw, err = base64.StdEncoding.DecodeString(files[".runner"])
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestASecondSessionIsRefusedWithAConflictWhileTheFirstLives: 409 and
// the service's RunnerScaleSetSessionConflictException; once the first
// is closed, a new one is allowed. (Without the rule in
// ssSessionCreate, the second MessageSessionClient succeeds and this
// fails with "a second session: <nil>".)
func TestASecondSessionIsRefusedWithAConflictWhileTheFirstLives(t *testing.T) {
	fake := newScaleSetFake(t, fakegithub.ScaleSetOptions{})
	c := newScaleSetClient(t, fake, "acme")
	ctx := context.Background()
	set := createScaleSet(t, c, "ssa", false)
	first, err := c.MessageSessionClient(ctx, set.ID, "one")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.MessageSessionClient(ctx, set.ID, "two")
	if err == nil || !strings.Contains(err.Error(), "409 Conflict") || !strings.Contains(err.Error(), "RunnerScaleSetSessionConflictException") {
		t.Fatalf("a second session: %v", err)
	}
	if info, _ := fake.ScaleSet(set.ID); info.SessionOwner != "one" {
		t.Fatalf("session held by %q, want one", info.SessionOwner)
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := c.MessageSessionClient(ctx, set.ID, "two")
	if err != nil {
		t.Fatalf("a session after the first closed: %v", err)
	}
	defer second.Close(ctx)
	if info, _ := fake.ScaleSet(set.ID); info.SessionOwner != "two" {
		t.Fatalf("session held by %q, want two", info.SessionOwner)
	}
}

// TestASessionNobodyPollsEndsSoAnotherListenerCanTakeOver: a listener
// killed mid-poll never deletes its session; while it polled, a second
// listener was refused, and once nobody polled it for SessionIdleExpiry
// the second gets its own. (Without the expiry the second is refused
// forever: "after the first went quiet: … 409 Conflict".)
func TestASessionNobodyPollsEndsSoAnotherListenerCanTakeOver(t *testing.T) {
	fake := newScaleSetFake(t, fakegithub.ScaleSetOptions{PollWait: 300 * time.Millisecond, SessionIdleExpiry: 500 * time.Millisecond})
	c := newScaleSetClient(t, fake, "acme")
	ctx := context.Background()
	set := createScaleSet(t, c, "ssa", false)
	first, err := c.MessageSessionClient(ctx, set.ID, "one")
	if err != nil {
		t.Fatal(err)
	}
	// Polling for longer than the expiry keeps the first alive.
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if _, err := first.GetMessage(ctx, 0, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := c.MessageSessionClient(ctx, set.ID, "two"); err == nil {
			t.Fatal("a second session while the first was polled")
		}
	}
	time.Sleep(700 * time.Millisecond) // the first listener is gone
	second, err := c.MessageSessionClient(ctx, set.ID, "two")
	if err != nil {
		t.Fatalf("after the first went quiet: %v", err)
	}
	defer second.Close(ctx)
	if info, _ := fake.ScaleSet(set.ID); info.SessionOwner != "two" {
		t.Fatalf("session held by %q, want two", info.SessionOwner)
	}
}

// TestAnUnacknowledgedMessageIsDeliveredAgain, until DeleteMessage
// acknowledges it; then acquiring the job brings JobAssigned, and the
// statistics count it assigned. (Without redelivery the second
// GetMessage is the empty poll and this fails with "delivered again:
// <nil>".)
func TestAnUnacknowledgedMessageIsDeliveredAgain(t *testing.T) {
	fake := newScaleSetFake(t, fakegithub.ScaleSetOptions{PollWait: 200 * time.Millisecond})
	c := newScaleSetClient(t, fake, "acme")
	ctx := context.Background()
	set := createScaleSet(t, c, "ssa", false)
	session, err := c.MessageSessionClient(ctx, set.ID, "one")
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(ctx)
	id := fake.EnqueueScaleSetJob("acme", "api", "ssa", "true")
	first, err := session.GetMessage(ctx, 0, 1)
	if err != nil || first == nil || len(first.JobAvailableMessages) != 1 || first.JobAvailableMessages[0].RunnerRequestID != id {
		t.Fatalf("first message: %+v %v", first, err)
	}
	if a := first.JobAvailableMessages[0]; a.RepositoryName != "api" || a.OwnerName != "acme" || first.Statistics.TotalAvailableJobs != 1 {
		t.Fatalf("JobAvailable %+v, statistics %+v", a, first.Statistics)
	}
	again, err := session.GetMessage(ctx, first.MessageID, 1)
	if err != nil || again == nil || again.MessageID != first.MessageID || len(again.JobAvailableMessages) != 1 {
		t.Fatalf("delivered again: %+v %v", again, err)
	}
	if info, _ := fake.ScaleSet(set.ID); info.Delivered != 2 || info.Acknowledged != 0 {
		t.Fatalf("delivered %d, acknowledged %d; want 2, 0", info.Delivered, info.Acknowledged)
	}
	if err := session.DeleteMessage(ctx, first.MessageID); err != nil {
		t.Fatal(err)
	}
	if next, err := session.GetMessage(ctx, first.MessageID, 1); err != nil || next != nil {
		t.Fatalf("after the acknowledgement: %+v %v, want the empty poll", next, err)
	}
	got, err := session.AcquireJobs(ctx, []int64{id, 99999})
	if err != nil || len(got) != 1 || got[0] != id {
		t.Fatalf("AcquireJobs: %v %v, want [%d]", got, err, id)
	}
	assigned, err := session.GetMessage(ctx, first.MessageID, 1)
	if err != nil || assigned == nil || len(assigned.JobAssignedMessages) != 1 || assigned.Statistics.TotalAssignedJobs != 1 || assigned.Statistics.TotalAvailableJobs != 0 {
		t.Fatalf("after AcquireJobs: %+v %v", assigned, err)
	}
	if info, _ := fake.ScaleSet(set.ID); info.Acknowledged != 1 {
		t.Fatalf("acknowledged %d, want 1", info.Acknowledged)
	}
}

// TestAMessageWhoseAcknowledgementIsLostIsDeliveredOnceMore: after
// RedeliverMessage the next DeleteMessage is answered as usual but the
// message stays, so the next poll delivers it again (as the service does
// with a message not deleted); the one after that is acknowledged.
func TestAMessageWhoseAcknowledgementIsLostIsDeliveredOnceMore(t *testing.T) {
	fake := newScaleSetFake(t, fakegithub.ScaleSetOptions{PollWait: 200 * time.Millisecond})
	c := newScaleSetClient(t, fake, "acme")
	ctx := context.Background()
	set := createScaleSet(t, c, "ssr", false)
	if fake.RedeliverMessage(set.ID) {
		t.Fatal("RedeliverMessage without a session: want false")
	}
	session, err := c.MessageSessionClient(ctx, set.ID, "one")
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(ctx)
	if !fake.RedeliverMessage(set.ID) {
		t.Fatal("RedeliverMessage with a session: want true")
	}
	id := fake.EnqueueScaleSetJob("acme", "api", "ssr", "true")
	first, err := session.GetMessage(ctx, 0, 1)
	if err != nil || first == nil || len(first.JobAvailableMessages) != 1 || first.JobAvailableMessages[0].RunnerRequestID != id {
		t.Fatalf("first message: %+v %v", first, err)
	}
	if err := session.DeleteMessage(ctx, first.MessageID); err != nil {
		t.Fatal(err)
	}
	again, err := session.GetMessage(ctx, first.MessageID, 1)
	if err != nil || again == nil || again.MessageID != first.MessageID || len(again.JobAvailableMessages) != 1 {
		t.Fatalf("after the lost acknowledgement: %+v %v, want the same message again", again, err)
	}
	if err := session.DeleteMessage(ctx, again.MessageID); err != nil {
		t.Fatal(err)
	}
	if next, err := session.GetMessage(ctx, again.MessageID, 1); err != nil || next != nil {
		t.Fatalf("after the second acknowledgement: %+v %v, want the empty poll", next, err)
	}
	if info, _ := fake.ScaleSet(set.ID); info.Delivered != 2 || info.Acknowledged != 1 || info.Redelivered != 1 {
		t.Fatalf("delivered %d, acknowledged %d, redelivered %d; want 2, 1, 1", info.Delivered, info.Acknowledged, info.Redelivered)
	}
}

// TestAPollWithNothingToSayIsA202AfterTheWait: GetMessage returns nil,
// nil (the library's reading of 202 with no body) once PollWait passed.
func TestAPollWithNothingToSayIsA202AfterTheWait(t *testing.T) {
	const wait = 400 * time.Millisecond
	fake := newScaleSetFake(t, fakegithub.ScaleSetOptions{PollWait: wait})
	c := newScaleSetClient(t, fake, "acme")
	ctx := context.Background()
	set := createScaleSet(t, c, "ssa", false)
	session, err := c.MessageSessionClient(ctx, set.ID, "one")
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(ctx)
	start := time.Now()
	msg, err := session.GetMessage(ctx, 0, 3)
	if took := time.Since(start); err != nil || msg != nil || took < wait || took > wait+2*time.Second {
		t.Fatalf("an empty poll: %+v %v after %v, want nil, nil after about %v", msg, err, took, wait)
	}
	if info, _ := fake.ScaleSet(set.ID); info.Delivered != 0 || info.MaxCapacity != 3 {
		t.Fatalf("%+v", info)
	}
}
