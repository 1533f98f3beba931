package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
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

// Deps are the dependencies of every function.
type Deps struct {
	Store  *state.Store
	SQS    pool.SQSAPI
	GitHub GitHub
	Log    *slog.Logger
	// IDTokens checks the invoking job's OIDC token (provision, release);
	// nil refuses every run.
	IDTokens TokenVerifier
	// Poll, when set, is the interval of signal waits and of retries of a
	// busy runner's deletion (tests shorten it, the benchmarks lengthen it
	// to a 10 s polling interval for comparison); see WaitEvery and
	// retryEvery for the defaults.
	Poll time.Duration
	// Groups, when set, caches runner group ids across invocations (the
	// execution environment's); nil asks GitHub every time.
	Groups *GroupIDs

	watchOnce sync.Once
	watch     *state.Watcher

	mu    sync.Mutex
	pools map[string]*state.PoolConfig
	roles map[string]string // pool name → instance role id (poolOfRole)
}

// Pool reads a pool's configuration once per invocation, with its timings
// completed from the defaults.
func (d *Deps) Pool(ctx context.Context, name string) (*state.PoolConfig, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p, ok := d.pools[name]; ok {
		return p, nil
	}
	p, err := d.Store.GetPoolConfig(ctx, name)
	if err != nil {
		return nil, err
	}
	p.Timings = p.Timings.WithDefaults()
	if d.pools == nil {
		d.pools = map[string]*state.PoolConfig{}
	}
	d.pools[name] = p
	return p, nil
}

// PoolOf is the pool a record belongs to by its key: the pool whose
// instance role id the key starts with. It sets the record's pool and
// owner from that pool, whatever the record said: an instance can write its
// own record, never its key (docs/security.md, T6).
func (d *Deps) PoolOf(ctx context.Context, inst *state.Instance) (*state.PoolConfig, error) {
	role := inst.Key.RoleID()
	name, err := d.poolOfRole(ctx, role)
	if err != nil {
		return nil, err
	}
	if role == "" || name == "" {
		return nil, fmt.Errorf("record %s: no pool has instance role %q: %w", inst.Key, role, state.ErrNotFound)
	}
	p, err := d.Pool(ctx, name)
	if err != nil {
		return nil, err
	}
	if inst.Pool != p.Name || inst.Owner != p.Owner {
		inst.Forged = append(inst.Forged, "pool="+inst.Pool, "owner="+inst.Owner)
		inst.Pool, inst.Owner = p.Name, p.Owner
	}
	return p, nil
}

// poolOfRole names the pool whose instance role has the id role, reading
// the pool configurations once per invocation ("" when none has).
func (d *Deps) poolOfRole(ctx context.Context, role string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.roles == nil {
		pools, err := d.Store.ListPoolConfigs(ctx)
		if err != nil {
			return "", err
		}
		d.roles = state.RolesByPool(pools)
	}
	for name, id := range d.roles {
		if id == role {
			return name, nil
		}
	}
	return "", nil
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

// Watcher serves every signal wait of these Deps with one batch read per
// WaitEvery for all the records waited on.
func (d *Deps) Watcher() *state.Watcher {
	d.watchOnce.Do(func() { d.watch = state.NewWatcher(d.Store, d.WaitEvery()) })
	return d.watch
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

// Repool waits until the agent confirms the idle instance is clean for its
// assignment, then sends the pool message and records it. When the agent
// fails or does not answer within wait, the instance is expired instead
// (never pooled) and refresh terminates it. It returns whether it pooled.
func (d *Deps) Repool(ctx context.Context, idle *state.Instance, p *state.PoolConfig, wait time.Duration) (bool, string) {
	log := d.Log.With("instanceId", idle.ID, "assignment", idle.Assignment)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	clean, err := d.Watcher().WaitSignal(wctx, idle.Key, idle.Assignment, state.SignalRemoveRegOK, state.SignalRemoveRegFailed)
	if err != nil {
		detail := "agent did not confirm it is clean: " + err.Error()
		d.expire(ctx, idle.Ref(), detail)
		log.Warn("instance not pooled", "reason", detail)
		return false, detail
	}
	if _, interrupted := clean.Signals[state.SignalInterrupted]; interrupted {
		// EC2 is taking a spot instance back: never pool it.
		d.expire(ctx, clean.Ref(), "spot interruption notice")
		return false, "spot interruption notice"
	}
	if clean.HasRebalance() {
		// EC2 recommends rebalancing a spot instance, the early sign of
		// its interruption: it ran its job to the end, but takes no next.
		d.expire(ctx, clean.Ref(), "EC2 recommended rebalancing the spot instance")
		return false, "rebalance recommendation"
	}
	if p.Draining {
		// An operator drains the pool: nothing goes back into it.
		d.expire(ctx, clean.Ref(), "pool draining")
		return false, "pool draining"
	}
	msg := pool.Message{InstanceID: clean.ID, Pool: clean.Pool, InstanceType: clean.InstanceType, UsageClass: clean.UsageClass, IdleUntil: clean.Threshold}
	if err := d.Queue(p).Send(ctx, msg); err != nil {
		// The record is clean and idle without pooledAt: refresh re-sends.
		log.Warn("pool message not sent; refresh will send it", "err", err)
		return true, err.Error()
	}
	if _, err := d.Store.MarkPooled(ctx, clean.Ref()); err != nil {
		log.Warn("pooledAt not recorded", "err", err)
	}
	return true, ""
}

// expire sets an instance's lease into the past; refresh terminates it.
func (d *Deps) expire(ctx context.Context, ref state.Ref, reason string) {
	if _, err := d.Store.Expire(context.WithoutCancel(ctx), ref, reason); err != nil && state.ClauseOf(err) == "" {
		d.Log.Error("expire instance", "instanceId", ref.ID, "err", err)
	}
}

// Expire is expire for the functions.
func (d *Deps) Expire(ctx context.Context, ref state.Ref, reason string) { d.expire(ctx, ref, reason) }
