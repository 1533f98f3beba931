package scaledown

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

var now = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC) // Monday 11:00 in Berlin

func pools() map[string]state.PoolConfig {
	p := state.PoolConfig{Name: "linux", Owner: "acme", IdleWindows: []state.IdleWindow{
		{Cron: "* 8-17 * * 1-5", TimeZone: "Europe/Berlin", IdleCount: 1, EvictionStrategy: "oldest_first"},
	}}
	p.Timings = p.Timings.WithDefaults()
	return map[string]state.PoolConfig{"linux": p}
}

// row builds one instance in a given situation.
type row struct {
	name       string
	age        time.Duration
	tags       map[string]string
	pool       func(*state.PoolConfig) // changes to the linux pool
	rec        *state.Instance         // nil: no record
	runners    []github.Runner         // the owner's listing
	lookup     func(int64) (github.Runner, bool, error)
	want       Action
	reason     string  // a part of the reason
	deregister []int64 // the runners to delete after the write, when set
	ec2        string  // EC2's usage class of the instance (fleet.Spot when empty)
	state      string  // EC2's state of the instance ("running" when empty)
	others     []*state.Instance
}

// tier gives the linux pool a stopped tier of max instances and no idle
// quota, so that an idle instance is beyond it.
func tier(max int) func(*state.PoolConfig) {
	return func(p *state.PoolConfig) {
		p.IdleWindows = nil
		if max > 0 {
			p.Stopped = &state.StoppedTier{Max: max, KeepSeconds: 3600}
		}
	}
}

func onDemand(r *state.Instance) { r.UsageClass = state.UsageClassOnDemand }

func rec(st state.State, mut ...func(*state.Instance)) *state.Instance {
	r := &state.Instance{ID: "i-1", Pool: "linux", Owner: "acme", State: st, Assignment: "a1", Threshold: now.Add(10 * time.Minute).Unix(),
		LaunchedAt: now.Add(-time.Hour).Unix(), Uses: 1, LaunchTemplateVersion: "3", Signals: map[string]state.Signal{}}
	if st == state.Running || st == state.Claimed {
		r.RunID = "run-1"
	}
	for _, m := range mut {
		m(r)
	}
	return r
}

func clean(r *state.Instance) {
	r.Signals[state.SignalRemoveRegOK] = state.Signal{Assignment: r.Assignment}
}
func rebalanced(r *state.Instance) {
	r.Signals[state.SignalRebalance] = state.Signal{Assignment: r.Assignment, Detail: "noticeTime 2026-11-23T09:58:00Z"}
}
func expired(r *state.Instance) { r.Threshold = now.Add(-time.Minute).Unix() }
func withRunner(id int64) func(*state.Instance) {
	return func(r *state.Instance) { r.GithubRunnerID = id }
}
func terminated(r *state.Instance) { r.State, r.TerminatedReason = state.Terminated, "lease expired" }

func orphanTag(a string, runnerID string) map[string]string {
	t := map[string]string{fleet.TagPool: "linux", fleet.TagOwner: "acme", fleet.TagOrphan: a}
	if runnerID != "" {
		t[fleet.TagGithubRunnerID] = runnerID
	}
	return t
}

func noQuota(p *state.PoolConfig) { p.IdleWindows = nil }

var plain = map[string]string{fleet.TagPool: "linux", fleet.TagOwner: "acme", fleet.TagAssignment: "a1"}

