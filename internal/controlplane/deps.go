package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/pool"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// GitHub is what the control plane asks of GitHub.
type GitHub interface {
	// RegistrationToken and RemoveToken return a token for config.sh of a
	// runner of owner ("acme" or "acme/api"), valid about an hour.
	RegistrationToken(ctx context.Context, owner string) (token string, expires time.Time, err error)
	RemoveToken(ctx context.Context, owner string) (token string, expires time.Time, err error)
	// RunnerURL is the URL config.sh registers a runner of owner at.
	RunnerURL(owner string) string
	// DeleteRunner removes a runner; a runner that is gone already is no error.
	DeleteRunner(ctx context.Context, owner string, runnerID int64) error
	// GetRunner reads one runner (status "online"/"offline", busy).
	GetRunner(ctx context.Context, owner string, runnerID int64) (github.Runner, error)
	// ListRunners lists every runner of owner.
	ListRunners(ctx context.Context, owner string) ([]github.Runner, error)
	// RunnerNamed reads owner's runner of this name; github.IsNotFound
	// when there is none.
	RunnerNamed(ctx context.Context, owner, name string) (github.Runner, error)
	// RunnerGroupID finds an organization's runner group by name;
	// github.IsNotFound when it has none of that name.
	RunnerGroupID(ctx context.Context, org, name string) (int64, error)
	// GenerateJITConfig makes a just-in-time runner; github.IsNameTaken
	// when owner has a runner of that name.
	GenerateJITConfig(ctx context.Context, owner, name string, groupID int64, labels []string) (github.JITConfig, error)
	// LatestRunnerRelease reads actions/runner's latest release through
	// owner's installation: tag, publication time, release notes.
	LatestRunnerRelease(ctx context.Context, owner string) (tag string, published time.Time, body string, err error)
}

// Deps are what every function runs with: its dependencies (the state
// store, SQS, GitHub, the OIDC verifier, the logger; the clock is the
// store's, see Now), a cache that outlives the invocation (Groups), the
// test hook Poll, and the caches of one invocation (invocation, in
// cache.go).
type Deps struct {
	Store  *state.Store
	SQS    pool.SQSAPI
	GitHub GitHub
	Log    *slog.Logger
	// IDTokens checks the invoking job's OIDC token (provision, release);
	// nil refuses every run.
	IDTokens TokenVerifier

	// Groups, when set, caches runner group ids across invocations (the
	// execution environment's); nil asks GitHub every time.
	Groups *GroupIDs

	// Poll, the test hook, when set, is the interval of signal waits and
	// of retries of a busy runner's deletion (tests shorten it, the
	// benchmarks lengthen it to a 10 s polling interval for comparison);
	// see WaitEvery and retryEvery for the defaults.
	Poll time.Duration

	inv invocation
}

// Now is the control plane's clock: the store's, which tests move.
func (d *Deps) Now() time.Time { return d.Store.Now() }

// Queue returns the pool queue of a pool.
func (d *Deps) Queue(p *state.PoolConfig) *pool.Queue { return pool.New(d.SQS, p.QueueURL) }

// WaitEvery is how often a wait for an agent's signal reads the record:
// four consistent reads a second per waiting instance. Each read costs
// a fraction of a millisecond of a request unit; the function's time
// waiting for a signal that already came costs more, and on the warm path
// (runner online 0.5 s after the claim) a 1 s interval was half of a
// provision's time.
func (d *Deps) WaitEvery() time.Duration {
	if d.Poll > 0 {
		return d.Poll
	}
	return 250 * time.Millisecond
}

// retryEvery is how often a refused GitHub call is tried again: GitHub's
// rate limit, not a record read, is what it spends.
func (d *Deps) retryEvery() time.Duration {
	if d.Poll > 0 {
		return d.Poll
	}
	return time.Second
}

// RemovalFor returns the remove material the agent needs to deregister a
// runner of owner.
func (d *Deps) RemovalFor(ctx context.Context, owner string) (*state.Registration, error) {
	tok, exp, err := d.GitHub.RemoveToken(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("GitHub remove token for %s: %w", owner, err)
	}
	return &state.Registration{Purpose: state.PurposeRemove, URL: d.GitHub.RunnerURL(owner), Token: tok, ExpiresAt: exp.Unix()}, nil
}

// RegistrationFor returns the registration material for a runner of owner.
func (d *Deps) RegistrationFor(ctx context.Context, owner string) (*state.Registration, error) {
	tok, exp, err := d.GitHub.RegistrationToken(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("GitHub registration token for %s: %w", owner, err)
	}
	return &state.Registration{Purpose: state.PurposeRegister, URL: d.GitHub.RunnerURL(owner), Token: tok, ExpiresAt: exp.Unix()}, nil
}

// expire sets an instance's lease into the past; refresh terminates it.
func (d *Deps) expire(ctx context.Context, ref state.Ref, reason string) {
	if _, err := d.Store.Expire(context.WithoutCancel(ctx), ref, reason); err != nil && state.ClauseOf(err) == "" {
		d.Log.Error("expire instance", "instanceId", ref.ID, "err", err)
	}
}

// Expire is expire for the functions.
func (d *Deps) Expire(ctx context.Context, ref state.Ref, reason string) { d.expire(ctx, ref, reason) }
