// Package refresh is the refresh function, run by a schedule: it terminates
// instances whose lease ended, expires those whose agent went silent,
// reconciles EC2 with the records, re-sends pool messages a crash left
// unsent, and tops pools up to their active idle window (prewarm.go).
//
// Invariants:
//   - after a refresh, every live instance of the deployment has a live
//     record and every live record a live instance (except those younger
//     than createdTTL, still being written);
//   - refresh never terminates on a view that may be stale: an instance is
//     terminated only through a conditional write on the assignment it
//     read (an expired lease), or after a consistent read found its record
//     absent or terminated; a pool whose records could not be read is left
//     alone entirely, and the function then fails;
//   - liveness is judged on the control plane's clock: an agent is silent
//     when its heartbeat counter did not move between two refreshes more
//     than the stale limit apart; a running instance whose runner GitHub
//     shows online is never expired for silence;
//   - a claim of a scale set's standing run is never ended under a job:
//     when its lease ran out (its listener died before taking it as
//     running) and GitHub shows a runner the control plane minted for it
//     busy, it is adopted as running instead (adopt.go).
package refresh

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// EC2 is what refresh asks of EC2.
type EC2 interface {
	// Live lists the deployment's instances that are not terminated, by tag.
	Live(ctx context.Context) ([]LiveInstance, error)
	// Terminate terminates instances in batches; gone ones are no error.
	Terminate(ctx context.Context, ids []string) error
	// Reclaimed says which of ids EC2 shows ended because it took their
	// spot capacity back (fleet.Instance.Reclaimed); ids EC2 no longer
	// shows are not among them.
	Reclaimed(ctx context.Context, ids []string) (map[string]bool, error)
}

// Deps are what refresh runs with: the control plane's and EC2.
type Deps struct {
	*controlplane.Deps
	EC2 EC2 // FleetEC2 in the bundle
	// Prewarm launches n instances of a pool that belong to no run
	// (provision.Prewarm in the bundle); nil: refresh does not pre-warm.
	Prewarm func(ctx context.Context, p *state.PoolConfig, n int) ([]string, error)
	// Reruns re-runs jobs lost to spot interruptions (*github.Client in
	// the bundle); nil: refresh asks for none (rerun.go).
	Reruns Rerunner
	// ReleasesEvery is how often refresh asks GitHub for actions/runner's
	// latest release (versions.go); 0: DefaultReleasesEvery.
	ReleasesEvery time.Duration
}

// LiveInstance is an EC2 instance of the deployment.
type LiveInstance struct {
	ID   string
	Pool string
	// Assignment is the ghr:assignment tag: the capacity reservation the
	// instance was launched under.
	Assignment string
	LaunchedAt time.Time
	// State is EC2's state of the instance (pending, running, stopping,
	// stopped): a recorded instance EC2 shows stopped that its record does
	// not is retired (reconcile.go).
	State string
}

// Decision is one thing refresh did, with why: Kind for machines (the
// metrics count by it), Reason for people.
type Decision struct {
	InstanceID string `json:"instanceId"`
	Pool       string `json:"pool,omitempty"`
	Reason     string `json:"reason"`
	Kind       Kind   `json:"kind"`
}

// Kind is what a decision was.
type Kind string

const (
	KindExpired     Kind = "expired"           // a lease ran out: terminated
	KindUnrecorded  Kind = "unrecorded"        // an instance without a live record: terminated
	KindGone        Kind = "gone"              // a record whose instance EC2 no longer has: closed
	KindInterrupted Kind = "interrupted"       // the same after the agent's spot interruption notice
	KindStale       Kind = "stale"             // a silent agent: lease expired
	KindRetired     Kind = "retired"           // a drained pool's, or a pre-warmed one whose script failed: lease expired
	KindKept        Kind = "kept"              // a silent agent whose runner GitHub says is online (or could not say)
	KindRepooled    Kind = "lost-pool-message" // a clean idle instance's pool message sent again
	KindStuck       Kind = "stuck"             // a running instance whose lease ran out (also in Terminated)
	KindPrewarmed   Kind = "prewarmed"         // launched with no run for an idle window
	KindJoined      Kind = "joined"            // a pre-warmed instance that became idle
	KindForged      Kind = "forged"            // a record claiming a life the control plane did not give: terminated
	KindAdopted     Kind = "adopted"           // a scale set's claim past its lease whose runner runs a job: made running
)

