package main

import (
	"bytes"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/scaledown"
)

// read encodes records as the bundle writes them and reads them back as
// CloudWatch would.
func read(t *testing.T, recs []metrics.Record) []metrics.Point {
	t.Helper()
	var buf bytes.Buffer
	for _, r := range recs {
		line, err := r.Encode(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(line)
	}
	points, err := metrics.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return points
}

func sum(points []metrics.Point, name string, dims map[string]string) float64 {
	s, _ := metrics.Sum(points, name, dims)
	return s
}

func TestAProvisionsMetricsComeFromItsOutput(t *testing.T) {
	out := &provision.Output{Pool: "linux", Status: "ready", Reused: 2, Created: 2, ElapsedSeconds: 3.5, UsageClass: "spot", ClaimsRefused: 3, Instances: []provision.Instance{
		{Source: "reused", UsageClass: "on-demand", ClaimedSeconds: 0.1, ConfiguredSeconds: 0.2, ReadySeconds: 0.5},
		{Source: "reused", UsageClass: "spot", ClaimedSeconds: 0.1, ConfiguredSeconds: 0.3, ReadySeconds: 0.7},
		{Source: "created", UsageClass: "spot", ClaimedSeconds: 1.2, ConfiguredSeconds: 1.4, ReadySeconds: 3.4},
		{Source: "created", UsageClass: "on-demand", ClaimedSeconds: 1.3, ConfiguredSeconds: 1.5, ReadySeconds: 3.3},
	}}
	p := read(t, invocationMetrics(bundle.HandlerProvision, nil, out, false, 3.6, 4999))
	pool := map[string]string{"function": "provision", "pool": "linux"}
	// The on-demand instance reused from the pool is no fallback; the
	// created one of a spot request is.
	for name, want := range map[string]float64{"PoolHits": 2, "PoolMisses": 2, "ProvisionSeconds": 3.5, "ReadySeconds": 0.5 + 0.7 + 3.4 + 3.3, "SpotInstances": 2,
		"OnDemandFallbacks": 1, "ClaimsRefused": 3, "ProvisionFailures": 0} {
		if got := sum(p, name, pool); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	fn := map[string]string{"function": "provision"}
	if sum(p, "Invocations", fn) != 1 || sum(p, "Errors", fn) != 0 || sum(p, "GitHubRateRemaining", fn) != 4999 {
		t.Errorf("function metrics: %+v", p)
	}
}

func TestAFailedProvisionCountsAgainstThePoolItAskedFor(t *testing.T) {
	p := read(t, invocationMetrics(bundle.HandlerProvision, []byte(`{"runId":"1","pool":"gpu"}`), (*provision.Output)(nil), true, 0.2, -1))
	if got := sum(p, "ProvisionFailures", map[string]string{"pool": "gpu"}); got != 1 {
		t.Errorf("ProvisionFailures = %v, want 1", got)
	}
	if got := sum(p, "Errors", map[string]string{"function": "provision"}); got != 1 {
		t.Errorf("Errors = %v, want 1", got)
	}
	if _, n := metrics.Sum(p, "GitHubRateRemaining", nil); n != 0 {
		t.Error("a rate limit GitHub never sent was reported")
	}
}

func TestTerminationsAndRepairsAreCountedByReason(t *testing.T) {
	rf := &refresh.Output{
		Terminated: []refresh.Decision{{Pool: "linux", Kind: refresh.KindExpired}, {Pool: "linux", Kind: refresh.KindUnrecorded}, {Pool: "linux", Kind: refresh.KindGone},
			{Pool: "linux", Kind: refresh.KindInterrupted}},
		Expired:   []refresh.Decision{{Pool: "linux", Kind: refresh.KindStale}, {Pool: "linux", Kind: refresh.KindRetired}},
		Repooled:  []refresh.Decision{{Pool: "linux", Kind: refresh.KindRepooled}},
		Adopted:   []refresh.Decision{{Pool: "linux", Kind: refresh.KindAdopted}},
		Stuck:     []refresh.Decision{{Pool: "linux", Kind: refresh.KindStuck}},
		Instances: map[string]map[state.State]int{"linux": {state.Idle: 3, state.Running: 2, state.Created: 0}},
	}
	p := read(t, invocationMetrics(bundle.HandlerRefresh, nil, rf, false, 1, -1))
	for reason, want := range map[string]float64{"expired": 1, "unrecorded": 1, "stale": 1, "retired": 1, "gone": 0, "interrupted": 1} {
		if got := sum(p, "Terminations", map[string]string{"reason": reason}); got != want {
			t.Errorf("Terminations %s = %v, want %v", reason, got, want)
		}
	}
	for st, want := range map[string]float64{"idle": 3, "running": 2, "created": 0} {
		if got, n := metrics.Sum(p, "InstancesByState", map[string]string{"pool": "linux", "state": st}); got != want || n != 1 {
			t.Errorf("InstancesByState %s = %v (%d values), want %v", st, got, n, want)
		}
	}
	for reason, want := range map[string]float64{"unrecorded": 1, "gone": 1, "lost-pool-message": 1, "adopted": 1, "interrupted": 0} {
		if got := sum(p, "Repairs", map[string]string{"reason": reason}); got != want {
			t.Errorf("Repairs %s = %v, want %v", reason, got, want)
		}
	}
	// A spot instance EC2 took back is the price of spot, not a repair.
	if got := sum(p, "SpotInterruptions", map[string]string{"pool": "linux"}); got != 1 {
		t.Errorf("SpotInterruptions = %v, want 1", got)
	}
	if got := sum(p, "StuckRuns", map[string]string{"pool": "linux"}); got != 1 {
		t.Errorf("StuckRuns = %v, want 1", got)
	}
	sd := &scaledown.Output{
		Terminated: []scaledown.Decision{{Pool: "linux", Kind: scaledown.KindScaleDown}, {Kind: scaledown.KindOrphan}},
		Kept:       []scaledown.Decision{{Pool: "linux", Action: scaledown.Renew}, {Pool: "linux", Action: scaledown.Keep}},
	}
	p = read(t, invocationMetrics(bundle.HandlerScaleDown, nil, sd, false, 1, -1))
	if sum(p, "Terminations", map[string]string{"reason": "scale-down", "pool": "linux"}) != 1 ||
		sum(p, "Terminations", map[string]string{"reason": "orphan", "pool": "unknown"}) != 1 ||
		sum(p, "IdleInstancesKept", map[string]string{"pool": "linux"}) != 1 {
		t.Errorf("scale-down metrics: %+v", p)
	}
}

// The runner version an agent reports is its own to write: a compromised
// instance that reports a new one at every refresh must not mint a metric
// series each time, nor put its text into a dimension. Only the pool's
// target, a pinned release and "unknown" pass; other versions are "other",
// anything else "invalid".
//
// With versionDimension returning the version unchanged, the test
// reported (tried once):
//
//	version dimensions ["2.336.0" "2.337.0" "2.337.0\x1b]52;c;Y3VybCB8IHNo\a" "9.9.1" "9.9.2" "unknown" "~~\ni-0forged"],
//	  want ["2.336.0" "2.337.0" "invalid" "other" "unknown"]
//	InstancesByRunnerVersion other = 0 (0 values), want 2 in one
//	InstancesByRunnerVersion invalid = 0 (0 values), want 2 in one
func TestARunnerVersionAnInstanceMadeUpMintsNoMetricSeries(t *testing.T) {
	rf := &refresh.Output{RunnerVersions: map[string]refresh.PoolVersions{"linux": {Target: "2.337.0", Instances: map[string]int{
		"2.337.0": 2, "2.336.0": 1, "unknown": 1, // the target, a pinned release, none reported
		"9.9.1": 1, "9.9.2": 1, // of the form, made up
		"2.337.0\x1b]52;c;Y3VybCB8IHNo\a": 1, "~~\ni-0forged": 1,
	}}}}
	p := read(t, invocationMetrics(bundle.HandlerRefresh, nil, rf, false, 1, -1))
	seen := map[string]bool{}
	for _, pt := range p {
		if pt.Name == "InstancesByRunnerVersion" {
			seen[pt.Dimensions["version"]] = true
		}
	}
	if got, want := slices.Sorted(maps.Keys(seen)), []string{"2.336.0", "2.337.0", "invalid", "other", "unknown"}; !slices.Equal(got, want) {
		t.Errorf("version dimensions %q, want %q", got, want)
	}
	for version, want := range map[string]float64{"2.337.0": 2, "2.336.0": 1, "unknown": 1, "other": 2, "invalid": 2} {
		if got, n := metrics.Sum(p, "InstancesByRunnerVersion", map[string]string{"pool": "linux", "version": version}); got != want || n > 1 {
			t.Errorf("InstancesByRunnerVersion %s = %v (%d values), want %v in one", version, got, n, want)
		}
	}
}

// Instances a spot request got on-demand because the pool's spot breaker
// was open are counted as the breaker's, not as capacity fallbacks; every
// refresh says, per spot pool, whether its breaker is open, and what it
// did about jobs lost to spot.
func TestTheSpotBreakerIsSeenInTheMetrics(t *testing.T) {
	out := &provision.Output{Pool: "linux", Status: "ready", Created: 2, UsageClass: "spot", SpotBreaker: true, Instances: []provision.Instance{
		{Source: "created", UsageClass: "on-demand"}, {Source: "created", UsageClass: "on-demand"},
	}}
	p := read(t, invocationMetrics(bundle.HandlerProvision, nil, out, false, 1, -1))
	pool := map[string]string{"function": "provision", "pool": "linux"}
	if got, fb := sum(p, "OnDemandBySpotBreaker", pool), sum(p, "OnDemandFallbacks", pool); got != 2 || fb != 0 {
		t.Errorf("OnDemandBySpotBreaker = %v, OnDemandFallbacks = %v; want 2 and 0", got, fb)
	}
	rf := &refresh.Output{SpotBreakers: map[string]refresh.BreakerView{"linux": {Open: true, Recent: 2}, "arm": {Recent: 1}},
		Reruns: []refresh.Decision{{Pool: "linux", Kind: refresh.KindRerunPending}, {Pool: "linux", Kind: refresh.KindRerun}, {Pool: "arm", Kind: refresh.KindNotRerun}}}
	p = read(t, invocationMetrics(bundle.HandlerRefresh, nil, rf, false, 1, -1))
	for pl, want := range map[string]float64{"linux": 1, "arm": 0} {
		if got, n := metrics.Sum(p, "SpotBreakerOpen", map[string]string{"pool": pl}); got != want || n != 1 {
			t.Errorf("SpotBreakerOpen %s = %v (%d values), want %v", pl, got, n, want)
		}
	}
	// What refresh did about jobs lost to spot, by result.
	for dims, want := range map[[2]string]float64{{"linux", "rerun-pending"}: 1, {"linux", "rerun"}: 1, {"arm", "not-rerun"}: 1, {"arm", "rerun"}: 0} {
		if got := sum(p, "SpotJobReruns", map[string]string{"pool": dims[0], "result": dims[1]}); got != want {
			t.Errorf("SpotJobReruns %v = %v, want %v", dims, got, want)
		}
	}
}

func TestAnInvocationsUsageMetricsAreTheSpansItWroteAndLost(t *testing.T) {
	p := read(t, []metrics.Record{usageMetrics(bundle.HandlerRelease, 10, 1, 14, 3)})
	fn := map[string]string{"function": "release"}
	if got := sum(p, "UsageSpansRecorded", fn); got != 4 {
		t.Errorf("UsageSpansRecorded = %v, want the 4 written during the invocation", got)
	}
	if got := sum(p, "UsageSpansLost", fn); got != 2 {
		t.Errorf("UsageSpansLost = %v, want the 2 lost during the invocation", got)
	}
}
