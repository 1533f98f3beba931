// Package provision is the provision function: it gives a run its runners,
// reusing clean idle instances from the pool and creating the rest, and
// returns once every one is registered with GitHub under the runId label.
//
// Invariants:
//   - a pool never has more live instances than maxInstances: every launch
//     is reserved first against the pool's capacity item (records not
//     terminated plus launches in flight), by a conditional write;
//   - no launched instance is left without a record or a reservation: an
//     instance whose record could not be written is terminated at once, and
//     one launched by a provision killed before its records counts against
//     the cap until refresh must have terminated it;
//   - a failed provision marks its run failed before anything else, then
//     gives back what it holds within the invocation's deadline;
//   - an agent's liveness is never judged by its clock: a claimed instance is
//     kept if EC2 runs it, and its registration is awaited for the claim's
//     lease; a spot interruption notice or a FAILED signal replaces the
//     instance at once (once per instance asked for, while a boot still
//     fits the deadline);
//   - the pool queue is a hint: when it fails, provision creates instead.
package provision

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Input is the provision payload.
type Input struct {
	RunID                string   `json:"runId"`
	Pool                 string   `json:"pool"`
	InstanceCount        *int     `json:"instanceCount,omitempty"`
	UsageClass           string   `json:"usageClass,omitempty"`
	AllowedInstanceTypes []string `json:"allowedInstanceTypes,omitempty"`
	Owner                string   `json:"owner,omitempty"`
	TimeoutSeconds       *int     `json:"timeoutSeconds,omitempty"`
	// MinInstanceCount is the fewest runners the run accepts when its pool
	// stays at its cap until the provision must stop waiting (queue.go);
	// its jobs then queue on its label. Default: instanceCount.
	MinInstanceCount *int `json:"minInstanceCount,omitempty"`
	// Preflight, alone in a payload (or with Repositories), checks
	// instead of provisioning (preflight.go).
	Preflight bool `json:"preflight,omitempty"`
	// Repositories, with Preflight only, are the repositories whose
	// workflows will invoke provision (the module's invoker_repositories):
	// preflight checks that each organization pool's runner group admits
	// those of its organization (groupaccess.go).
	Repositories []string `json:"repositories,omitempty"`
	// WaitSeconds (1 to 300) bounds how long a call for a run another
	// call provisions already waits before it answers status
	// "provisioning": not ready yet, ask again (join.go). invoke.sh sends
	// it, so that no connection waits for minutes. The call that starts
	// the run provisions it whatever this says; its caller may stop
	// waiting for it (the invocation runs on) and ask again. Without it a
	// second call waits for the run to end. Not part of the request: each
	// call may send another.
	WaitSeconds *int `json:"waitSeconds,omitempty"`
	// IDToken is the invoking job's GitHub Actions OIDC token: the run is
	// bound to its repository and workflow run (controlplane.Caller). It is
	// never stored, logged or part of the canonical request: a retried
	// provision may come with a fresh token (only its jti is kept, to
	// refuse it for any other call: controlplane.Caller).
	IDToken string `json:"idToken,omitempty"`
}

// Instance is one runner given to the run.
type Instance struct {
	InstanceID   string `json:"instanceId"`
	InstanceType string `json:"instanceType"`
	UsageClass   string `json:"usageClass"`
	Source       string `json:"source"` // "reused", "started" (the stopped tier) or "created"
	// The instance's way to ready, in seconds since provision began: it
	// became the run's (claimed from the pool, or launched and recorded),
	// its runner's configuration was in its record (a just-in-time
	// configuration minted, or the registration token written with the
	// claim), and its agent reported the runner online.
	ClaimedSeconds    float64 `json:"claimedSeconds"`
	ConfiguredSeconds float64 `json:"configuredSeconds"`
	ReadySeconds      float64 `json:"readySeconds"`
}