// Output summarises a refresh.
type Output struct {
	Terminated []Decision `json:"terminated"`
	Expired    []Decision `json:"expired"`
	Repooled   []Decision `json:"repooled"`
	// Stuck are running instances whose lease ran out (also in
	// Terminated): a run held them past timings.max_runtime_seconds.
	Stuck []Decision `json:"stuck,omitempty"`
	Kept  []Decision `json:"kept,omitempty"` // silent agents kept, with why
	// Adopted are claims of scale sets' standing runs whose lease ran out
	// while GitHub showed their runner running a job: made running, not
	// terminated (adopt.go).
	Adopted []Decision `json:"adopted,omitempty"`
	// Prewarmed were launched with no run for an active idle window;
	// Joined are pre-warmed instances that became idle (prewarm.go).
	Prewarmed []Decision `json:"prewarmed,omitempty"`
	Joined    []Decision `json:"joined,omitempty"`
	// Instances counts each pool's live records by state, as read (the
	// InstancesByState metric; sampled every refresh, its idle count
	// summed over time is the pool's idle instance-time).
	Instances map[string]map[state.State]int `json:"instances,omitempty"`
	// RunnerVersions are each pool's runner versions (versions.go).
	RunnerVersions map[string]PoolVersions `json:"runnerVersions,omitempty"`
	// SpotBreakers are the spot pools' breakers, after this refresh's
	// interruptions (spot.go).
	SpotBreakers map[string]BreakerView `json:"spotBreakers,omitempty"`
	// Reruns are what refresh did about jobs lost to spot interruptions
	// (rerun.go).
	Reruns         []Decision `json:"reruns,omitempty"`
	Errors         []string   `json:"errors,omitempty"`
	ElapsedSeconds float64    `json:"elapsedSeconds"`
	// Skipped says why nothing was done (another invocation was running).
	Skipped string `json:"skipped,omitempty"`
}

// Handle runs one refresh. The payload may be empty or {}. It fails when any
// step failed (after doing what was safe), so the schedule's metrics and
// on-failure destination see it.
func Handle(ctx context.Context, deps Deps, payload json.RawMessage) (*Output, error) {
	start := time.Now()
	d, ec2 := deps.Deps, deps.EC2
	if err := controlplane.DecodeNone(payload); err != nil {
		return nil, err
	}
	release, ok, err := d.SingleFlight(ctx, bundle.HandlerRefresh)
	if err != nil {
		return nil, err
	}
	if !ok {
		// Another invocation is running: it does this one's work.
		return &Output{Skipped: "another invocation holds the single-flight lease"}, nil
	}
	defer release()
	r := &refresher{d: d, ec2: ec2, prewarm: deps.Prewarm, now: d.Now(), out: &Output{Terminated: []Decision{}, Expired: []Decision{}, Repooled: []Decision{}}}
	pools, err := storeOf(d).ListPoolConfigs(ctx)
	if err != nil {
		return nil, err
	}
	every := deps.ReleasesEvery
	if every <= 0 {
		every = DefaultReleasesEvery
	}
	r.releases = r.learnReleases(ctx, pools, every)
	known := map[string]*state.Instance{} // every record not terminated, by id
	unread := map[string]bool{}           // pools whose records could not be read
	for i := range pools {
		p, err := d.Pool(ctx, pools[i].Name)
		if err == nil {
			r.moveTarget(ctx, p)
			err = r.pool(ctx, p, known)
		}
		if err != nil {
			unread[pools[i].Name] = true
			r.fail(fmt.Errorf("pool %s left alone: %w", pools[i].Name, err))
		}
	}
	if err := r.reconcile(ctx, pools, known, unread); err != nil {
		r.fail(fmt.Errorf("reconcile: %w", err))
	}
	r.spotBreakers(ctx, pools)
	r.rerunPending(ctx, pools, deps.Reruns)
	r.out.ElapsedSeconds = time.Since(start).Seconds()
	d.Log.Info("refresh finished", "terminated", len(r.out.Terminated), "expired", len(r.out.Expired), "repooled", len(r.out.Repooled), "kept", len(r.out.Kept), "adopted", len(r.out.Adopted), "errors", len(r.out.Errors))
	if len(r.out.Errors) > 0 {
		return r.out, fmt.Errorf("refresh incomplete (%d errors; terminated %d, expired %d, repooled %d): %s",
			len(r.out.Errors), len(r.out.Terminated), len(r.out.Expired), len(r.out.Repooled), r.out.Errors[0])
	}
	return r.out, nil
}

type refresher struct {
	d       *controlplane.Deps
	ec2     EC2
	prewarm func(ctx context.Context, p *state.PoolConfig, n int) ([]string, error)
	now     time.Time
	out     *Output
	// releases are the actions/runner releases known (versions.go).
	releases []runnerrelease.Release
	// runners are the owners' runner listings, read once per run by
	// deleteLeftoverRunners (a queue outage can leave many instances to
	// re-pool in one run).
	runners map[string][]github.Runner
}

func (r *refresher) fail(err error) {
	r.out.Errors = append(r.out.Errors, err.Error())
	r.d.Log.Error("refresh step failed", "err", err)
}

