// Package scaledown is the scale-down function (docs/design.md), run every 5 minutes. Phase 1 settles instances
// tagged as orphans; phase 2 keeps each pool's idle instances within the
// idle quota of its active idle window and retires the rest.
//
// Invariants: an instance assigned to a run is never terminated while its
// lease holds (GitHub's busy flag reads false for a while after a job
// starts); every termination of a recorded instance is a conditional write
// on the assignment seen, so a concurrent claim wins; a runner is deleted
// only after that write succeeded, and only a runner that provably belongs
// to an earlier use of the instance (the view it was decided on may be
// stale: a claim may have registered a new runner since); an instance goes
// from EC2 only after its record is marked, so a run cut off at any point
// leaves at most records marked whose instances the next run terminates;
// ghr:bypass-removal=true is honoured.
package scaledown

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Action is what scale-down does with an instance.
type Action string

const (
	Keep      Action = "keep"
	Renew     Action = "renew"     // keep, and extend its idle lease
	Terminate Action = "terminate" // conditional record write, then EC2, then the runners
	Orphan    Action = "orphan"    // tag ghr:orphan for phase 1 of the next run
	Untag     Action = "untag"     // remove ghr:orphan (a false positive)
	Stop      Action = "stop"      // conditional record write, runners, then EC2 (stopped.go)
)

// Kind is what a termination was.
type Kind string

const (
	KindScaleDown Kind = "scale-down" // beyond the idle quota, not reusable, or finishing a termination
	KindOrphan    Kind = "orphan"     // a confirmed orphan
)

// Decision is the verdict on one instance, with why.
type Decision struct {
	InstanceID string `json:"instanceId"`
	Pool       string `json:"pool,omitempty"`
	Action     Action `json:"-"`
	Reason     string `json:"reason"`
	// Kind of a termination, for machines (the metrics count by it).
	Kind Kind `json:"kind,omitempty"`
	// Deregister are runners of the instance's earlier uses, deleted once
	// the record's conditional write succeeded (never before).
	Deregister []int64 `json:"-"`
	Owner      string  `json:"-"`
	// Assignment is the one the conditional write expects.
	Assignment string `json:"-"`
}

// Input is everything one run decides from.
type Input struct {
	Now       time.Time
	Pools     map[string]state.PoolConfig // timings completed from defaults
	Instances []fleet.Instance            // live EC2 instances of the deployment
	Records   map[string]*state.Instance  // consistent reads, by instance id
	// Runners lists each owner's runners (one listing per owner per run).
	Runners map[string][]github.Runner
	// Runner answers a fresh look-up of one runner (phase 1 with a runner id).
	Runner func(owner string, id int64) (github.Runner, bool, error)
}

// Decide returns one decision per instance: phase 1 for orphan-tagged
// instances, then phase 2 for the others, pool by pool.
func Decide(in Input) []Decision {
	var out []Decision
	byPool := map[string][]fleet.Instance{}
	for _, inst := range in.Instances {
		if inst.Tags[fleet.TagBypassRemoval] == "true" {
			out = append(out, Decision{InstanceID: inst.ID, Pool: inst.Tags[fleet.TagPool], Action: Keep, Reason: "ghr:bypass-removal is set"})
			continue
		}
		if tagged, ok := inst.Orphan(); ok {
			out = append(out, orphanDecision(in, inst, tagged))
			continue
		}
		byPool[inst.Tags[fleet.TagPool]] = append(byPool[inst.Tags[fleet.TagPool]], inst)
	}
	pools := make([]string, 0, len(byPool))
	for p := range byPool {
		pools = append(pools, p)
	}
	sort.Strings(pools)
	idx := indexRunners(in.Runners)
	for _, p := range pools {
		out = append(out, decidePool(in, idx, p, byPool[p])...)
	}
	return out
}

// runnerIndex finds an instance's runners in the listings without a scan
// of every runner per instance (thousands of each at scale).
type runnerIndex struct {
	byInstance map[string][]github.Runner // owner + " " + instance id
	byID       map[string]github.Runner   // owner + " " + runner id
}

func indexRunners(listings map[string][]github.Runner) runnerIndex {
	idx := runnerIndex{byInstance: map[string][]github.Runner{}, byID: map[string]github.Runner{}}
	for owner, runners := range listings {
		for _, r := range runners {
			idx.byID[owner+" "+strconv.FormatInt(r.ID, 10)] = r
			if id, ok := github.InstanceOf(r.Name); ok {
				idx.byInstance[owner+" "+id] = append(idx.byInstance[owner+" "+id], r)
			}
		}
	}
	return idx
}

// of returns the runners of an instance's record: those named after the
// instance. The runner id the record holds is the agent's word (an
// instance can write it, docs/security.md T6): a runner not named after
// the instance is never its, whatever the record says.
func (idx runnerIndex) of(rec *state.Instance) []github.Runner {
	return idx.byInstance[rec.Owner+" "+rec.ID]
}

