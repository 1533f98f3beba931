package main

import (
	"cmp"
	"encoding/json"
	"slices"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/jitstream"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/scaledown"
)

// Metric names (docs/design.md, "Metrics"); the sandbox's story reads
// them back by these names.
const (
	mInvocations       = "Invocations"
	mErrors            = "Errors"
	mDuration          = "DurationSeconds"
	mGitHubRate        = "GitHubRateRemaining"
	mProvisionTime     = "ProvisionSeconds"
	mProvisionFail     = "ProvisionFailures"
	mPoolHits          = "PoolHits"
	mPoolMisses        = "PoolMisses"
	mClaimTime         = "ClaimSeconds"
	mConfigTime        = "ConfigSeconds"
	mReadyTime         = "ReadySeconds"
	mSpot              = "SpotInstances"
	mFallbacks         = "OnDemandFallbacks"
	mClaimsRefused     = "ClaimsRefused"
	mReleaseTime       = "ReleaseSeconds"
	mPooled            = "InstancesPooled"
	mExpiredRelease    = "InstancesExpiredAtRelease"
	mTerminations      = "Terminations"
	mRepairs           = "Repairs"
	mKeptIdle          = "IdleInstancesKept"
	mPrewarmed         = "InstancesPrewarmed"
	mByState           = "InstancesByState"
	mSpotInterruptions = "SpotInterruptions"
	mStuckRuns         = "StuckRuns"
	mByRunnerVersion   = "InstancesByRunnerVersion"
	mVersionLeft       = "RunnerVersionSecondsLeft"
	mJITRefused        = "JITRequestsRefused"
	mBreakerLaunches   = "OnDemandBySpotBreaker"
	mBreakerOpen       = "SpotBreakerOpen"
	mReruns            = "SpotJobReruns"
	mSpansRecorded     = "UsageSpansRecorded"
	mSpansLost         = "UsageSpansLost"
)

// invocationMetrics turns one invocation's result into metric records:
// every number comes from the output the caller also receives, so the
// metrics and what a workflow sees cannot disagree.
func invocationMetrics(handler string, payload json.RawMessage, out any, failed bool, seconds float64, rateRemaining int64) []metrics.Record {
	fn := metrics.Record{Dimensions: map[string]string{"function": handler}}
	fn.Add(mInvocations, metrics.Count, 1)
	fn.Add(mErrors, metrics.Count, b2f(failed))
	fn.Add(mDuration, metrics.Seconds, seconds)
	if rateRemaining >= 0 {
		fn.Add(mGitHubRate, metrics.Count, float64(rateRemaining))
	}
	recs := []metrics.Record{fn}
	switch o := out.(type) {
	case *provision.Output:
		if o != nil && o.Pool != "" && o.Status == "ready" {
			recs = append(recs, provisionMetrics(o))
		}
	case *release.Output:
		if o != nil {
			r := metrics.Record{Dimensions: map[string]string{"function": handler}}
			r.Add(mReleaseTime, metrics.Seconds, o.ElapsedSeconds)
			r.Add(mPooled, metrics.Count, float64(len(o.Released)))
			r.Add(mExpiredRelease, metrics.Count, float64(len(o.Expired)))
			recs = append(recs, r)
		}
	case *refresh.Output:
		if o != nil {
			recs = append(recs, refreshMetrics(handler, o)...)
		}
	case *scaledown.Output:
		if o != nil {
			recs = append(recs, scaleDownMetrics(handler, o)...)
		}
	case *jitstream.Output:
		if o != nil {
			recs = append(recs, jitMetrics(handler, o)...)
		}
	}
	if handler == bundle.HandlerProvision && failed {
		// A provision that failed returns no output; its pool is in the payload.
		var in struct {
			Pool string `json:"pool"`
		}
		if json.Unmarshal(payload, &in) == nil && in.Pool != "" {
			r := metrics.Record{Dimensions: map[string]string{"function": handler, "pool": in.Pool}}
			r.Add(mProvisionFail, metrics.Count, 1)
			recs = append(recs, r)
		}
	}
	return recs
}