// pool handles one pool's records: expired leases, silent agents, unsent
// pool messages. It adds every record it read that is not terminated to
// known. An error means the pool's records were not all read: the caller
// must not reconcile the pool's instances.
func (r *refresher) pool(ctx context.Context, p *state.PoolConfig, known map[string]*state.Instance) error {
	var keys []state.Key
	for _, st := range state.LiveStates {
		insts, err := storeOf(r.d).ByPoolState(ctx, p.Name, st, time.Time{})
		if err != nil {
			return err
		}
		for _, inst := range insts {
			keys = append(keys, inst.Key)
		}
	}
	// The index lacks heartbeats and signals and may be stale: decide on the
	// records themselves.
	records, err := storeOf(r.d).GetMany(ctx, keys)
	if err != nil {
		return err
	}
	var expired, forged, lives []*state.Instance
	warm, live := 0, 0 // idle or pre-warming (what an idle window counts); every live record
	counts := map[state.State]int{}
	for _, st := range state.LiveStates {
		counts[st] = 0
	}
	if r.out.Instances == nil {
		r.out.Instances = map[string]map[state.State]int{}
	}
	r.out.Instances[p.Name] = counts
	for _, key := range keys {
		inst, ok := records[key]
		if !ok || inst.State == state.Terminated {
			continue
		}
		known[inst.ID] = inst
		counts[inst.State]++
		if why := state.LifeNotGiven(inst, p.Timings, r.now); why != "" {
			// Its instance rewrote what it may write of its own record to
			// live on (liveness.go): ended now, whatever its lease says.
			inst.TerminatedReason = "its record claims a life the control plane did not give: " + why
			r.d.Log.Warn("retiring an instance whose record claims a life the control plane did not give", "pool", p.Name, "instanceId", inst.ID, "state", inst.State, "why", why)
			forged = append(forged, inst)
			continue
		}
		if inst.Expired(r.now) {
			switch adopted, keep := r.adoptBusy(ctx, p, inst); {
			case adopted != nil:
				known[inst.ID] = adopted
				live++
				lives = append(lives, adopted)
			case !keep:
				expired = append(expired, inst) // its record is marked terminated below
			}
			continue
		}
		live++
		lives = append(lives, inst)
		if inst.State == state.Idle || warming(inst) {
			warm++
		}
		switch {
		case warming(inst):
			r.joinPool(ctx, p, inst)
			continue
		case inst.State == state.Created || inst.State == state.Claimed:
			// A provision waits on these with its own liveness check, and
			// their short lease ends them if it died.
			continue
		case inst.State == state.Running && failedNow(inst):
			// The agent gave up on its assignment (its just-in-time
			// runners kept ending without a job): it runs no runner and
			// asks for none, so nothing of the run is on it. Ended now,
			// not when its lease runs out.
			sig, _ := inst.SignalFor(state.SignalFailed)
			r.expire(ctx, p, inst, KindStale, "its agent signalled UD_FAILED: "+sig.Detail)
			continue
		case inst.State == state.Stopped:
			// No agent runs on a stopped instance: its lease (the tier's
			// keep time) is all there is to judge, and it has not passed.
			continue
		case inst.BeatUnobserved():
			if _, err := storeOf(r.d).NoteBeat(ctx, inst.Ref(), inst.Heartbeats); err != nil && state.ClauseOf(err) == "" {
				r.fail(err)
			}
		case inst.Silent(r.now, state.D(p.Timings.StaleAfter)) || inst.NeverBeat(r.now, state.D(p.Timings.BootTime)):
			r.silent(ctx, p, inst)
			continue
		}
		// Not a case of the switch: a live agent's counter has almost
		// always moved since the last refresh, and a beat noted must not
		// keep a clean idle instance out of the queue.
		if inst.State == state.Idle && inst.Clean() && inst.PooledAt == 0 {
			r.repool(ctx, p, inst)
		}
	}
	if len(forged) > 0 {
		from := len(r.out.Terminated)
		// Not on the lease (the record lies about it), nor on the
		// assignment (the instance may rewrite it): on what the control
		// plane gave the record as read.
		if err := r.terminate(ctx, forged, "forged record", false); err != nil {
			return err
		}
		for i := from; i < len(r.out.Terminated); i++ {
			r.out.Terminated[i].Kind = KindForged
		}
	}
	before := len(r.out.Terminated)
	err = r.terminate(ctx, expired, "lease expired", true)
	// Counted whatever else failed: a record ended is never looked at
	// again, and deleting the runner of an instance EC2 took back fails
	// while GitHub still shows it running the job it lost (422).
	r.interruptedAmong(ctx, r.out.Terminated[before:], known)
	if err != nil {
		return err
	}
	// A running instance whose lease ran out was held by a run past its
	// runtime (a hung job, or a workflow that never released): a stuck run.
	for _, d := range r.out.Terminated[before:] {
		if inst := known[d.InstanceID]; inst != nil && inst.State == state.Running {
			r.out.Stuck = append(r.out.Stuck, Decision{d.InstanceID, p.Name, "run " + inst.RunID + " held it past its lease", KindStuck})
		}
	}
	r.versions(ctx, p, lives)
	r.topUp(ctx, p, warm, live)
	return nil
}
