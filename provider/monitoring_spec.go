package provider

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
)

// What ghrunner_monitoring makes of the functions' metrics (docs/design.md,
// "Metrics"): one dashboard and, per deployment and pool, the alarms a
// platform team pages on. Pure functions of the configuration, so the
// tests read what would be written without an account.

// metricsNamespace is the namespace the functions' EMF lines use.
const metricsNamespace = "ghrunner"

// monitoringSpec is one deployment's monitoring.
type monitoringSpec struct {
	Name, Environment, Region string
	Pools                     []string
	TopicARN                  string
	MissRatio                 float64 // alarm above this share of pool misses
	RateLimitLow              int64   // alarm below this many GitHub requests left
	// ScaleSetPools are the pools (of Pools) that serve a scale set: the
	// listener's polls of each one's session are alarmed on (a pool
	// without one polls nothing).
	ScaleSetPools []string
	// Functions maps handlers to the names of their Lambda functions,
	// whose own Errors metric is alarmed on (monitoring_lambda.go).
	Functions map[string]string
}

// alarmNames lists the alarms of spec, in the order alarms() returns them.
func (s monitoringSpec) alarmNames() []string {
	var names []string
	for _, a := range s.alarms() {
		names = append(names, aws.ToString(a.AlarmName))
	}
	return names
}

func (s monitoringSpec) dims(kv ...string) []cwtypes.Dimension {
	d := []cwtypes.Dimension{{Name: aws.String("environment"), Value: aws.String(s.Environment)}}
	for i := 0; i+1 < len(kv); i += 2 {
		d = append(d, cwtypes.Dimension{Name: aws.String(kv[i]), Value: aws.String(kv[i+1])})
	}
	return d
}

// runnerVersionWarning is how long before GitHub refuses a pool's runner
// version its alarm fires, in seconds (a week).
const runnerVersionWarning = 7 * 24 * 3600

// alarm is one PutMetricAlarm request of spec.
type alarm = cloudwatch.PutMetricAlarmInput

