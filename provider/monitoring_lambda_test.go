package provider

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
)

// Issue 39, defect 1: each function named has an alarm on the function
// errors Lambda counted (AWS/Lambda Errors, by FunctionName) and ghrunner's
// own metrics did not (its Errors of the function), a metric math
// expression above 0, quiet while the function is not invoked; the
// scheduled ones after three such 10-minute periods, the others after one
// of 5 minutes. A deployment that names no function has none.
func TestEachFunctionNamedHasAnAlarmOnLambdasOwnErrors(t *testing.T) {
	functions := map[string]string{}
	for _, h := range bundle.Handlers {
		functions[h] = "ci-" + h
	}
	spec := monitoringSpec{Name: "ci", Environment: "ci", Pools: []string{"linux"}, MissRatio: 0.5, RateLimitLow: 500, Functions: functions}
	got := map[string]alarm{}
	for _, a := range spec.alarms() {
		if h, ok := strings.CutPrefix(aws.ToString(a.AlarmName), "ci-lambda-errors-"); ok {
			got[h] = a
		}
	}
	if len(got) != len(bundle.Handlers) {
		t.Fatalf("Lambda errors alarms for %d handlers, want one per handler %v", len(got), bundle.Handlers)
	}
	for h, a := range got {
		scheduled := h == bundle.HandlerRefresh || h == bundle.HandlerScaleDown
		period, periods := int32(300), int32(1)
		if scheduled {
			period, periods = 600, 3
		}
		if len(a.Metrics) != 3 || a.MetricName != nil || a.Namespace != nil {
			t.Errorf("%s: %d queries (metric %v), want a metric math alarm of Lambda's and ghrunner's Errors", h, len(a.Metrics), aws.ToString(a.MetricName))
			continue
		}
		lambdaQ, counted, expr := a.Metrics[0].MetricStat, a.Metrics[1].MetricStat, a.Metrics[2]
		switch {
		case aws.ToString(lambdaQ.Metric.Namespace) != "AWS/Lambda" || aws.ToString(lambdaQ.Metric.MetricName) != "Errors" ||
			len(lambdaQ.Metric.Dimensions) != 1 || aws.ToString(lambdaQ.Metric.Dimensions[0].Value) != "ci-"+h:
			t.Errorf("%s: first query %+v, want AWS/Lambda Errors of FunctionName=ci-%s", h, lambdaQ.Metric, h)
		case aws.ToString(counted.Metric.Namespace) != metricsNamespace || aws.ToString(counted.Metric.MetricName) != "Errors":
			t.Errorf("%s: second query %+v, want ghrunner's Errors", h, counted.Metric)
		case aws.ToString(expr.Expression) != "lambda - FILL(counted, 0)" || !aws.ToBool(expr.ReturnData) || aws.ToBool(a.Metrics[0].ReturnData):
			t.Errorf("%s: expression %q", h, aws.ToString(expr.Expression))
		case aws.ToFloat64(a.Threshold) != 0 || a.ComparisonOperator != cwtypes.ComparisonOperatorGreaterThanThreshold:
			t.Errorf("%s: %s %v, want > 0", h, a.ComparisonOperator, aws.ToFloat64(a.Threshold))
		case aws.ToString(a.TreatMissingData) != "notBreaching":
			t.Errorf("%s: missing data %s, want notBreaching (a function not invoked has not failed)", h, aws.ToString(a.TreatMissingData))
		case aws.ToInt32(lambdaQ.Period) != period || aws.ToInt32(counted.Period) != period || aws.ToInt32(a.EvaluationPeriods) != periods || max(aws.ToInt32(a.DatapointsToAlarm), periods) != periods:
			t.Errorf("%s: %d periods of %d s (%d to alarm), want %d of %d s", h, aws.ToInt32(a.EvaluationPeriods), aws.ToInt32(lambdaQ.Period), aws.ToInt32(a.DatapointsToAlarm), periods, period)
		}
	}
	spec.Functions = nil
	for _, n := range spec.alarmNames() {
		if strings.Contains(n, "lambda-errors") {
			t.Errorf("without functions: alarm %s", n)
		}
	}
}

// A failure the function wrote down pages no one through the Lambda
// alarm: a bad payload (any workflow's typo, or many from a repository
// allowed to invoke) is a function error Lambda counts, and so does
// ghrunner. Only an invocation that died before writing its outcome fires
// it. Checked: with the alarm on Lambda's Errors alone, the bad payloads
// fire it and this fails.
func TestOnlyAFunctionErrorGhrunnerDidNotCountFiresTheLambdaAlarm(t *testing.T) {
	spec := monitoringSpec{Name: "ci", Environment: "ci", Pools: []string{"linux"}, MissRatio: 0.5, RateLimitLow: 500,
		Functions: map[string]string{bundle.HandlerProvision: "ci-provision"}}
	var a alarm
	for _, x := range spec.alarms() {
		if aws.ToString(x.AlarmName) == "ci-lambda-errors-provision" {
			a = x
		}
	}
	lambdaErr := func(n float64) metrics.Point {
		return metrics.Point{Name: "Errors", Dimensions: map[string]string{"FunctionName": "ci-provision"}, Values: []float64{n}}
	}
	ours := func(n float64) metrics.Point {
		return metrics.Point{Name: "Errors", Dimensions: map[string]string{"environment": "ci", "function": "provision"}, Values: []float64{n}}
	}
	for _, c := range []struct {
		name   string
		points []metrics.Point
		fires  bool
	}{
		{"fifty bad payloads, each written down", []metrics.Point{lambdaErr(50), ours(50)}, false},
		{"no invocation", nil, false},
		{"invocations that succeeded", []metrics.Point{ours(0)}, false},
		{"one invocation that died before its metrics", []metrics.Point{lambdaErr(1)}, true},
		{"bad payloads and one that timed out", []metrics.Point{lambdaErr(4), ours(3)}, true},
	} {
		if got := alarmFires(a, [][]metrics.Point{c.points}); got != c.fires {
			t.Errorf("%s: fires %v, want %v", c.name, got, c.fires)
		}
	}
}