// orphanDecision is phase 1: terminate only what is confirmed, untag false
// positives.
func orphanDecision(in Input, inst fleet.Instance, tagged string) Decision {
	d := Decision{InstanceID: inst.ID, Pool: inst.Tags[fleet.TagPool], Assignment: tagged, Owner: inst.Tags[fleet.TagOwner]}
	rec := in.Records[inst.ID]
	live := rec != nil && rec.State != state.Terminated && !rec.Expired(in.Now)
	switch {
	case live && rec.Assignment == tagged:
		d.Action, d.Reason = Untag, "false positive: the record holds a live lease for the tagged assignment"
		return d
	case live:
		d.Action, d.Reason = Untag, "false positive: the instance moved to another assignment since it was tagged"
		return d
	}
	if rec != nil {
		d.Owner = rec.Owner
	}
	id := runnerIDOf(inst, rec)
	if id == 0 {
		d.Action, d.Reason, d.Kind = Terminate, "confirmed orphan: no live lease and no runner id to check", KindOrphan
		return d
	}
	r, found, err := in.Runner(d.Owner, id)
	switch {
	case err != nil:
		d.Action, d.Reason = Keep, "orphan not checked: GitHub answered "+err.Error()
	case !found:
		d.Action, d.Reason, d.Kind = Terminate, "confirmed orphan: no live lease and its runner is gone from GitHub", KindOrphan
	case r.Status == "offline" && r.Busy:
		// A ghost runner cannot be deleted while GitHub thinks it busy; the
		// instance goes anyway: the runner is gone with it.
		d.Action, d.Reason, d.Kind = Terminate, "confirmed orphan: its runner is offline and busy", KindOrphan
	default:
		d.Action, d.Reason = Untag, "false positive: its runner exists and is healthy"
	}
	return d
}

func runnerIDOf(inst fleet.Instance, rec *state.Instance) int64 {
	if rec != nil && rec.GithubRunnerID != 0 {
		return rec.GithubRunnerID
	}
	var id int64
	for _, c := range inst.Tags[fleet.TagGithubRunnerID] {
		if c < '0' || c > '9' {
			return 0
		}
		id = id*10 + int64(c-'0')
	}
	return id
}

// decidePool is phase 2 for one pool: instances in eviction order, the idle
// quota of the active window counted per pool.
func decidePool(in Input, idx runnerIndex, poolName string, insts []fleet.Instance) []Decision {
	pool, known := in.Pools[poolName]
	window, _ := pool.ActiveWindow(in.Now)
	quota := window.IdleCount
	room := tierRoom(in, poolName, pool)
	if pool.Draining {
		quota = 0 // an operator drains the pool: it keeps nothing idle
	}
	// oldest_first evicts the oldest: look at the newest first, they are
	// the ones kept within the quota.
	sort.SliceStable(insts, func(i, j int) bool {
		if window.EvictionStrategy == "newest_first" {
			return insts[i].LaunchTime.Before(insts[j].LaunchTime)
		}
		return insts[i].LaunchTime.After(insts[j].LaunchTime)
	})
	var out []Decision
	for _, inst := range insts {
		d := Decision{InstanceID: inst.ID, Pool: poolName, Owner: inst.Tags[fleet.TagOwner]}
		rec := in.Records[inst.ID]
		age := in.Now.Sub(inst.LaunchTime)
		minRun := state.D(pool.Timings.MinRunningTime)
		switch {
		case !known:
			d.Action, d.Reason = Keep, "unknown pool: not managed by this scale-down"
		case rec != nil && rec.State == state.Terminated:
			// A terminated record never comes back: the instance is left
			// over from a termination cut off between the record and EC2.
			d.Action, d.Reason, d.Kind = Terminate, "its record is terminated: finishing the termination", KindScaleDown
			if rec.TerminatedReason != "" {
				d.Reason = "its record is terminated (" + rec.TerminatedReason + "): finishing the termination"
			}
		case rec == nil:
			if age < state.D(pool.Timings.BootTime) {
				d.Action, d.Reason = Keep, "still booting; its record may not be written yet"
			} else {
				d.Action, d.Reason, d.Assignment = Orphan, "no live record past the boot time", inst.Tags[fleet.TagAssignment]
			}
		case rec.State == state.Stopped:
			d = stoppedDecision(in.Now, pool, inst, rec, d)
		case age < minRun:
			d.Action, d.Reason = Keep, "younger than the minimum running time"
		case rec.State != state.Idle:
			d.Action, d.Reason = Keep, assignedReason(rec, in.Now)
		default:
			var beyond bool
			d, quota, beyond = idleDecision(in.Now, idx.of(rec), pool, d, rec, quota)
			if beyond {
				d, room = stopInstead(inst, rec, d, room)
			}
		}
		out = append(out, d)
	}
	return out
}

func assignedReason(rec *state.Instance, now time.Time) string {
	if rec.Expired(now) {
		return string(rec.State) + ", lease expired: refresh terminates it"
	}
	return string(rec.State) + " for run " + rec.RunID + ": never terminated while its lease holds"
}