// alarms are the deployment's alarms: per pool, failed provisions and the
// share of workflows the pool could not serve warm; for the deployment,
// repairs refresh had to make, failed scheduled runs and GitHub's rate
// limit running low; per function named, Lambda's own count of its failed
// invocations; with a listener, its polls stopping. Missing data is
// not breaching (a quiet deployment does not page), but for the listener's
// polls (listenerAlarm).
func (s monitoringSpec) alarms() []alarm {
	var out []alarm
	actions := []string{}
	if s.TopicARN != "" {
		actions = []string{s.TopicARN}
	}
	base := func(name, desc string) alarm {
		return alarm{AlarmName: aws.String(s.Name + "-" + name), AlarmDescription: aws.String(desc), ActionsEnabled: aws.Bool(len(actions) > 0),
			AlarmActions: actions, OKActions: actions, TreatMissingData: aws.String("notBreaching"), EvaluationPeriods: aws.Int32(1)}
	}
	for _, pool := range s.Pools {
		a := base("provision-failures-"+pool, fmt.Sprintf("A provision for pool %s failed (ProvisionFailures > 0 in 5 minutes): see the provision function's log.", pool))
		a.Namespace, a.MetricName, a.Dimensions = aws.String(metricsNamespace), aws.String("ProvisionFailures"), s.dims("function", "provision", "pool", pool)
		a.Statistic, a.Period, a.Threshold, a.ComparisonOperator = cwtypes.StatisticSum, aws.Int32(300), aws.Float64(0), cwtypes.ComparisonOperatorGreaterThanThreshold
		out = append(out, a)

		st := base("stuck-runs-"+pool, fmt.Sprintf("A run held an instance of pool %s past its lease (a job beyond timings.max_runtime_seconds, or a workflow that never called release); refresh ended the instance. See ghrunner runs and the run's workflow.", pool))
		st.Namespace, st.MetricName, st.Dimensions = aws.String(metricsNamespace), aws.String("StuckRuns"), s.dims("function", "refresh", "pool", pool)
		st.Statistic, st.Period, st.Threshold, st.ComparisonOperator = cwtypes.StatisticSum, aws.Int32(600), aws.Float64(0), cwtypes.ComparisonOperatorGreaterThanThreshold
		out = append(out, st)

		// Refresh reports, each run, how long until GitHub refuses the
		// oldest runner version of the pool (lambdas/refresh/versions.go):
		// a week's warning to move a pinned pool, or to see why one
		// following "latest" does not move.
		v := base("runner-version-"+pool, fmt.Sprintf("GitHub will refuse a runner version of pool %s within a week (RunnerVersionSecondsLeft below %d): it stops sending jobs to a runner 30 days after the next release. Set a newer runner_version, or see why the pool's instances do not move (refresh's runnerVersions, the agent's log).", pool, runnerVersionWarning))
		v.Namespace, v.MetricName, v.Dimensions = aws.String(metricsNamespace), aws.String("RunnerVersionSecondsLeft"), s.dims("function", "refresh", "pool", pool)
		v.Statistic, v.Period, v.Threshold, v.ComparisonOperator = cwtypes.StatisticMinimum, aws.Int32(900), aws.Float64(runnerVersionWarning), cwtypes.ComparisonOperatorLessThanThreshold
		out = append(out, v)

		m := base("pool-misses-"+pool, fmt.Sprintf("More than %.0f%% of the runners pool %s gave in an hour were launched, not reused: raise its idle window's idle_count or max_instances.", 100*s.MissRatio, pool))
		metric := func(id, name string) cwtypes.MetricDataQuery {
			return cwtypes.MetricDataQuery{Id: aws.String(id), ReturnData: aws.Bool(false), MetricStat: &cwtypes.MetricStat{Period: aws.Int32(3600), Stat: aws.String("Sum"),
				Metric: &cwtypes.Metric{Namespace: aws.String(metricsNamespace), MetricName: aws.String(name), Dimensions: s.dims("function", "provision", "pool", pool)}}}
		}
		m.Metrics = []cwtypes.MetricDataQuery{metric("misses", "PoolMisses"), metric("hits", "PoolHits"),
			{Id: aws.String("ratio"), Expression: aws.String("misses / (misses + hits)"), Label: aws.String("pool-miss ratio"), ReturnData: aws.Bool(true)}}
		m.Threshold, m.ComparisonOperator = aws.Float64(s.MissRatio), cwtypes.ComparisonOperatorGreaterThanThreshold
		out = append(out, m)
	}
	r := base("repairs", "Refresh repaired the table or EC2 (an instance without a live record, a record without an instance, a lost pool message, a scale set's claim adopted under its running job): a function or the listener was killed midway or something outside ghrunner changed its instances.")
	r.Namespace, r.MetricName, r.Dimensions = aws.String(metricsNamespace), aws.String("Repairs"), s.dims("function", "refresh")
	r.Statistic, r.Period, r.Threshold, r.ComparisonOperator = cwtypes.StatisticSum, aws.Int32(900), aws.Float64(0), cwtypes.ComparisonOperatorGreaterThanThreshold
	for _, fn := range []string{"refresh", "scale-down"} {
		e := base(fn+"-errors", fmt.Sprintf("%s failed three periods in a row: instances may be left unreconciled; see its log and its last run in ghrunner status.", fn))
		e.Namespace, e.MetricName, e.Dimensions = aws.String(metricsNamespace), aws.String("Errors"), s.dims("function", fn)
		e.Statistic, e.Period, e.Threshold, e.ComparisonOperator = cwtypes.StatisticSum, aws.Int32(600), aws.Float64(0), cwtypes.ComparisonOperatorGreaterThanThreshold
		e.EvaluationPeriods, e.DatapointsToAlarm = aws.Int32(3), aws.Int32(3)
		out = append(out, e)
	}
	out = append(out, s.lambdaErrorsAlarms(base)...)
	for _, pool := range s.ScaleSetPools {
		out = append(out, s.listenerAlarm(base("listener-polls-"+pool, listenerPollsDescription(pool)), pool))
	}
	g := base("github-rate-limit", fmt.Sprintf("GitHub's API rate limit left for ghrunner fell below %d requests: provisions will wait or fail until it resets.", s.RateLimitLow))
	g.Namespace, g.MetricName, g.Dimensions = aws.String(metricsNamespace), aws.String("GitHubRateRemaining"), s.dims("function", "provision")
	g.Statistic, g.Period, g.Threshold, g.ComparisonOperator = cwtypes.StatisticMinimum, aws.Int32(300), aws.Float64(float64(s.RateLimitLow)), cwtypes.ComparisonOperatorLessThanThreshold
	return append(out, r, g)
}

