// Package scaledown is the scale-down function (DESIGN.md §6, seed
// scale-down-two-phase.md), run every 5 minutes. Phase 1 settles instances
// tagged as orphans; phase 2 keeps each pool's idle instances within the
// idle quota of its active idle window and retires the rest.
//
// Invariants: an instance assigned to a run is never terminated while its
// lease holds (GitHub's busy flag reads false for a while after a job
// starts); every termination of a recorded instance is a conditional write
// on the assignment seen, so a concurrent claim wins; a runner is
// deregistered before its instance is terminated, and an instance whose
// deregistration failed is kept for the next run; ghr:bypass-removal=true
// is honoured.
package scaledown

import (
	"sort"
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
	Terminate Action = "terminate" // conditional record write, deregister, terminate
	Orphan    Action = "orphan"    // tag ghr:orphan for phase 1 of the next run
	Untag     Action = "untag"     // remove ghr:orphan (a false positive)
)

// Decision is the verdict on one instance, with why.
type Decision struct {
	InstanceID string `json:"instanceId"`
	Pool       string `json:"pool,omitempty"`
	Action     Action `json:"-"`
	Reason     string `json:"reason"`
	// Deregister is the GitHub runner to delete before terminating (0: none).
	Deregister int64  `json:"-"`
	Owner      string `json:"-"`
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
	for _, p := range pools {
		out = append(out, decidePool(in, p, byPool[p])...)
	}
	return out
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
		d.Action, d.Reason = Terminate, "confirmed orphan: no live lease and no runner id to check"
		return d
	}
	r, found, err := in.Runner(d.Owner, id)
	switch {
	case err != nil:
		d.Action, d.Reason = Keep, "orphan not checked: GitHub answered "+err.Error()
	case !found:
		d.Action, d.Reason = Terminate, "confirmed orphan: no live lease and its runner is gone from GitHub"
	case r.Status == "offline" && r.Busy:
		// A ghost runner cannot be deleted while GitHub thinks it busy; the
		// instance goes anyway, as the seed says.
		d.Action, d.Reason = Terminate, "confirmed orphan: its runner is offline and busy"
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
func decidePool(in Input, poolName string, insts []fleet.Instance) []Decision {
	pool, known := in.Pools[poolName]
	window, _ := pool.ActiveWindow(in.Now)
	quota := window.IdleCount
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
		// The pool's OS sets the default (Linux 5 min, Windows 15 min).
		minRun := state.D(pool.Timings.MinRunningTime)
		switch {
		case !known:
			d.Action, d.Reason = Keep, "unknown pool: not managed by this scale-down"
		case rec == nil || rec.State == state.Terminated:
			if age < state.D(pool.Timings.BootTime) {
				d.Action, d.Reason = Keep, "still booting; its record may not be written yet"
			} else {
				d.Action, d.Reason, d.Assignment = Orphan, "no live record past the boot time", inst.Tags[fleet.TagAssignment]
			}
		case age < minRun:
			d.Action, d.Reason = Keep, "younger than the minimum running time"
		case rec.State != state.Idle:
			d.Action, d.Reason = Keep, assignedReason(rec, in.Now)
		default:
			d, quota = idleDecision(in, d, rec, quota)
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
// with GitHub; if it still is, its runner goes first.
func idleDecision(in Input, d Decision, rec *state.Instance, quota int) (Decision, int) {
	d.Assignment, d.Owner = rec.Assignment, rec.Owner
	if !rec.Clean() {
		d.Action, d.Reason = Keep, "idle but still deregistering"
		return d, quota
	}
	if r, ok := findRunner(in.Runners[rec.Owner], rec); ok {
		if r.Busy {
			d.Action, d.Reason, d.Deregister = Terminate, "pooled but its runner is busy on GitHub: not reusable", r.ID
			return d, quota
		}
		d.Deregister = r.ID // a stale registration: remove it whatever follows
	}
	if quota > 0 {
		d.Action, d.Reason = Renew, "within the idle quota"
		if d.Deregister != 0 {
			d.Reason += "; stale runner registration removed"
		}
		return d, quota - 1
	}
	d.Action, d.Reason = Terminate, "idle beyond the idle quota"
	return d, quota
}

// findRunner matches by the recorded runner id first, by the name suffix
// (the instance id) second.
func findRunner(runners []github.Runner, rec *state.Instance) (github.Runner, bool) {
	for _, r := range runners {
		if rec.GithubRunnerID != 0 && r.ID == rec.GithubRunnerID {
			return r, true
		}
	}
	for _, r := range runners {
		if id, ok := github.InstanceOf(r.Name); ok && id == rec.ID {
			return r, true
		}
	}
	return github.Runner{}, false
}
