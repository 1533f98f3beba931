package controlplane

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TestDecideJIT: what a request MintWhy allows may cost now. An instance
// asking for number seq+1 with seq written, served the last seen to take
// a job, its last request taken to GitHub at jitAt.
func TestDecideJIT(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := DefaultJITLimits
	asking := func(seq, served int, change func(*state.Instance)) *state.Instance {
		rec := &state.Instance{Key: state.InstanceKey("AROAPOOL", "i-1"), ID: "i-1", State: state.Running, RunID: "run-1", Assignment: "a1",
			JITSeq: seq, JITServed: served, Signals: map[string]state.Signal{state.SignalJITNext: {Assignment: "a1", Detail: strconv.Itoa(seq + 1)}}}
		if change != nil {
			change(rec)
		}
		return rec
	}
	refusedAt := func(seq, looks int, lookedAt int64) func(*state.Instance) {
		return func(i *state.Instance) {
			i.JITRefused = &state.JITRefusal{Assignment: i.Assignment, Seq: seq, Clause: state.ClauseJITUnused, Count: looks, Looks: looks, LookedAt: lookedAt}
		}
	}
	mint, look := JITVerdict{}, JITVerdict{Look: true}
	rate, unused := state.ClauseJITRate, state.ClauseJITUnused
	cases := []struct {
		name   string
		rec    *state.Instance
		looked bool
		want   JITVerdict // Why is checked only for being there
	}{
		{"the second of an assignment, never asked before", asking(1, 0, nil), false, mint},
		{"the third", asking(2, 0, func(i *state.Instance) { i.JITAt = now.Unix() - 2 }), false, mint},
		// Within the cap the count bounds the cost: an honest agent whose
		// jobs take under a second is not slowed.
		{"within the cap, 1 s after the last was taken", asking(2, 0, func(i *state.Instance) { i.JITAt = now.Unix() - 1 }), false, mint},
		{"within the cap, in the same second", asking(1, 0, func(i *state.Instance) { i.JITAt = now.Unix() }), false, mint},
		// The attack of issue 36, past the cap: requests as fast as the
		// instance writes get one look per rate.
		{"past the cap, in the same second", asking(3, 0, func(i *state.Instance) { i.JITAt = now.Unix() }), false, JITVerdict{Clause: rate}},
		{"a clock the instance moved cannot help: jitAt is the control plane's", asking(3, 0, func(i *state.Instance) { i.JITAt = now.Unix(); i.HeartbeatAt = now.Unix() - 3600 }), false, JITVerdict{Clause: rate}},
		// Three written, none seen to take a job: GitHub is asked whether one did.
		{"the fourth with none seen to take a job: look", asking(3, 0, nil), false, look},
		{"the fourth, looked, none took a job", asking(3, 0, nil), true, JITVerdict{Clause: unused}},
		{"the fourth, looked, the third took one", asking(3, 3, nil), true, mint},
		{"the sixth after the third took a job", asking(5, 3, nil), false, mint},
		{"the seventh after the third took a job: look", asking(6, 3, nil), false, look},
		{"looked 5 s ago, none took a job: wait", asking(3, 0, refusedAt(4, 1, now.Unix()-5)), false, JITVerdict{Clause: unused}},
		{"looked 10 s ago once: look again", asking(3, 0, refusedAt(4, 1, now.Unix()-10)), false, look},
		{"looked 3 times, the last 30 s ago: wait (40 s)", asking(3, 0, refusedAt(4, 3, now.Unix()-30)), false, JITVerdict{Clause: unused}},
		{"looked 3 times, the last 40 s ago: look", asking(3, 0, refusedAt(4, 3, now.Unix()-40)), false, look},
		{"looked 20 times, the last 14 min ago: wait (15 min at most)", asking(3, 0, refusedAt(4, 20, now.Unix()-14*60)), false, JITVerdict{Clause: unused}},
		{"looks for another number count for nothing", asking(3, 0, refusedAt(3, 5, now.Unix()-5)), false, look},
		{"looks of an earlier assignment count for nothing", asking(3, 0, func(i *state.Instance) {
			refusedAt(4, 5, now.Unix()-5)(i)
			i.JITRefused.Assignment = "a0"
		}), false, look},
		// Past the cap the rate is judged before a look.
		{"over the cap within the rate", asking(3, 0, func(i *state.Instance) { i.JITAt = now.Unix() - 1 }), false, JITVerdict{Clause: rate}},
		// After the look the rate was taken already (TakeJITRequest).
		{"looked: the rate is not judged again", asking(3, 3, func(i *state.Instance) { i.JITAt = now.Unix() }), true, mint},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := DecideJIT(c.rec, c.looked, now, l)
			if got.Look != c.want.Look || got.Clause != c.want.Clause || got.Refused() != (got.Why != "") {
				t.Errorf("DecideJIT = %+v, want %+v (with a why when refused)", got, c.want)
			}
		})
	}
}