func provisionMetrics(o *provision.Output) metrics.Record {
	r := metrics.Record{Dimensions: map[string]string{"function": bundle.HandlerProvision, "pool": o.Pool}}
	r.Add(mProvisionTime, metrics.Seconds, o.ElapsedSeconds)
	r.Add(mProvisionFail, metrics.Count, 0)
	r.Add(mPoolHits, metrics.Count, float64(o.Reused))
	r.Add(mPoolMisses, metrics.Count, float64(o.Created))
	spot, fallbacks, byBreaker := 0, 0, 0
	for _, in := range o.Instances {
		r.Add(mClaimTime, metrics.Seconds, in.ClaimedSeconds)
		r.Add(mConfigTime, metrics.Seconds, in.ConfiguredSeconds)
		r.Add(mReadyTime, metrics.Seconds, in.ReadySeconds)
		if in.UsageClass == state.UsageClassSpot {
			spot++
		}
		if o.UsageClass == state.UsageClassSpot && in.UsageClass == state.UsageClassOnDemand && in.Source == "created" {
			// The pool's spot breaker, when it was open, chose on-demand
			// before EC2 was asked: no fallback from a spot shortage.
			if o.SpotBreaker {
				byBreaker++
			} else {
				fallbacks++
			}
		}
	}
	r.Add(mSpot, metrics.Count, float64(spot))
	r.Add(mFallbacks, metrics.Count, float64(fallbacks))
	r.Add(mBreakerLaunches, metrics.Count, float64(byBreaker))
	r.Add(mClaimsRefused, metrics.Count, float64(o.ClaimsRefused))
	return r
}

// usageMetrics are the usage ledger's spans (internal/state/usage.go) this
// invocation wrote and lost: the store counts since it was made, so the
// invocation's are the counts after it less those before. A lost span is
// time the cost report undercounts; zeros are written too, so an alarm on
// lost spans has data and the dashboard shows the ledger is written.
func usageMetrics(handler string, recordedBefore, lostBefore, recordedAfter, lostAfter int64) metrics.Record {
	r := metrics.Record{Dimensions: map[string]string{"function": handler}}
	r.Add(mSpansRecorded, metrics.Count, float64(recordedAfter-recordedBefore))
	r.Add(mSpansLost, metrics.Count, float64(lostAfter-lostBefore))
	return r
}

// The "reason" dimension of terminations and repairs is the decision's
// kind: refresh's (expired, stale, retired, unrecorded, interrupted;
// repairs unrecorded, gone, lost-pool-message, adopted) and scale-down's
// (scale-down, orphan).

func refreshMetrics(handler string, o *refresh.Output) []metrics.Record {
	terms := map[[2]string]int{}
	repairs := map[[2]string]int{}
	interrupted := map[string]int{}
	for _, d := range o.Terminated {
		k := [2]string{d.Pool, string(d.Kind)}
		if d.Kind != refresh.KindGone { // a record closed is no termination
			terms[k]++
		}
		if d.Kind == refresh.KindGone || d.Kind == refresh.KindUnrecorded {
			repairs[k]++
		}
		if d.Kind == refresh.KindInterrupted {
			interrupted[d.Pool]++
		}
	}
	for _, d := range o.Expired { // stale or retired
		terms[[2]string{d.Pool, string(d.Kind)}]++
	}
	for _, d := range o.Repooled {
		repairs[[2]string{d.Pool, string(d.Kind)}]++
	}
	for _, d := range o.Adopted { // a scale set's claim its dead listener left under a job
		repairs[[2]string{d.Pool, string(d.Kind)}]++
	}
	recs := append(counted(handler, mTerminations, terms), counted(handler, mRepairs, repairs)...)
	warmed := map[string]int{}
	for _, d := range o.Prewarmed {
		warmed[d.Pool]++
	}
	recs = append(recs, perPool(handler, mPrewarmed, warmed)...)
	recs = append(recs, perPool(handler, mSpotInterruptions, interrupted)...)
	// Jobs lost to spot interruptions, by what refresh did: asked for a
	// re-run, re-run, not re-run (a workflow's own run), failed.
	reruns := map[[2]string]int{}
	for _, d := range o.Reruns {
		reruns[[2]string{d.Pool, string(d.Kind)}]++
	}
	for k, n := range reruns {
		r := metrics.Record{Dimensions: map[string]string{"function": handler, "pool": k[0], "result": k[1]}}
		r.Add(mReruns, metrics.Count, float64(n))
		recs = append(recs, r)
	}
	for p, b := range o.SpotBreakers {
		r := metrics.Record{Dimensions: map[string]string{"function": handler, "pool": p}}
		r.Add(mBreakerOpen, metrics.Count, b2f(b.Open))
		recs = append(recs, r)
	}
	stuck := map[string]int{}
	for _, d := range o.Stuck {
		stuck[d.Pool]++
	}
	recs = append(recs, perPool(handler, mStuckRuns, stuck)...)
	for p, counts := range o.Instances {
		for st, n := range counts {
			r := metrics.Record{Dimensions: map[string]string{"function": handler, "pool": p, "state": string(st)}}
			r.Add(mByState, metrics.Count, float64(n))
			recs = append(recs, r)
		}
	}
	// Each pool's runner versions, and how long until GitHub refuses the
	// oldest (the monitoring's alarm fires when that falls below its
	// threshold, before any runner of the pool is refused).
	for p, v := range o.RunnerVersions {
		byDimension := map[string]int{}
		for version, n := range v.Instances {
			byDimension[versionDimension(version, v.Target)] += n
		}
		for version, n := range byDimension {
			r := metrics.Record{Dimensions: map[string]string{"function": handler, "pool": p, "version": version}}
			r.Add(mByRunnerVersion, metrics.Count, float64(n))
			recs = append(recs, r)
		}
		if v.SecondsLeft != nil {
			r := metrics.Record{Dimensions: map[string]string{"function": handler, "pool": p}}
			r.Add(mVersionLeft, metrics.Seconds, float64(*v.SecondsLeft))
			recs = append(recs, r)
		}
	}
	return recs
}