// idleDecision handles a pooled idle instance. It should not be registered
// with GitHub; if a runner of an earlier use still is, it is removed after
// the record's write. An instance no claim can take is retired and does not
// hold a place in the quota.
//
// beyond says the instance is claimable and retired only for the quota:
// the stopped tier may keep it (stopInstead).
func idleDecision(now time.Time, runners []github.Runner, pool state.PoolConfig, d Decision, rec *state.Instance, quota int) (Decision, int, bool) {
	d.Assignment, d.Owner = rec.Assignment, rec.Owner
	if !rec.Clean() {
		d.Action, d.Reason = Keep, "idle but still deregistering"
		return d, quota, false
	}
	earlier, later := runnersOf(runners, rec)
	if later != nil {
		// Only a claim raises uses: the record was read before a claim
		// whose runner is registered now. Decide on a fresh view next run.
		d.Action, d.Reason = Keep, "runner "+later.Name+" of a later use is registered: claimed since its record was read"
		return d, quota, false
	}
	busy := false
	for _, r := range earlier {
		switch {
		case r.Busy && r.Online():
			d.Action, d.Reason = Keep, "its runner "+r.Name+" is running a job right now: kept for the next run"
			return d, quota, false
		case r.Busy:
			// Offline and busy: a ghost GitHub refuses to delete until it
			// gives up on the job; the sweep of a later run removes it.
			busy = true
		default:
			d.Deregister = append(d.Deregister, r.ID)
		}
	}
	if busy {
		d.Action, d.Reason, d.Kind = Terminate, "pooled but its runner is busy on GitHub: not reusable (the runner is left for the ghost sweep)", KindScaleDown
		return d, quota, false
	}
	if why := unclaimable(pool, rec, now); why != "" {
		d.Action, d.Reason, d.Kind = Terminate, "not reusable: "+why, KindScaleDown
		return d, quota, false
	}
	if quota > 0 {
		d.Action, d.Reason = Renew, "within the idle quota"
		return d, quota - 1, false
	}
	d.Action, d.Reason, d.Kind = Terminate, "idle beyond the idle quota", KindScaleDown
	return d, quota, true
}

// unclaimable says which rule of state.Claim refuses every claim of the
// idle instance ("" when a claim may take it): the pool's launch template
// version, its maxUses, its maxAge, its agent's rebalance recommendation.
// Timings are completed from defaults.
func unclaimable(pool state.PoolConfig, rec *state.Instance, now time.Time) string {
	t := pool.Timings
	switch {
	case pool.LaunchTemplateVersion != "" && rec.LaunchTemplateVersion != pool.LaunchTemplateVersion:
		return fmt.Sprintf("launched from launch template version %q, the pool launches %q", rec.LaunchTemplateVersion, pool.LaunchTemplateVersion)
	case t.MaxUses > 0 && rec.Uses >= t.MaxUses:
		return fmt.Sprintf("used %d times, the pool's maxUses is %d", rec.Uses, t.MaxUses)
	case t.MaxAge > 0 && rec.LaunchedAt <= now.Unix()-t.MaxAge:
		return fmt.Sprintf("launched %s ago, the pool's maxAge is %s", now.Sub(time.Unix(rec.LaunchedAt, 0)).Truncate(time.Minute), state.D(t.MaxAge))
	case rec.HasRebalance():
		return "EC2 recommended rebalancing the spot instance (" + state.SignalRebalance + ")"
	}
	return ""
}

// runnersOf splits the listed runners of an idle record's instance: those
// of its earlier uses (the recorded runner id, or a name ghr-<k>-<id> with
// k up to the record's uses), which may be deleted once the record's write
// succeeded; and one of a later use (k above), which means a claim took
// the instance after the record was read.
func runnersOf(runners []github.Runner, rec *state.Instance) (earlier []github.Runner, later *github.Runner) {
	for i, r := range runners {
		uses, ok := useOf(r.Name, rec.ID)
		switch {
		case rec.GithubRunnerID != 0 && r.ID == rec.GithubRunnerID:
			earlier = append(earlier, r)
		case !ok:
		case uses > rec.Uses:
			later = &runners[i]
		default:
			earlier = append(earlier, r)
		}
	}
	return earlier, later
}

// useOf reads a runner name of ours for the given instance (a token pool's
// ghr-<uses>-<instanceId> or a just-in-time ghr-<uses>-<n>-<instanceId>)
// and returns the use it was registered for.
func useOf(name, instanceID string) (int, bool) {
	p, ok := github.ParseRunnerName(name)
	return p.Uses, ok && p.InstanceID == instanceID
}

// roles answers state.Store.ByInstanceID: the instance role of the pool EC2
// tags an instance with, or every pool's for an instance EC2 no longer
// lists (a ghost runner's).
func (in Input) roles() func(instanceID string) []string {
	byID := make(map[string]string, len(in.Instances))
	for _, inst := range in.Instances {
		byID[inst.ID] = in.Pools[inst.Tags[fleet.TagPool]].InstanceRoleID
	}
	var all []string
	for _, p := range in.Pools {
		all = append(all, p.InstanceRoleID)
	}
	return func(id string) []string {
		if role, ok := byID[id]; ok {
			return []string{role}
		}
		return all
	}
}
