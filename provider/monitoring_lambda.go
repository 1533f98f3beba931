package provider

import (
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

// The alarms on Lambda's own Errors metric, one per function. ghrunner's
// metrics are written by the function itself, so an invocation that dies
// before its first line (a runtime that exits at init, a timeout, running
// out of memory) leaves nothing in them; Lambda counts it anyway. AWS
// documents the metric (Lambda Developer Guide, "Types of metrics for
// Lambda functions"): namespace AWS/Lambda, dimension FunctionName, "the
// number of invocations that result in a function error", including
// "exceptions that the Lambda runtime throws" such as timeouts, with the
// value 1 for each such invocation (so Sum counts them). A function not
// invoked in a period has no datapoint, which is not an error.

// lambdaNamespace is the namespace of Lambda's own metrics.
const lambdaNamespace = "AWS/Lambda"

// lambdaErrorsAlarmPrefix starts the name of a function's Errors alarm,
// after the monitoring's name; the handler ends it.
const lambdaErrorsAlarmPrefix = "-lambda-errors-"

// lambdaErrorsAlarms are the Errors alarms of s.Functions (handler →
// function name), in bundle.Handlers order. Refresh and scale-down run on
// a schedule, and a GitHub outage fails them for as long as it lasts:
// like their own errors alarms, theirs fires when every one of three
// 10-minute periods has a failed invocation. Any failed invocation of the
// others (provision, release, jit) fires theirs within 5 minutes.
func (s monitoringSpec) lambdaErrorsAlarms(base func(name, desc string) alarm) []alarm {
	var out []alarm
	for _, handler := range bundle.Handlers {
		fn, ok := s.Functions[handler]
		if !ok {
			continue
		}
		a := base(lambdaErrorsAlarmPrefix[1:]+handler, lambdaErrorsDescription(handler, fn))
		a.Namespace, a.MetricName = aws.String(lambdaNamespace), aws.String("Errors")
		a.Dimensions = []cwtypes.Dimension{{Name: aws.String("FunctionName"), Value: aws.String(fn)}}
		a.Statistic, a.Threshold, a.ComparisonOperator = cwtypes.StatisticSum, aws.Float64(0), cwtypes.ComparisonOperatorGreaterThanThreshold
		a.Period = aws.Int32(300)
		if scheduledHandler(handler) {
			a.Period, a.EvaluationPeriods, a.DatapointsToAlarm = aws.Int32(600), aws.Int32(3), aws.Int32(3)
		}
		out = append(out, a)
	}
	return out
}

func scheduledHandler(h string) bool {
	return slices.Contains([]string{bundle.HandlerRefresh, bundle.HandlerScaleDown}, h)
}

func lambdaErrorsDescription(handler, fn string) string {
	when := "An invocation of %s (%s) ended in a function error (Lambda's Errors > 0 in 5 minutes)"
	if scheduledHandler(handler) {
		when = "Invocations of %s (%s) ended in a function error in three 10-minute periods in a row (Lambda's Errors)"
	}
	d := fmt.Sprintf(when, fn, handler) + ", counted by Lambda: also one that died before writing ghrunner's metrics (an init that exits, a timeout, out of memory). See the function's log."
	if handler == bundle.HandlerProvision || handler == bundle.HandlerRelease {
		d += " A payload the function refused (bad input, a run of another workflow run) is a function error too."
	}
	return d
}
