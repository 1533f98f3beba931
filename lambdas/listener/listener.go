// Package listener is the scale-set listener: one long-running process per
// deployment (GHRUNNER_HANDLER=listener of the bundle) that serves every
// pool with a scale set (state.PoolConfig.ScaleSet). For each, it creates
// or updates the runner scale set at GitHub, holds its message session
// through github.com/actions/scaleset, and gives each runner the scale set
// needs a warm instance of the pool.
//
// Invariants:
//   - a scale set is served as standing runs of its pool (state.Run.ScaleSet),
//     one instance and one runner each: provisioned exactly as a
//     workflow's run is (the same conditional claim, capacity cap, queue
//     and launch), with the runner minted from the scale set;
//   - every job boundary is a run boundary: a run is released when its job
//     ended, which reaps, wipes and checks the instance before it is
//     pooled again (the next job may be another repository's);
//   - the scale set is sized by GitHub's TotalAssignedJobs, never by
//     counting messages, and never beyond its maximum;
//   - the records, not the messages, say which runs exist (reconcile.go):
//     a listener killed at any point leaks no instance, and a runner that
//     ended unseen is released;
//   - one session per scale set: a second listener waits for the first to
//     go (GitHub answers it 409) and never serves beside it.
package listener

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/actions/scaleset"
	sslistener "github.com/actions/scaleset/listener"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// API is what the listener asks of GitHub's scale set service:
// *scaleset.Client.
type API interface {
	GetRunnerGroupByName(ctx context.Context, name string) (*scaleset.RunnerGroup, error)
	GetRunnerScaleSet(ctx context.Context, runnerGroupID int, name string) (*scaleset.RunnerScaleSet, error)
	CreateRunnerScaleSet(ctx context.Context, set *scaleset.RunnerScaleSet) (*scaleset.RunnerScaleSet, error)
	UpdateRunnerScaleSet(ctx context.Context, id int, set *scaleset.RunnerScaleSet) (*scaleset.RunnerScaleSet, error)
	GenerateJitRunnerConfig(ctx context.Context, setting *scaleset.RunnerScaleSetJitRunnerSetting, scaleSetID int) (*scaleset.RunnerScaleSetJitRunnerConfig, error)
	MessageSessionClient(ctx context.Context, scaleSetID int, owner string, options ...scaleset.HTTPOption) (*scaleset.MessageSessionClient, error)
}

var _ API = (*scaleset.Client)(nil)

// Config is one listener.
type Config struct {
	// Name identifies this listener as the session's owner (ECS's task id).
	Name string
	Log  *slog.Logger
	// NewDeps makes the control plane's dependencies for a scale set: the
	// provision functions' own, with GitHub as given (its just-in-time
	// runners minted from the scale set).
	NewDeps func(gh controlplane.GitHub) provision.Deps
	// GitHub is the control plane's GitHub (runners, groups, tokens).
	GitHub controlplane.GitHub
	// Retry is the first wait after a session is refused or ends with an
	// error; it doubles to RetryMax (defaults 2 s and 60 s).
	Retry, RetryMax time.Duration
	// Status keeps each scale set's status (seen.go); nil: none kept.
	Status StatusWriter
	// Metrics receives the listener's EMF lines (stdout, as the
	// functions'), with Environment as their environment; nil: none.
	Metrics     io.Writer
	Environment string
	// Usage counts the usage ledger's spans the listener's store wrote
	// and lost, reported with the polls; nil: not reported.
	Usage *UsageSpans
}

// ServePool serves pool p's scale set until ctx ends: the scale set is made
// or updated, then a session is held and its messages answered; a lost
// session (a conflict with another listener, GitHub's errors) is asked for
// again with backoff.
func ServePool(ctx context.Context, c Config, api API, p *state.PoolConfig) error {
	if p.ScaleSet == nil {
		return fmt.Errorf("pool %s has no scale set", p.Name)
	}
	log := c.Log.With("pool", p.Name)
	retry, retryMax := c.Retry, c.RetryMax
	if retry <= 0 {
		retry = 2 * time.Second
	}
	if retryMax <= 0 {
		retryMax = time.Minute
	}
	wait := retry
	sn := newSeen(c, p, log)
	go every(ctx, reportEvery, sn.report)
	for {
		err := withHint(servePoolOnce(ctx, c, api, p, log, sn), p.Owner)
		sn.ended(ctx, err)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Error("scale set not served; trying again", "err", err, "in", wait.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMax)
	}
}