func scaleDownMetrics(handler string, o *scaledown.Output) []metrics.Record {
	terms := map[[2]string]int{}
	for _, d := range o.Terminated {
		terms[[2]string{d.Pool, string(cmp.Or(d.Kind, scaledown.KindScaleDown))}]++
	}
	kept := map[string]int{}
	for _, d := range o.Kept {
		if d.Action == scaledown.Renew {
			kept[d.Pool]++
		}
	}
	return append(counted(handler, mTerminations, terms), perPool(handler, mKeptIdle, kept)...)
}

// jitMetrics counts the just-in-time requests refused by what they would
// cost, by pool and by the clause refused ("jitRate": the instance's
// rate; "jitUnused": runners of the assignment that took no job). A
// steady count names an instance asking beyond what an honest agent does.
func jitMetrics(handler string, o *jitstream.Output) []metrics.Record {
	refused := map[[2]string]int{}
	for _, r := range o.Refused {
		refused[[2]string{r.Pool, string(r.Clause)}]++
	}
	return counted(handler, mJITRefused, refused)
}

// counted makes one record per (pool, reason) with its count.
func counted(handler, name string, n map[[2]string]int) []metrics.Record {
	var recs []metrics.Record
	for k, v := range n {
		r := metrics.Record{Dimensions: map[string]string{"function": handler, "pool": orUnknown(k[0]), "reason": k[1]}}
		r.Add(name, metrics.Count, float64(v))
		recs = append(recs, r)
	}
	return recs
}

// perPool makes one record per pool with its count.
func perPool(handler, name string, n map[string]int) []metrics.Record {
	var recs []metrics.Record
	for p, v := range n {
		r := metrics.Record{Dimensions: map[string]string{"function": handler, "pool": orUnknown(p)}}
		r.Add(name, metrics.Count, float64(v))
		recs = append(recs, r)
	}
	return recs
}

// versionDimension is the "version" dimension of a runner version an
// agent reported. The agent writes runnerVersion into its own record, so
// root on an instance (or its role's credentials) chooses it, and every
// distinct dimension value is a new metric series, billed by the month: a
// value is kept only when it is one the control plane itself names (the
// pool's target, a release this provider pins, or "unknown": none
// reported yet). Another version of the runner's form (x.y.z, such as the
// pool's previous target while its instances move on) is "other", and
// anything else "invalid": a pool has a bounded number of series whatever
// its instances write. Refresh's output keeps what each agent reported.
func versionDimension(version, target string) string {
	switch {
	case version == "unknown" || version == target && target != "" || slices.Contains(runnerrelease.Versions(), version):
		return version
	case runnerrelease.ValidVersion(version):
		return "other"
	}
	return "invalid"
}

func orUnknown(pool string) string {
	if pool == "" {
		return "unknown"
	}
	return pool
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