// Output is what provision returns.
type Output struct {
	RunID string `json:"runId"`
	// Label is what the run's jobs name in runs-on.
	Label string `json:"label"`
	Pool  string `json:"pool"`
	// Status is "ready"; "provisioning" (StatusProvisioning) when the
	// call answered within waitSeconds while the run is still being
	// provisioned: ask again with the same payload; preflight-ok or
	// preflight-failed for a preflight.
	Status    string     `json:"status"`
	Instances []Instance `json:"instances"`
	Reused    int        `json:"reused"`
	Created   int        `json:"created"`
	// Started counts instances started from the pool's stopped tier
	// (start.go); StartsFailed says what EC2 answered the starts that
	// failed (those instances were terminated and launches took their
	// place).
	Started      int      `json:"started,omitempty"`
	StartsFailed []string `json:"startsFailed,omitempty"`
	// UsageClass is the one asked for (the pool's when the payload gave
	// none): a created on-demand instance of a spot request is a fallback.
	UsageClass string `json:"usageClass"`
	// SpotBreaker says the pool's spot breaker was open: instances were
	// created on-demand for a spot request (state.SpotBreaker), counted
	// apart from a capacity fallback.
	SpotBreaker bool `json:"spotBreaker,omitempty"`
	// ClaimsRefused counts pool messages whose instance could not be
	// claimed: another provision took it first, or the message was stale.
	ClaimsRefused  int     `json:"claimsRefused"`
	ElapsedSeconds float64 `json:"elapsedSeconds"`
	// QueuedSeconds is how long the run waited in the pool's capacity
	// queue (queue.go) because the pool was at max_instances: 0 when it
	// did not wait.
	QueuedSeconds float64 `json:"queuedSeconds,omitempty"`
	// Progress says, with status provisioning, how far the run got
	// (runners ready of those asked, or no instance yet).
	Progress string `json:"progress,omitempty"`
	// Checks are a preflight's findings (Status preflight-ok or
	// preflight-failed).
	Checks []Check `json:"checks,omitempty"`
}

// Deps are what provision runs with: the control plane's and EC2.
type Deps struct {
	*controlplane.Deps
	EC2 Launcher // FleetLauncher in the bundle
	// Quotas, when set, lets preflight compare each pool's maximum with
	// the account's vCPU quota (AWSQuotas in the bundle).
	Quotas Quotas
}

// Handle runs one provision.
func Handle(ctx context.Context, deps Deps, payload json.RawMessage) (*Output, error) {
	start := time.Now()
	d := deps.Deps
	in, err := ParsePayload(payload)
	if err != nil {
		return nil, err
	}
	if in.Preflight {
		return preflight(ctx, deps, in.Repositories, start)
	}
	req, err := parse(ctx, d, in)
	if err != nil {
		return nil, err
	}
	// Who asks, checked before anything is read or written for the run.
	caller, err := d.Caller(ctx, "provision", in.IDToken, in.RunID)
	if err != nil {
		return nil, err
	}
	return provisionRun(ctx, deps, req, caller, start, "")
}

// ForScaleSet provisions a run of scale set scaleSet (its id) for the
// scale-set listener: a caller the control plane established itself, with
// no invoking job's token. The run is marked as the scale set's
// (state.Run.ScaleSet): its runners come from the listener alone, one per
// job. Everything else is what Handle does.
func ForScaleSet(ctx context.Context, deps Deps, in Input, caller idtoken.Identity, scaleSet string) (*Output, error) {
	start := time.Now()
	req, err := parse(ctx, deps.Deps, in)
	if err != nil {
		return nil, err
	}
	return provisionRun(ctx, deps, req, caller, start, scaleSet)
}

func provisionRun(ctx context.Context, deps Deps, req *request, caller idtoken.Identity, start time.Time, scaleSet string) (*Output, error) {
	d, fleet := deps.Deps, deps.EC2
	if req.pool.Draining {
		// A run already under way may ask again (a retried invoke); a new
		// one is refused.
		if _, err := storeOf(d).GetRun(ctx, req.RunID); state.IsNotFound(err) {
			return nil, controlplane.Invalid("pool", "%q is draining (ghrunner drain): it takes no new run; the runs it serves finish. End the drain with ghrunner drain --off %s", req.Pool, req.Pool)
		} else if err != nil {
			return nil, err
		}
	}
	// Fair share (lease.go): a call for a run already under way (asked
	// again, waitSeconds) joins it and takes no lease of its own.
	if done, err := takeLease(ctx, d, req, caller, start); err != nil {
		return nil, err
	} else if done != nil {
		defer done()
	}
	request := req.Input
	request.IDToken, request.WaitSeconds = "", nil
	canonical, _ := json.Marshal(request)
	run, created, err := storeOf(d).StartRun(ctx, state.Run{ID: req.RunID, Pool: req.Pool, Owner: req.Owner, InstanceCount: req.count, Request: string(canonical),
		Label:        newLabel(req.RunID),
		RepositoryID: caller.RepositoryID, Repository: caller.Repository, WorkflowRunID: caller.RunID, RunAttempt: caller.RunAttempt,
		ScaleSet: scaleSet})
	if run != nil && !created {
		// Someone else's run: refused before its label, its request or its
		// state is told.
		if err := controlplane.Owns(run, caller); err != nil {
			return nil, err
		}
	}
	if state.ClauseOf(err) == state.ClausePayload {
		return nil, controlplane.Invalid("runId", "run %s was provisioned with another payload (%s); use a new runId", req.RunID, run.Request)
	}
	if err != nil {
		return nil, err
	}
	// Cleaning up after a failure must fit before the invocation is
	// killed: the run is marked failed first (a retried invoke then fails
	// at once instead of waiting out its own timeout), then what this
	// provision holds is given back, bounded by the invocation's deadline.
	cleanup := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		// The answer must still reach the runtime after the cleanup: 3 s,
		// not 1 (a loaded 2-core CI machine once took longer than 1 s from
		// the end of a rollback to Lambda's deadline).
		var cancel context.CancelFunc
		cleanup, cancel = context.WithDeadline(cleanup, dl.Add(-3*time.Second))
		defer cancel()
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(req.timeout))
	defer cancel()
	p := &provisioner{d: d, fleet: fleet, req: req, label: run.Label, start: start, cleanup: cleanup, repo: caller.RepositoryID, log: d.Log.With("runId", req.RunID, "pool", req.Pool)}
	if !created {
		return p.join(ctx, run)
	}
	out, err := p.provision(ctx)
	if err == nil {
		p.giving.Wait() // replaced instances are back in the pool or retired
	}
	if err != nil {
		p.log.Error("provision failed", "err", err)
		if _, serr := storeOf(d).SetRunStatus(cleanup, req.RunID, state.RunFailed, err.Error(), state.RunProvisioning); serr != nil && state.ClauseOf(serr) == "" {
			p.log.Error("mark run failed", "err", serr)
		}
		p.rollback()
		return nil, err
	}
	return out, nil
}

