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
// function name), in bundle.Handlers order. Each alarms on the function
// errors Lambda counted and ghrunner's own metrics did not (the invocation
// died before it wrote them): Lambda's Errors less the function's own
// Errors, a metric math expression. A failure the function wrote down (a
// GitHub outage, a bad payload) is the business of the alarms on its own
// metrics: a workflow that sends a bad payload, or a repository allowed to
// invoke that sends many, must not page anyone. Refresh and scale-down
// run on a schedule: like their own errors alarms, theirs fires when every
// one of three 10-minute periods has such an invocation. Any of the others
// (provision, release, jit) fires theirs within 5 minutes.
//
// Both counts are summed per period. When Lambda stamps its datapoint is
// not documented; ghrunner stamps its own as the invocation ends, which is
// when Lambda knows a function error: an invocation that ends across a
// period boundary from where Lambda counted it could show once as
// uncounted (a single 5-minute alarm of provision, release or jit).
func (s monitoringSpec) lambdaErrorsAlarms(base func(name, desc string) alarm) []alarm {
	var out []alarm
	for _, handler := range bundle.Handlers {
		fn, ok := s.Functions[handler]
		if !ok {
			continue
		}
		a := base(lambdaErrorsAlarmPrefix[1:]+handler, lambdaErrorsDescription(handler, fn))
		period := int32(300)
		if scheduledHandler(handler) {
			period, a.EvaluationPeriods, a.DatapointsToAlarm = 600, aws.Int32(3), aws.Int32(3)
		}
		stat := func(id, namespace string, dims []cwtypes.Dimension) cwtypes.MetricDataQuery {
			return cwtypes.MetricDataQuery{Id: aws.String(id), ReturnData: aws.Bool(false), MetricStat: &cwtypes.MetricStat{
				Metric: &cwtypes.Metric{Namespace: aws.String(namespace), MetricName: aws.String("Errors"), Dimensions: dims},
				Period: aws.Int32(period), Stat: aws.String(string(cwtypes.StatisticSum))}}
		}
		a.Metrics = []cwtypes.MetricDataQuery{
			stat("lambda", lambdaNamespace, []cwtypes.Dimension{{Name: aws.String("FunctionName"), Value: aws.String(fn)}}),
			stat("counted", metricsNamespace, s.dims("function", handler)),
			{Id: aws.String("uncounted"), Expression: aws.String(uncountedExpression), Label: aws.String("function errors ghrunner's metrics did not count"), ReturnData: aws.Bool(true)},
		}
		a.Threshold, a.ComparisonOperator = aws.Float64(0), cwtypes.ComparisonOperatorGreaterThanThreshold
		out = append(out, a)
	}
	return out
}

// uncountedExpression is Lambda's count less ghrunner's; a period in which
// the function wrote no Errors (it died first every time) counts as 0, one
// in which Lambda counted none has no datapoint (not breaching).
const uncountedExpression = "lambda - FILL(counted, 0)"

func scheduledHandler(h string) bool {
	return slices.Contains([]string{bundle.HandlerRefresh, bundle.HandlerScaleDown}, h)
}

func lambdaErrorsDescription(handler, fn string) string {
	when := "An invocation of %s (%s) ended in a function error that ghrunner's own metrics did not count (Lambda's Errors less ghrunner's, above 0 in 5 minutes)"
	if scheduledHandler(handler) {
		when = "Invocations of %s (%s) ended in function errors that ghrunner's own metrics did not count, in three 10-minute periods in a row (Lambda's Errors less ghrunner's)"
	}
	return fmt.Sprintf(when, fn, handler) + ": the invocation died before it wrote its outcome (an init that exits, a timeout, out of memory). See the function's log."
}