func servePoolOnce(ctx context.Context, c Config, api API, p *state.PoolConfig, log *slog.Logger, sn *seen) error {
	set, err := ensureScaleSet(ctx, api, p)
	if err != nil {
		return err
	}
	gh := mintFromScaleSet{GitHub: c.GitHub, api: api, setID: set.ID}
	scaler := newScaler(context.WithoutCancel(ctx), c.NewDeps(gh), p, set, log)
	sess, err := api.MessageSessionClient(ctx, set.ID, c.Name)
	if err != nil {
		return fmt.Errorf("message session of scale set %s: %w", set.Name, err)
	}
	defer func() {
		// Another listener may take the scale set over at once.
		if err := sess.Close(context.WithoutCancel(ctx)); err != nil {
			log.Warn("close the message session", "err", err)
		}
	}()
	log.Info("message session held", "scaleSet", set.Name, "scaleSetId", set.ID, "sessionId", sess.Session().SessionID.String())
	sn.taken(ctx, set, scaler.Live)
	if err := scaler.adopt(ctx); err != nil {
		return fmt.Errorf("find the scale set's runs: %w", err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go every(rctx, reconcileEvery, scaler.reconcile)
	l, err := sslistener.New(newFairShare(sn.watch(sess), p.MaxProvisionsPerRepository, log), sslistener.Config{ScaleSetID: set.ID, MaxRunners: scaler.max, Logger: log}, sslistener.WithMetricsRecorder(sn))
	if err != nil {
		return err
	}
	err = l.Run(ctx, scaler)
	// Claims and releases under way finish before the process ends (ECS
	// gives a stopped task 30 s by default before it kills it); what is
	// cut short is found again by the next listener (adopt) or refresh.
	waited := make(chan struct{})
	go func() { scaler.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(drainFor):
		log.Warn("claims or releases still under way at exit", "runs", scaler.Live())
	}
	return err
}

// drainFor bounds the wait for work under way when the listener stops.
const drainFor = 25 * time.Second

// ensureScaleSet finds the pool's scale set in its runner group, or makes
// it, with updates disabled: the pool pins the runner release its
// instances install (a runner that updated itself mid-job would not be).
func ensureScaleSet(ctx context.Context, api API, p *state.PoolConfig) (*scaleset.RunnerScaleSet, error) {
	groupName := p.RunnerGroup
	if groupName == "" {
		groupName = scaleset.DefaultRunnerGroup
	}
	group, err := api.GetRunnerGroupByName(ctx, groupName)
	if err != nil {
		return nil, fmt.Errorf("runner group %q of pool %s: %w", groupName, p.Name, err)
	}
	want := &scaleset.RunnerScaleSet{
		Name: p.ScaleSet.Name, RunnerGroupID: group.ID, RunnerGroupName: group.Name,
		Labels:        []scaleset.Label{{Type: "System", Name: p.ScaleSet.Name}},
		RunnerSetting: scaleset.RunnerSetting{DisableUpdate: true},
	}
	set, err := api.GetRunnerScaleSet(ctx, group.ID, p.ScaleSet.Name)
	if err != nil {
		return nil, fmt.Errorf("scale set %q: %w", p.ScaleSet.Name, err)
	}
	if set == nil {
		return api.CreateRunnerScaleSet(ctx, want)
	}
	if !set.RunnerSetting.DisableUpdate || !hasLabel(set, p.ScaleSet.Name) {
		return api.UpdateRunnerScaleSet(ctx, set.ID, want)
	}
	return set, nil
}

func hasLabel(set *scaleset.RunnerScaleSet, name string) bool {
	for _, l := range set.Labels {
		if strings.EqualFold(l.Name, name) {
			return true
		}
	}
	return false
}

// mintFromScaleSet is the control plane's GitHub with its just-in-time
// runners minted from a scale set: the runner joins the scale set (its
// labels, group and runner setting), so GitHub sends it only the scale
// set's jobs. Everything else is the REST API's.
type mintFromScaleSet struct {
	controlplane.GitHub
	api   API
	setID int
}

// GenerateJITConfig ignores groupID and labels: a scale set's runner has
// the scale set's.
func (m mintFromScaleSet) GenerateJITConfig(ctx context.Context, owner, name string, groupID int64, labels []string) (github.JITConfig, error) {
	cfg, err := m.api.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: name, WorkFolder: "_work"}, m.setID)
	if errors.Is(err, scaleset.RunnerExistsError) {
		return github.JITConfig{}, fmt.Errorf("%w: %w", github.ErrNameTaken, err)
	}
	if err != nil {
		return github.JITConfig{}, err
	}
	if cfg.Runner == nil {
		return github.JITConfig{}, fmt.Errorf("generatejitconfig of scale set %d: no runner in the answer", m.setID)
	}
	return github.JITConfig{RunnerID: int64(cfg.Runner.ID), Name: cfg.Runner.Name, Encoded: cfg.EncodedJITConfig}, nil
}