func TestDecisionTable(t *testing.T) {
	gone := func(int64) (github.Runner, bool, error) { return github.Runner{}, false, nil }
	ghost := func(id int64) (github.Runner, bool, error) {
		return github.Runner{ID: id, Status: "offline", Busy: true}, true, nil
	}
	healthy := func(id int64) (github.Runner, bool, error) { return github.Runner{ID: id, Status: "online"}, true, nil }
	broken := func(int64) (github.Runner, bool, error) { return github.Runner{}, false, errors.New("502") }
	rows := []row{
		// The seed's decision table, row by row.
		{name: "seed: orphan with runner id, offline and busy", age: time.Hour, tags: orphanTag("a1", "7"), rec: rec(state.Running, expired), lookup: ghost, want: Terminate},
		{name: "seed: orphan with runner id, exists and healthy", age: time.Hour, tags: orphanTag("a1", "7"), rec: rec(state.Running, expired), lookup: healthy, want: Untag},
		{name: "seed: orphan without runner id", age: time.Hour, tags: orphanTag("a1", ""), want: Terminate},
		{name: "seed: active runner, younger than the minimum running time", age: 2 * time.Minute, tags: plain, rec: rec(state.Idle, clean), want: Keep, reason: "younger than the minimum running time"},
		{name: "seed: active runner, idle quota available", age: time.Hour, tags: plain, rec: rec(state.Idle, clean), want: Renew},
		{name: "seed: active runner, quota full and idle (assigned: kept, lease holds)", age: time.Hour, tags: plain, rec: rec(state.Running), runners: []github.Runner{{ID: 7, Name: "ghr-1-i-1"}}, want: Keep},
		{name: "seed: active runner, quota full and busy", age: time.Hour, tags: plain, rec: rec(state.Running), runners: []github.Runner{{ID: 7, Name: "ghr-1-i-1", Busy: true}}, want: Keep},
		{name: "seed: active runner missing, boot time exceeded", age: 10 * time.Minute, tags: plain, want: Orphan},
		{name: "seed: active runner missing, still booting", age: time.Minute, tags: plain, want: Keep, reason: "still booting; its record may not be written yet"},
		// Pooling, and where ghrunner improves on the original algorithm.
		{name: "orphan whose record holds a live lease for the tagged assignment", age: time.Hour, tags: orphanTag("a1", ""), rec: rec(state.Running), want: Untag},
		{name: "orphan whose record moved to another assignment", age: time.Hour, tags: orphanTag("a0", ""), rec: rec(state.Idle, clean), want: Untag},
		{name: "orphan whose runner is gone from GitHub", age: time.Hour, tags: orphanTag("a1", "7"), rec: rec(state.Running, expired), lookup: gone, want: Terminate},
		{name: "orphan check with GitHub failing", age: time.Hour, tags: orphanTag("a1", "7"), lookup: broken, want: Keep},
		{name: "assigned and idle in GitHub, lease holds", age: time.Hour, tags: plain, rec: rec(state.Claimed), want: Keep},
		{name: "assigned, lease expired", age: time.Hour, tags: plain, rec: rec(state.Running, expired), want: Keep, reason: "running, lease expired: refresh terminates it"},
		{name: "pooled idle still deregistering", age: time.Hour, tags: plain, rec: rec(state.Idle), want: Keep, reason: "idle but still deregistering"},
		{name: "pooled idle but its runner busy on GitHub", age: time.Hour, tags: plain, rec: rec(state.Idle, clean, withRunner(7)), runners: []github.Runner{{ID: 7, Name: "ghr-1-i-1", Busy: true}}, want: Terminate, deregister: []int64{}},
		{name: "bypass tag", age: time.Hour, tags: map[string]string{fleet.TagPool: "linux", fleet.TagBypassRemoval: "true", fleet.TagOrphan: "a1"}, want: Keep},
		{name: "unknown pool", age: time.Hour, tags: map[string]string{fleet.TagPool: "gpu"}, want: Keep},
		// A view that may be stale, runners of earlier uses (defect 3).
		{name: "idle, and a runner of a later use registered (claimed since the read)", age: time.Hour, tags: plain, rec: rec(state.Idle, clean),
			runners: []github.Runner{{ID: 8, Name: "ghr-2-i-1", Status: "online"}}, want: Keep, reason: "of a later use is registered"},
		{name: "idle beyond the quota, a runner of a later use registered", age: time.Hour, tags: plain, pool: noQuota, rec: rec(state.Idle, clean),
			runners: []github.Runner{{ID: 8, Name: "ghr-2-i-1"}}, want: Keep, reason: "of a later use is registered"},
		{name: "idle beyond the quota, the stale runner of its last use", age: time.Hour, tags: plain, pool: noQuota, rec: rec(state.Idle, clean),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-i-1"}, {ID: 9, Name: "ghr-1-i-2"}}, want: Terminate, deregister: []int64{7}},
		{name: "idle, runners of its last use and of an earlier one: both removed", age: time.Hour, tags: plain, rec: rec(state.Idle, clean),
			runners: []github.Runner{{ID: 5, Name: "ghr-0-i-1"}, {ID: 7, Name: "ghr-1-i-1"}}, want: Renew, deregister: []int64{5, 7}},
		// The runner id is the agent's word: an instance that wrote another
		// instance's runner into its record gets that runner neither
		// deleted nor counted (docs/security.md T6).
		{name: "idle, its record naming another instance's runner", age: time.Hour, tags: plain, rec: rec(state.Idle, clean, withRunner(7)),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-i-2"}}, want: Renew, deregister: []int64{}},
		{name: "idle, its record naming another instance's busy runner", age: time.Hour, tags: plain, rec: rec(state.Idle, clean, withRunner(7)),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-i-2", Status: "online", Busy: true}}, want: Renew, deregister: []int64{}},
		// Just-in-time runners, ghr-<uses>-<n>-<id> (issue 31, item 7).
		{name: "idle, a just-in-time runner of its last use online and busy", age: time.Hour, tags: plain, rec: rec(state.Idle, clean),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-3-i-1", Status: "online", Busy: true}}, want: Keep, reason: "is running a job right now"},
		{name: "idle, just-in-time runners of its last use left registered: removed", age: time.Hour, tags: plain, rec: rec(state.Idle, clean),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-2-i-1"}, {ID: 9, Name: "ghr-1-3-i-1"}}, want: Renew, deregister: []int64{7, 9}},
		{name: "idle, a just-in-time runner of a later use registered (claimed since the read)", age: time.Hour, tags: plain, rec: rec(state.Idle, clean),
			runners: []github.Runner{{ID: 8, Name: "ghr-2-1-i-1", Status: "online"}}, want: Keep, reason: "of a later use is registered"},
		// An ephemeral runner may stay listed, offline and idle, a while
		// after its job (issue 37, item 11; fakegithub jit.go, the
		// linger): it is neither the instance's live runner nor a sign of
		// a lost one.
		{name: "running, its finished just-in-time runner still listed beside the next one running a job", age: time.Hour, tags: plain, rec: rec(state.Running),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-1-i-1", Status: "offline"}, {ID: 8, Name: "ghr-1-2-i-1", Status: "online", Busy: true}}, want: Keep, reason: "never terminated while its lease holds"},
		{name: "running, only its finished just-in-time runner listed (the next not registered yet)", age: time.Hour, tags: plain, pool: noQuota, rec: rec(state.Running),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-1-i-1", Status: "offline"}}, want: Keep, reason: "never terminated while its lease holds"},
		{name: "idle after its release, its finished just-in-time runner still listed: kept and the runner removed", age: time.Hour, tags: plain, rec: rec(state.Idle, clean),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-2-i-1", Status: "offline"}}, want: Renew, deregister: []int64{7}},
		{name: "idle beyond the quota, its finished just-in-time runner still listed", age: time.Hour, tags: plain, pool: noQuota, rec: rec(state.Idle, clean),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-2-i-1", Status: "offline"}}, want: Terminate, deregister: []int64{7}},
		{name: "idle, runner of its last use online and busy", age: time.Hour, tags: plain, rec: rec(state.Idle, clean),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-i-1", Status: "online", Busy: true}}, want: Keep, reason: "is running a job right now"},
		{name: "idle, a runner named like ours for another instance", age: time.Hour, tags: plain, rec: rec(state.Idle, clean),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-i-10"}, {ID: 8, Name: "ghr-x-i-1"}}, want: Renew, deregister: []int64{}},
		// Idle instances no claim can take (defect 5).
		{name: "idle within the quota but older than maxAge", age: time.Hour, tags: plain, rec: rec(state.Idle, clean, func(r *state.Instance) { r.LaunchedAt = now.Add(-25 * time.Hour).Unix() }),
			want: Terminate, reason: "maxAge is 24h0m0s"},
		{name: "idle within the quota, used maxUses times", age: time.Hour, tags: plain, rec: rec(state.Idle, clean, func(r *state.Instance) { r.Uses = 50 }),
			want: Terminate, reason: "used 50 times, the pool's maxUses is 50"},
		{name: "idle within the quota, launched from an older launch template version", age: time.Hour, tags: plain, pool: func(p *state.PoolConfig) { p.LaunchTemplateVersion = "4" },
			rec: rec(state.Idle, clean), want: Terminate, reason: `launch template version "3", the pool launches "4"`},
		{name: "idle within the quota, its launch template version is the pool's", age: time.Hour, tags: plain, pool: func(p *state.PoolConfig) { p.LaunchTemplateVersion = "3" },
			rec: rec(state.Idle, clean), want: Renew},
		// EC2's rebalance recommendation (issue 37): an idle instance is
		// retired, a running one keeps its job.
		{name: "idle within the quota, its agent said EC2 recommends rebalancing", age: time.Hour, tags: plain, rec: rec(state.Idle, clean, rebalanced),
			want: Terminate, reason: "EC2 recommended rebalancing"},
		{name: "running a job, its agent said EC2 recommends rebalancing", age: time.Hour, tags: plain, rec: rec(state.Running, rebalanced),
			runners: []github.Runner{{ID: 7, Name: "ghr-1-i-1", Busy: true}}, want: Keep},
		// The stopped tier (issue 41): what the quota retires is stopped
		// while the tier has room, never a spot instance or one no claim
		// could take; a stopped one is terminated past its keep time.
		{name: "idle beyond the quota, on-demand, the tier has room", age: time.Hour, tags: plain, pool: tier(2), ec2: fleet.OnDemand, rec: rec(state.Idle, clean, onDemand),
			want: Stop, reason: "stopped for the stopped tier"},
		{name: "idle beyond the quota, on-demand, the tier is full", age: time.Hour, tags: plain, pool: tier(1), ec2: fleet.OnDemand, rec: rec(state.Idle, clean, onDemand),
			others: []*state.Instance{rec(state.Stopped, func(r *state.Instance) { r.ID = "i-2" })}, want: Terminate, reason: "beyond the idle quota"},
		{name: "idle beyond the quota, on-demand, the tier's stopped one is past its keep", age: time.Hour, tags: plain, pool: tier(1), ec2: fleet.OnDemand, rec: rec(state.Idle, clean, onDemand),
			others: []*state.Instance{rec(state.Stopped, expired, func(r *state.Instance) { r.ID = "i-2" })}, want: Stop},
		{name: "idle beyond the quota, spot, the tier has room", age: time.Hour, tags: plain, pool: tier(2), ec2: fleet.Spot, rec: rec(state.Idle, clean),
			want: Terminate, reason: "beyond the idle quota"},
		{name: "idle beyond the quota, on-demand, the pool drains", age: time.Hour, tags: plain, pool: func(p *state.PoolConfig) { tier(2)(p); p.Draining = true }, ec2: fleet.OnDemand,
			rec: rec(state.Idle, clean, onDemand), want: Terminate},
		{name: "idle, not reusable, the tier has room", age: time.Hour, tags: plain, pool: tier(2), ec2: fleet.OnDemand, rec: rec(state.Idle, clean, onDemand, rebalanced),
			want: Terminate, reason: "not reusable"},
		{name: "idle within the quota, the tier has room", age: time.Hour, tags: plain, pool: func(p *state.PoolConfig) { p.Stopped = &state.StoppedTier{Max: 2, KeepSeconds: 3600} }, ec2: fleet.OnDemand, rec: rec(state.Idle, clean, onDemand), want: Renew},
		{name: "stopped within its keep time", age: time.Hour, tags: plain, pool: tier(2), ec2: fleet.OnDemand, state: "stopped", rec: rec(state.Stopped, onDemand),
			want: Keep, reason: "stopped until"},
		{name: "stopped past its keep time", age: time.Hour, tags: plain, pool: tier(2), ec2: fleet.OnDemand, state: "stopped", rec: rec(state.Stopped, onDemand, expired),
			want: Terminate, reason: "past the tier's keep time"},
		{name: "stopped, the pool drains", age: time.Hour, tags: plain, pool: func(p *state.PoolConfig) { tier(2)(p); p.Draining = true }, ec2: fleet.OnDemand, state: "stopped",
			rec: rec(state.Stopped, onDemand), want: Terminate, reason: "the pool drains"},
		{name: "stopped, the pool's tier was removed", age: time.Hour, tags: plain, pool: tier(0), ec2: fleet.OnDemand, state: "stopped",
			rec: rec(state.Stopped, onDemand), want: Terminate, reason: "no stopped tier"},
		{name: "stopped in its record, running in EC2 (a cut-off stop)", age: time.Hour, tags: plain, pool: tier(2), ec2: fleet.OnDemand, state: "running", rec: rec(state.Stopped, onDemand),
			want: Stop, reason: "finishing the stop"},
		{name: "claimed, on-demand, the tier has room", age: time.Hour, tags: plain, pool: tier(2), ec2: fleet.OnDemand, rec: rec(state.Claimed, onDemand), want: Keep},
		// A cut-off run's leftovers (defect 12).
		{name: "record terminated, instance still in EC2", age: time.Hour, tags: plain, rec: rec(state.Running, terminated), want: Terminate, reason: "its record is terminated (lease expired)"},
		{name: "record terminated, instance younger than the boot time", age: time.Second, tags: plain, rec: rec(state.Idle, terminated), want: Terminate},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			inst := fleet.Instance{ID: "i-1", LaunchTime: now.Add(-r.age), Tags: r.tags, UsageClass: fleet.Spot, State: "running"}
			if r.ec2 != "" {
				inst.UsageClass = r.ec2
			}
			if r.state != "" {
				inst.State = r.state
			}
			ps := pools()
			if r.pool != nil {
				p := ps["linux"]
				r.pool(&p)
				ps["linux"] = p
			}
			in := Input{Now: now, Pools: ps, Instances: []fleet.Instance{inst}, Records: map[string]*state.Instance{}, Runners: map[string][]github.Runner{"acme": r.runners}, Runner: func(_ string, id int64) (github.Runner, bool, error) {
				if r.lookup == nil {
					t.Fatal("GitHub looked up without need")
				}
				return r.lookup(id)
			}}
			if r.rec != nil {
				in.Records["i-1"] = r.rec
			}
			for _, o := range r.others { // records only: what the tier counts
				in.Records[o.ID] = o
			}
			got := Decide(in)
			if len(got) != 1 || got[0].Action != r.want || !strings.Contains(got[0].Reason, r.reason) {
				t.Fatalf("decision = %+v, want %s %q", got, r.want, r.reason)
			}
			if r.deregister != nil && !slices.Equal(got[0].Deregister, r.deregister) {
				t.Fatalf("deregister %v, want %v", got[0].Deregister, r.deregister)
			}
			// Every termination says its kind: a confirmed orphan (phase 2
			// of an orphan tag), or scale-down's own.
			if got[0].Action == Terminate {
				want := KindScaleDown
				if r.tags[fleet.TagOrphan] != "" {
					want = KindOrphan
				}
				if got[0].Kind != want {
					t.Fatalf("kind %q, want %q", got[0].Kind, want)
				}
			}
		})
	}
}

// TestIdleQuotaPerPoolAndEviction: three clean idle instances, quota 1 in
// the active window; oldest_first keeps the newest.
func TestIdleQuotaPerPoolAndEviction(t *testing.T) {
	in := Input{Now: now, Pools: pools(), Records: map[string]*state.Instance{}, Runners: map[string][]github.Runner{}}
	other := state.PoolConfig{Name: "linux-xl", Owner: "acme", IdleWindows: []state.IdleWindow{{Cron: "* * * * *", TimeZone: "UTC", IdleCount: 1, EvictionStrategy: "newest_first"}}}
	other.Timings = other.Timings.WithDefaults()
	in.Pools["linux-xl"] = other
	for i, pool := range []string{"linux", "linux", "linux", "linux-xl", "linux-xl"} {
		id := "i-" + string(rune('a'+i))
		in.Instances = append(in.Instances, fleet.Instance{ID: id, LaunchTime: now.Add(-time.Duration(i+1) * time.Hour), Tags: map[string]string{fleet.TagPool: pool, fleet.TagOwner: "acme"}})
		r := rec(state.Idle, clean)
		r.ID, r.Pool = id, pool
		in.Records[id] = r
	}
	got := map[string]Action{}
	for _, d := range Decide(in) {
		got[d.InstanceID] = d.Action
	}
	want := map[string]Action{"i-a": Renew, "i-b": Terminate, "i-c": Terminate, "i-d": Terminate, "i-e": Renew}
	for id, a := range want {
		if got[id] != a {
			t.Errorf("%s: %s, want %s (all: %v)", id, got[id], a, got)
		}
	}
	// Outside the Berlin window (Sunday) the linux quota is 0.
	in.Now = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for i := range in.Instances {
		in.Instances[i].LaunchTime = in.Instances[i].LaunchTime.Add(-24 * time.Hour)
	}
	for _, r := range in.Records {
		r.Threshold = in.Now.Add(10 * time.Minute).Unix()
	}
	for _, d := range Decide(in) {
		if d.Pool == "linux" && d.Action != Terminate {
			t.Errorf("outside the window %s: %s", d.InstanceID, d.Action)
		}
	}
}

// TestUnclaimableIdleHoldsNoQuota: the newest idle instance, which
// oldest_first would keep, is too old for a claim; it is retired and the
// next one takes the quota.
func TestUnclaimableIdleHoldsNoQuota(t *testing.T) {
	in := Input{Now: now, Pools: pools(), Records: map[string]*state.Instance{}, Runners: map[string][]github.Runner{}}
	for i, uses := range []int{50, 3} {
		id := "i-" + string(rune('a'+i))
		in.Instances = append(in.Instances, fleet.Instance{ID: id, LaunchTime: now.Add(-time.Duration(i+1) * time.Hour), Tags: plain})
		r := rec(state.Idle, clean)
		r.ID, r.Uses = id, uses
		in.Records[id] = r
	}
	got := map[string]Action{}
	for _, d := range Decide(in) {
		got[d.InstanceID] = d.Action
	}
	if got["i-a"] != Terminate || got["i-b"] != Renew {
		t.Fatalf("decisions %v, want i-a retired (maxUses) and i-b renewed", got)
	}
}