func TestLookWaitDoublesUpToItsMax(t *testing.T) {
	l := DefaultJITLimits
	for looks, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second, 7: 640 * time.Second, 8: 15 * time.Minute, 60: 15 * time.Minute} {
		if got := LookWait(looks, l); got != want {
			t.Errorf("LookWait(%d) = %s, want %s", looks, got, want)
		}
	}
}

// TestTheHonestAgentsCapIsWithinTheControlPlanes: the agent gives up
// after jitIdleCap runners in a row without a job, the first included
// (agent/lifecycle/jitcap.go), so an honest agent never asks for more than
// the control plane allows; the two constants live apart, this ties them.
func TestTheHonestAgentsCapIsWithinTheControlPlanes(t *testing.T) {
	const jitIdleCap = 3 // agent/lifecycle/jitcap.go
	if DefaultJITLimits.Unused < jitIdleCap-1 {
		t.Fatalf("the control plane allows %d beyond the first, the honest agent asks for %d", DefaultJITLimits.Unused, jitIdleCap-1)
	}
}

// countingGroups answers RunnerGroupID and counts the calls.
type countingGroups struct {
	GitHub
	calls int
	err   error
}

func (c *countingGroups) RunnerGroupID(context.Context, string, string) (int64, error) {
	c.calls++
	return 42, c.err
}

// TestRunnerGroupIDsAreCachedPerOwnerAndGroup: with runner_group set,
// each mint paged through the owner's runner groups (issue 36 item 1).
func TestRunnerGroupIDsAreCachedPerOwnerAndGroup(t *testing.T) {
	clock := time.Unix(1_800_000_000, 0)
	gh := &countingGroups{}
	groups := &GroupIDs{TTL: 10 * time.Minute, Now: func() time.Time { return clock }}
	d := &Deps{GitHub: gh, Groups: groups}
	large := &state.PoolConfig{Owner: "acme", RunnerGroup: "large"}
	for range 5 {
		if id, err := d.GroupID(context.Background(), large); id != 42 || err != nil {
			t.Fatalf("GroupID = %d, %v", id, err)
		}
	}
	if gh.calls != 1 {
		t.Fatalf("%d lookups for five mints, want 1", gh.calls)
	}
	if _, err := d.GroupID(context.Background(), &state.PoolConfig{Owner: "globex", RunnerGroup: "large"}); err != nil || gh.calls != 2 {
		t.Fatalf("another owner's group of the same name: %d lookups, %v; want its own", gh.calls, err)
	}
	clock = clock.Add(10 * time.Minute)
	if d.GroupID(context.Background(), large); gh.calls != 3 {
		t.Fatalf("after the TTL: %d lookups, want a new one", gh.calls)
	}
	groups.Forget("acme", "large")
	if d.GroupID(context.Background(), large); gh.calls != 4 {
		t.Fatalf("after Forget: %d lookups, want a new one", gh.calls)
	}
	gh.err = github.ErrNotFound
	groups.Forget("acme", "large")
	if _, err := d.GroupID(context.Background(), large); !errors.Is(err, github.ErrNotFound) {
		t.Fatalf("a failed lookup: %v", err)
	}
	gh.err = nil
	if d.GroupID(context.Background(), large); gh.calls != 6 {
		t.Fatalf("a failed lookup was cached: %d lookups", gh.calls)
	}
	if id, _ := (&Deps{GitHub: gh}).GroupID(context.Background(), large); id != 42 || gh.calls != 7 {
		t.Fatal("without a cache every call asks GitHub")
	}
}
