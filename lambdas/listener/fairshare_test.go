package listener

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/actions/scaleset"
	sslistener "github.com/actions/scaleset/listener"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// idleScaler sizes nothing: the test looks at acquisitions alone.
type idleScaler struct{}

func (idleScaler) HandleDesiredRunnerCount(_ context.Context, n int) (int, error) { return n, nil }
func (idleScaler) HandleJobStarted(context.Context, *scaleset.JobStarted) error   { return nil }
func (idleScaler) HandleJobCompleted(context.Context, *scaleset.JobCompleted) error {
	return nil
}

// A repository that queues many jobs holds at most its share of the scale
// set's acquired jobs; another repository's job, queued after them, is
// acquired at once; when one of the first repository's jobs ends, its
// next one is acquired. The library's listener and client talk to the
// fake GitHub as in production, through the gate. Checked: with the
// gate's limit 0 (every acquisition passed through, as before), all four
// of acme/big's jobs were acquired and this failed.
func TestARepositoryHoldsAtMostItsShareOfAScaleSetsJobs(t *testing.T) {
	fake := fakegithub.NewServer(fakegithub.Options{Orgs: []string{"acme"}, ScaleSet: fakegithub.ScaleSetOptions{PollWait: 200 * time.Millisecond, JobPickup: time.Minute}})
	t.Cleanup(fake.Close)
	ctx, cancel := context.WithCancel(context.Background())
	c, err := scaleset.NewClientWithGitHubApp(scaleset.ClientWithGitHubAppConfig{
		GitHubConfigURL: fake.ScaleSetConfigURL("acme"),
		GitHubAppAuth:   scaleset.GitHubAppAuth{ClientID: strconv.FormatInt(fake.AppID, 10), InstallationID: fake.InstallationID("acme"), PrivateKey: string(fake.PrivateKeyPEM)},
		SystemInfo:      scaleset.SystemInfo{System: "ghrunner-tests", Subsystem: "fairshare"},
	})
	if err != nil {
		t.Fatal(err)
	}
	group, err := c.GetRunnerGroupByName(ctx, scaleset.DefaultRunnerGroup)
	if err != nil {
		t.Fatal(err)
	}
	set, err := c.CreateRunnerScaleSet(ctx, &scaleset.RunnerScaleSet{Name: "ss-fair", RunnerGroupID: group.ID, Labels: []scaleset.Label{{Name: "ss-fair"}}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := c.MessageSessionClient(ctx, set.ID, "fair-1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := sslistener.New(newFairShare(sess, 2, slog.New(slog.NewTextHandler(io.Discard, nil))), sslistener.Config{ScaleSetID: set.ID, MaxRunners: 10})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, idleScaler{}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("listener: %v", err)
		}
	})

	var big []int64
	for range 4 {
		big = append(big, fake.EnqueueScaleSetJob("acme", "big", "ss-fair", "true"))
	}
	small := fake.EnqueueScaleSetJob("acme", "small", "ss-fair", "true")
	acquired := func() (bigN int, smallOK bool) {
		for _, id := range big {
			if fake.ScaleSetJobAcquired(id) {
				bigN++
			}
		}
		return bigN, fake.ScaleSetJobAcquired(small)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				n, s := acquired()
				t.Fatalf("%s: acme/big has %d acquired, acme/small's acquired: %v", what, n, s)
			}
		}
	}
	waitFor("acme/small's job acquired", func() bool { _, s := acquired(); return s })
	time.Sleep(time.Second) // a few polls more: nothing else may be acquired
	if n, _ := acquired(); n != 2 {
		t.Fatalf("acme/big has %d jobs acquired, want its share of 2", n)
	}
	var first int64
	for _, id := range big {
		if fake.ScaleSetJobAcquired(id) {
			first = id
			break
		}
	}
	if !fake.CancelQueuedJob(first) {
		t.Fatal("could not end acme/big's first acquired job")
	}
	waitFor("acme/big's third job acquired once one of its two ended", func() bool {
		n, _ := acquired()
		return n == 2 && !fake.ScaleSetJobAcquired(first)
	})
}
