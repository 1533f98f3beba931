package main

import (
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The GitHub calls a request can cost, as the fake counts them.
const (
	callMint   = "POST /orgs/{org}/actions/runners/generate-jitconfig"
	callGroups = "GET /orgs/{org}/actions/runner-groups"
	callLook   = "GET /orgs/{org}/actions/runners" // RunnerNamed: ?name=
)

// TestAnInstanceFloodingJITRequestsCostsTheOwnerAtMostTheBound (issue 36
// item 1): root on an instance wrote UD_JIT_NEXT 20 times in 1.6 s, each
// asking for the successor of the last configuration written, and got 21
// configurations: 20 generate-jitconfig calls against the owner's
// installation budget, 21 runners under the run's label, and with
// runner_group set a page through the owner's runner groups for each.
// Replayed here with the signal write the instance role allows
// (state.PutSignal on its own record), read from the table's stream and
// served by the real consumer, against the fake GitHub:
//   - the burst as it happened (the control plane's clock still): one
//     configuration, every other request refused by the instance's rate;
//   - the same burst spread out (the clock moved past the rate before each
//     write): the cap holds: the first configuration and at most
//     DefaultJITLimits.Unused more while none of the runners takes a job,
//     and the looks at GitHub that find none are backed off.
//
// Every refusal is in the record (what ghrunner instances shows) and in
// the function's JITRequestsRefused metric; the runner groups are listed
// once. With the control disabled (DecideJIT always minting, the rate
// clause of TakeJITRequest taken out; tried once) it reports: "40
// generate-jitconfig calls and 41 runners for one instance's 40 requests,
// want at most 2 and 3"; without the group cache (Deps.Groups nil):
// "the owner's runner groups were listed 3 times, want once", one per
// mint.
func TestAnInstanceFloodingJITRequestsCostsTheOwnerAtMostTheBound(t *testing.T) {
	f := newJITFlood(t, "AROAJITCAPTESTROLE001", "i-0flood", "large")
	fake, store, inst := f.fake, f.store, f.inst
	before := fake.Counts()
	f.flood(20, 0)                                                        // as it happened
	mintsInBurst := fake.Counts()[callMint] - before[callMint]            // the rate alone
	f.flood(20, controlplane.DefaultJITLimits.Every+500*time.Millisecond) // spread out

	after := fake.Counts()
	mints, looks, listed := after[callMint]-before[callMint], after[callLook]-before[callLook], after[callGroups]
	runners, asks, outs := len(f.jitRunners()), f.asks, f.outs
	limit := controlplane.DefaultJITLimits.Unused
	t.Logf("%d requests: %d generate-jitconfig calls (%d in the burst), %d looks at a runner, %d runner group listings, %d runners", asks, mints, mintsInBurst, looks, listed, runners)
	if mints > limit || runners > limit+1 {
		t.Fatalf("%d generate-jitconfig calls and %d runners for one instance's %d requests, want at most %d and %d", mints, runners, asks, limit, limit+1)
	}
	if mintsInBurst != limit {
		t.Errorf("%d generate-jitconfig calls within the burst, want %d: the cap's, then one look within the instance's rate", mintsInBurst, limit)
	}
	// Looks: at most one per runner not seen, at the cap and then after
	// 10 s, 20 s, … (the spread-out burst lasts 50 s): 3 looks here.
	if maxLooks := (limit + 1) * 3; looks > maxLooks {
		t.Errorf("%d looks at runners, want at most %d", looks, maxLooks)
	}
	if listed != 1 {
		t.Errorf("the owner's runner groups were listed %d times, want once (cached)", listed)
	}

	// Refused, recorded and seen.
	rec, err := store.Get(ctx, inst.Key)
	must(t, err)
	r := rec.JITRefusedNow()
	refused := asks - mints
	if r.Count != refused || r.Clause != state.ClauseJITUnused || r.Why == "" || r.Looks == 0 {
		t.Errorf("the record's last refusal: %+v; want %d refused, the last for runners that took no job, with the looks made", r, refused)
	}
	if v := ops.View(*rec); v.JITRefused == nil || v.JITRefused.Count != refused {
		t.Errorf("ghrunner instances shows %+v, want the refusals", v.JITRefused)
	}
	if _, asked := rec.Signals[state.SignalJITNext]; asked {
		t.Error("a refused request is still in the record: its next write would deliver it again")
	}
	var recs []metrics.Record
	byClause := map[state.Clause]int{}
	for _, o := range outs {
		recs = append(recs, invocationMetrics(bundle.HandlerJIT, nil, o, false, 0.1, -1)...)
		for _, r := range o.Refused {
			byClause[r.Clause]++
		}
	}
	points := read(t, recs)
	for clause, n := range byClause {
		if got := sum(points, "JITRequestsRefused", map[string]string{"function": bundle.HandlerJIT, "pool": "linux", "reason": string(clause)}); got != float64(n) {
			t.Errorf("JITRequestsRefused for %s = %v, want %d", clause, got, n)
		}
	}
	if total, _ := metrics.Sum(points, "JITRequestsRefused", nil); total != float64(refused) || byClause[state.ClauseJITRate] == 0 || byClause[state.ClauseJITUnused] == 0 {
		t.Errorf("JITRequestsRefused = %v (%v), want %d, both the rate and the cap", total, byClause, refused)
	}
}

// Issue 36: GitHub shows a just-in-time runner that took its job as gone
// (it removes one after its job), and the cap counts a runner seen gone as
// one that took a job: an honest agent's runners look exactly so, never
// seen busy (they are asked for only once the last one exited). So a
// runner that someone else deletes — an owner's admin, a script that
// removes offline runners, GitHub itself a day after an unused one was
// made — counts as served too, and earns the instance the cap's worth of
// configurations again: at most DefaultJITLimits.Unused+1 per deletion,
// and none without one. The bound is accepted and documented
// (docs/security.md, C20): the instance cannot delete a runner itself, and
// telling a deleted runner from one that took a job needs the run's jobs
// (the App's Actions permission), which the runner permission does not
// give. What the instance can do alone earns nothing: keeping its
// runners online with their credentials, without a job. (With a runner
// that is merely online counted as seen — LookJIT taking Online() for
// Busy, tried once — it reports "the instance kept its runners online and
// got 20 configurations for 20 requests, want at most 2".)
func TestARunnerSomeoneElseDeletesEarnsTheInstanceAtMostTheCapAgain(t *testing.T) {
	f := newJITFlood(t, "AROAJITDELETETESTRL1", "i-0deleted", "")
	limit := controlplane.DefaultJITLimits.Unused
	spread := controlplane.DefaultJITLimits.Every + 500*time.Millisecond
	mints := func() int { return f.fake.Counts()[callMint] }

	// The instance alone: its runners online, none taking a job.
	before := mints()
	for range 20 {
		for _, r := range f.jitRunners() {
			f.fake.HoldSession(r.ID)
		}
		f.flood(1, spread)
	}
	if got := mints() - before; got > limit {
		t.Fatalf("the instance kept its runners online and got %d configurations for 20 requests, want at most %d", got, limit)
	}

	// Someone else deletes the assignment's runners, three times, each
	// after the looks' back-off has passed; the instance floods between.
	const deletions = 3
	for i := range deletions {
		for _, r := range f.jitRunners() {
			must(t, f.gh.DeleteRunner(ctx, "acme", r.ID))
		}
		f.clock = f.clock.Add(controlplane.DefaultJITLimits.LookMax)
		before := mints()
		f.flood(10, spread)
		got := mints() - before
		t.Logf("deletion %d: %d configurations for 10 requests", i+1, got)
		if got > limit+1 {
			t.Fatalf("deletion %d earned the instance %d configurations, want at most %d (the cap again)", i+1, got, limit+1)
		}
	}
	// And nothing more without another.
	f.clock = f.clock.Add(controlplane.DefaultJITLimits.LookMax)
	before = mints()
	f.flood(10, spread)
	if got := mints() - before; got != 0 {
		t.Fatalf("%d configurations with no runner deleted since the last, want none", got)
	}
	rec, err := f.store.Get(ctx, f.inst.Key)
	must(t, err)
	if max := 1 + limit + deletions*(limit+1); rec.JITSeq > max {
		t.Fatalf("the assignment holds %d configurations, want at most %d: the first, the cap, and the cap again per deletion", rec.JITSeq, max)
	}
}