// rollbackReserve is kept from the provision's own deadline for marking the
// run failed and giving back what it holds (a claimed instance's agent has
// some seconds to confirm it is clean).
const rollbackReserve = 20 * time.Second

func knownPools(ctx context.Context, d *controlplane.Deps) string {
	pools, err := storeOf(d).ListPoolConfigs(ctx)
	if err != nil || len(pools) == 0 {
		return ""
	}
	names := make([]string, len(pools))
	for i, p := range pools {
		names[i] = p.Name
	}
	return "; known pools: " + strings.Join(names, ", ")
}

// provisioner is one provision in progress.
type provisioner struct {
	d     *controlplane.Deps
	fleet Launcher
	req   *request
	label string // the run's runner label
	start time.Time
	repo  string // the invoking repository's id, from its verified token
	log   interface {
		Info(string, ...any)
		Warn(string, ...any)
		Error(string, ...any)
	}

	// cleanup outlives the provision's own deadline, up to the
	// invocation's: giving instances back uses it.
	cleanup context.Context
	giving  sync.WaitGroup // instances being given back

	// jitGroup is the runner group id of a just-in-time pool's runners.
	jitGroup int64
	// queued is the time spent waiting for the pool's capacity.
	queued time.Duration

	mu      sync.Mutex
	mine    map[string]*member // every instance this provision touched
	created int
	reused  int
	refused int // pool messages whose claim was refused
	// startsFailed says what EC2 answered the starts that failed (start.go).
	startsFailed []string
	// byBreaker: a launch used on-demand because the pool's spot breaker
	// was open (spotbreaker.go).
	byBreaker bool
	tried     *launchLog
}

// member is an instance of this run and how far it got.
type member struct {
	inst                       *state.Instance
	source                     string
	claimed, configured, ready float64 // seconds since p.start
	done                       bool
	// stop ends the member's wait early (an instance EC2 has ended).
	stop context.CancelCauseFunc
}

func (p *provisioner) provision(ctx context.Context) (*Output, error) {
	p.mine = map[string]*member{}
	// A just-in-time pool's instances get no token: each gets its first
	// configuration once claimed or recorded (waitOne).
	var reg *state.Registration
	if p.req.pool.JIT() {
		group, err := p.d.GroupID(ctx, p.req.pool)
		if err != nil {
			return nil, err
		}
		p.jitGroup = group
	} else {
		var err error
		if reg, err = p.d.RegistrationFor(ctx, p.req.Owner); err != nil {
			return nil, err
		}
		reg.Labels, reg.Group = p.label, p.req.pool.RunnerGroup
	}
	if err := p.acquire(ctx, reg); err != nil {
		return nil, err
	}
	if err := p.waitAll(ctx, reg); err != nil {
		return nil, err
	}
	if _, err := storeOf(p.d).SetRunStatus(ctx, p.req.RunID, state.RunReady, "", state.RunProvisioning); err != nil {
		if state.ClauseOf(err) == state.ClauseStatus {
			return nil, errors.New("the run was released while it was being provisioned")
		}
		return nil, err
	}
	return p.output(), nil
}
