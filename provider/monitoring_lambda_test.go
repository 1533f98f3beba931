package provider

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

// Issue 39, defect 1: each function named has an alarm on Lambda's own
// Errors metric (AWS/Lambda, by FunctionName, the Sum of failed
// invocations above 0), quiet while the function is not invoked; the
// scheduled ones after three failing 10-minute periods, the others after
// one of 5 minutes. A deployment that names no function has none.
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
		t.Fatalf("Lambda errors alarms for %v, want one per handler %v", slices.Sorted(func(yield func(string) bool) {
			for h := range got {
				if !yield(h) {
					return
				}
			}
		}), bundle.Handlers)
	}
	for h, a := range got {
		scheduled := h == bundle.HandlerRefresh || h == bundle.HandlerScaleDown
		period, periods := int32(300), int32(1)
		if scheduled {
			period, periods = 600, 3
		}
		switch {
		case aws.ToString(a.Namespace) != "AWS/Lambda" || aws.ToString(a.MetricName) != "Errors":
			t.Errorf("%s: metric %s %s, want AWS/Lambda Errors", h, aws.ToString(a.Namespace), aws.ToString(a.MetricName))
		case len(a.Dimensions) != 1 || aws.ToString(a.Dimensions[0].Name) != "FunctionName" || aws.ToString(a.Dimensions[0].Value) != "ci-"+h:
			t.Errorf("%s: dimensions %v, want FunctionName=ci-%s alone", h, a.Dimensions, h)
		case a.Statistic != cwtypes.StatisticSum || aws.ToFloat64(a.Threshold) != 0 || a.ComparisonOperator != cwtypes.ComparisonOperatorGreaterThanThreshold:
			t.Errorf("%s: %s %s %v, want Sum > 0", h, a.Statistic, a.ComparisonOperator, aws.ToFloat64(a.Threshold))
		case aws.ToString(a.TreatMissingData) != "notBreaching":
			t.Errorf("%s: missing data %s, want notBreaching (a function not invoked has not failed)", h, aws.ToString(a.TreatMissingData))
		case aws.ToInt32(a.Period) != period || aws.ToInt32(a.EvaluationPeriods) != periods || max(aws.ToInt32(a.DatapointsToAlarm), periods) != periods:
			t.Errorf("%s: %d periods of %d s (%d to alarm), want %d of %d s", h, aws.ToInt32(a.EvaluationPeriods), aws.ToInt32(a.Period), aws.ToInt32(a.DatapointsToAlarm), periods, period)
		}
	}
	spec.Functions = nil
	for _, n := range spec.alarmNames() {
		if strings.Contains(n, "lambda-errors") {
			t.Errorf("without functions: alarm %s", n)
		}
	}
}