// listenerPollsDescription is the description of pool's listener alarm.
func listenerPollsDescription(pool string) string {
	return fmt.Sprintf("No poll of pool %s's scale set's message session answered for 2 minutes (ListenerPolls of the listener, pool %s): ", pool, pool) +
		"the listener is down or stuck, or GitHub refuses this scale set's session (another listener holds it, the scale set cannot be made), and its jobs wait. " +
		"See ghrunner status (each scale set's session holder, last poll and last error) and the listener's log."
}

// listenerAlarm fires when the listener's polls of pool's scale set stop.
// One per scale set, not one over the listener: a listener serving two
// scale sets whose one session GitHub keeps refusing still polls the
// other's, and a sum over both would never alarm. The listener reports
// each scale set's polls every 15 s (lambdas/listener/seen.go), a zero
// when none answered, and a poll answers within a minute (GitHub holds it
// open about 50 s): a minute without a poll is a scale set nobody serves.
// Unlike the others, missing data breaches: a listener that died writes no
// line at all. Two minutes in a row, so that a report landing late does
// not page.
func (s monitoringSpec) listenerAlarm(a alarm, pool string) alarm {
	a.Namespace, a.MetricName, a.Dimensions = aws.String(metricsNamespace), aws.String("ListenerPolls"), s.dims("function", "listener", "pool", pool)
	a.Statistic, a.Period, a.Threshold, a.ComparisonOperator = cwtypes.StatisticSum, aws.Int32(60), aws.Float64(1), cwtypes.ComparisonOperatorLessThanThreshold
	a.EvaluationPeriods, a.DatapointsToAlarm, a.TreatMissingData = aws.Int32(2), aws.Int32(2), aws.String("breaching")
	return a
}

// dashboard is the dashboard body: time to a runner, hits and misses, the
// way to ready, release, terminations and repairs, instances by state and
// the usage ledger (what cost comes from), errors, GitHub's rate limit.
func (s monitoringSpec) dashboard() string {
	type widget struct {
		Type       string         `json:"type"`
		X          int            `json:"x"`
		Y          int            `json:"y"`
		Width      int            `json:"width"`
		Height     int            `json:"height"`
		Properties map[string]any `json:"properties"`
	}
	var widgets []widget
	add := func(title string, stat string, metrics [][]any) {
		i := len(widgets)
		widgets = append(widgets, widget{Type: "metric", X: (i % 2) * 12, Y: (i / 2) * 6, Width: 12, Height: 6, Properties: map[string]any{
			"title": title, "region": s.Region, "view": "timeSeries", "stat": stat, "period": 300, "metrics": metrics}})
	}
	series := func(name string, kv ...string) []any {
		m := []any{metricsNamespace, name, "environment", s.Environment}
		for _, v := range kv {
			m = append(m, v)
		}
		return m
	}
	var ready, hits, timing [][]any
	for _, p := range s.Pools {
		ready = append(ready, append(series("ProvisionSeconds", "function", "provision", "pool", p), map[string]any{"stat": "p50", "label": p + " p50"}),
			append(series("ProvisionSeconds", "function", "provision", "pool", p), map[string]any{"stat": "p95", "label": p + " p95"}))
		hits = append(hits, append(series("PoolHits", "function", "provision", "pool", p), map[string]any{"label": p + " reused"}),
			append(series("PoolMisses", "function", "provision", "pool", p), map[string]any{"label": p + " launched"}),
			append(series("InstancesPrewarmed", "function", "refresh", "pool", p), map[string]any{"label": p + " pre-warmed"}),
			append(series("ClaimsRefused", "function", "provision", "pool", p), map[string]any{"label": p + " claims refused"}),
			append(series("OnDemandFallbacks", "function", "provision", "pool", p), map[string]any{"label": p + " on-demand fallbacks"}))
		for _, step := range []string{"ClaimSeconds", "ConfigSeconds", "ReadySeconds"} {
			timing = append(timing, append(series(step, "function", "provision", "pool", p), map[string]any{"label": p + " " + step}))
		}
	}
	add("Time to runners (provision, p50 and p95)", "p50", ready)
	add("Pool hits, misses and pre-warmed instances", "Sum", hits)
	add("Each instance's way to ready (p50: claimed or launched, configured, runner online)", "p50", timing)
	add("Release: time and outcome", "Sum", [][]any{
		append(series("ReleaseSeconds", "function", "release"), map[string]any{"stat": "p95", "label": "release p95 (s)"}),
		series("InstancesPooled", "function", "release"), series("InstancesExpiredAtRelease", "function", "release")})
	var terms [][]any
	for _, p := range s.Pools {
		for _, reason := range []string{"expired", "stale", "retired", "unrecorded", "interrupted"} {
			terms = append(terms, series("Terminations", "function", "refresh", "pool", p, "reason", reason))
		}
		for _, reason := range []string{"scale-down", "orphan"} {
			terms = append(terms, series("Terminations", "function", "scale-down", "pool", p, "reason", reason))
		}
	}
	add("Terminations by reason", "Sum", terms)
	var states [][]any
	for _, p := range s.Pools {
		for _, st := range []string{"created", "claimed", "running", "idle", "stopped"} {
			states = append(states, append(series("InstancesByState", "function", "refresh", "pool", p, "state", st), map[string]any{"label": p + " " + st}))
		}
	}
	add("Instances by state (as refresh counts them): running costs the instance, stopped its volume", "Average", states)
	// The usage ledger the cost report (ghrunner cost) reads: spans lost
	// are time the report undercounts.
	var ledger [][]any
	writers := []string{"provision", "release", "refresh", "scale-down"}
	if len(s.ScaleSetPools) > 0 {
		writers = append(writers, "listener") // its claims and releases
	}
	for _, fn := range writers {
		ledger = append(ledger, append(series("UsageSpansRecorded", "function", fn), map[string]any{"label": fn + " spans recorded"}),
			append(series("UsageSpansLost", "function", fn), map[string]any{"label": fn + " spans lost"}))
	}
	add("Usage ledger for the cost report: spans recorded and lost", "Sum", ledger)
	var errs [][]any
	for _, fn := range []string{"provision", "release", "refresh", "scale-down", "jit"} {
		errs = append(errs, series("Errors", "function", fn))
	}
	add("Errors by function", "Sum", errs)
	add("GitHub rate limit left", "Minimum", [][]any{series("GitHubRateRemaining", "function", "provision")})
	if len(s.ScaleSetPools) > 0 {
		sets := [][]any{append(series("ListenerPolls", "function", "listener"), map[string]any{"label": "polls answered"})}
		for _, p := range s.ScaleSetPools {
			sets = append(sets, append(series("JobQueuedToStartedSeconds", "function", "listener", "pool", p), map[string]any{"stat": "p95", "label": p + " queued to started p95 (s)"}),
				append(series("AssignedJobs", "function", "listener", "pool", p), map[string]any{"stat": "Maximum", "label": p + " assigned jobs"}),
				append(series("LiveRuns", "function", "listener", "pool", p), map[string]any{"stat": "Maximum", "label": p + " live runs"}))
		}
		add("Scale sets: the listener's polls, jobs' wait, assigned jobs and live runs", "Sum", sets)
	}
	body, _ := json.Marshal(map[string]any{"widgets": widgets})
	return string(body)
}
