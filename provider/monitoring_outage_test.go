package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/lambdart"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

// The likeliest outage: the GitHub App's key cannot be read (rotated or
// deleted, a wrong parameter) or a setting is invalid. Every provision and
// every refresh fails, and the alarms must say so. The bundle runs through
// the Lambda runtime API against moto, its EMF lines are read back as
// CloudWatch Logs extracts them, and the monitoring's alarms are evaluated
// on them as CloudWatch would (alarmFires), with Lambda's own Errors
// metric beside them: moto publishes no Lambda metric, so each invocation
// that ended in a function error adds the datapoint Lambda documents (1,
// dimension FunctionName; monitoring_lambda.go). A bundle that dies at
// init before its first line writes none of ghrunner's metrics: only
// Lambda's Errors alarms say so (issue 39, defect 1).
//
// Without the fix (the bundle returned before writing any metric when the
// credentials could not be read, and exited at init on an invalid setting)
// the test failed once as expected, in both cases:
//
//	alarms firing [], want [ci-provision-failures-linux ci-refresh-errors]
func TestTheAlarmsGoOffWhenTheGitHubKeyIsGoneOrASettingIsInvalid(t *testing.T) {
	bootstrap, err := testbin.Build(testbin.Module + "/lambdas")
	if err != nil {
		t.Fatal(err)
	}
	// A runtime that exits before it says anything: a bundle built for
	// another architecture, or one killed at init.
	dead := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(dead, []byte("#!/bin/sh\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ours := []string{"ci-provision-failures-linux", "ci-refresh-errors"}
	lambdas := []string{"ci-lambda-errors-provision", "ci-lambda-errors-refresh"}
	for _, c := range []struct {
		name      string
		fault     func(param string, fnEnv map[string]string)
		bootstrap string
		want      []string
	}{
		{"the key removed from SSM", func(param string, _ map[string]string) {
			if _, err := env.Config(t).SSM().DeleteParameter(context.Background(), &ssm.DeleteParameterInput{Name: aws.String(param)}); err != nil {
				t.Fatal(err)
			}
		}, bootstrap, ours},
		{"an invalid log level", func(_ string, fnEnv map[string]string) { fnEnv["GHRUNNER_LOG_LEVEL"] = "loud" }, bootstrap, ours},
		{"a runtime that exits at init without a line", func(string, map[string]string) {}, dead, lambdas},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := awstest.Name(t, "ghr")
			param := "/" + name + "/github"
			creds, _ := json.Marshal(map[string]any{"appId": 1, "privateKey": "-----BEGIN RSA PRIVATE KEY-----\n…"})
			if _, err := env.Config(t).SSM().PutParameter(context.Background(), &ssm.PutParameterInput{Name: aws.String(param), Type: ssmtypes.ParameterTypeSecureString, Value: aws.String(string(creds))}); err != nil {
				t.Fatal(err)
			}
			fnEnv := map[string]string{"GHRUNNER_TABLE": name, "GHRUNNER_ENVIRONMENT": name, "GHRUNNER_GITHUB_PARAMETER": param,
				"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": awstest.Region, "AWS_ENDPOINT_URL": env.URL}
			c.fault(param, fnEnv)
			logs := &testbin.Buffer{}
			// Refresh runs every minute: each of three 10-minute periods
			// holds failed runs, and a provision fails in the last.
			var periods [][]metrics.Point
			seen := 0
			for i := range 3 {
				calls := []string{bundle.HandlerRefresh}
				if i == 2 {
					calls = append(calls, bundle.HandlerProvision)
				}
				var failed []metrics.Point
				for _, h := range calls {
					if res := invokeOnce(t, c.bootstrap, h, fnEnv, logs); res.FunctionError == "" {
						t.Fatalf("%s succeeded: %s", h, res.Payload)
					}
					failed = append(failed, metrics.Point{Name: "Errors", Dimensions: map[string]string{"FunctionName": "ci-" + h}, Values: []float64{1}})
				}
				points, err := metrics.Read(strings.NewReader(logs.String()))
				if err != nil {
					t.Fatal(err)
				}
				periods, seen = append(periods, append(points[seen:], failed...)), len(points)
			}
			spec := monitoringSpec{Name: "ci", Environment: name, Region: awstest.Region, Pools: []string{"linux"}, MissRatio: 0.5, RateLimitLow: 500,
				Functions: map[string]string{bundle.HandlerProvision: "ci-provision", bundle.HandlerRefresh: "ci-refresh"}}
			var firing []string
			for _, a := range spec.alarms() {
				if alarmFires(a, periods) {
					firing = append(firing, aws.ToString(a.AlarmName))
				}
			}
			if !slices.Equal(firing, c.want) {
				t.Errorf("alarms firing %q, want %q\nlogs:\n%s", firing, c.want, logs.String())
			}
		})
	}
}

// invokeOnce runs one invocation of handler in a fresh execution
// environment.
func invokeOnce(t *testing.T, bootstrap, handler string, fnEnv map[string]string, logs *testbin.Buffer) lambdart.Result {
	t.Helper()
	e := maps.Clone(fnEnv)
	e["GHRUNNER_HANDLER"] = handler
	host, err := lambdart.New(lambdart.Function{Name: "ci-" + handler, Bootstrap: bootstrap, Env: e, Timeout: 30 * time.Second, Region: awstest.Region, Output: logs})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	payload := []byte(`{}`)
	if handler == bundle.HandlerProvision {
		payload = []byte(`{"runId":"1","pool":"linux","idToken":"a.b.c"}`)
	}
	res, err := host.Invoke(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// alarmFires evaluates an alarm as CloudWatch does on periods, the points
// of consecutive periods (the last is the newest): each period's
// datapoint is the alarm's statistic over the values of the metric with
// exactly the alarm's dimensions (for a metric math alarm, its expression
// over its metrics' datapoints: periodValue); a period without one is
// missing, which breaches as the alarm's TreatMissingData says
// (notBreaching or breaching). It fires when DatapointsToAlarm of the last
// EvaluationPeriods breach. Points carry no namespace: ghrunner's all have
// the environment dimension, Lambda's (AWS/Lambda) FunctionName alone.
func alarmFires(a alarm, periods [][]metrics.Point) bool {
	missing := aws.ToString(a.TreatMissingData)
	if missing != "notBreaching" && missing != "breaching" {
		return false
	}
	n := int(aws.ToInt32(a.EvaluationPeriods))
	need := int(aws.ToInt32(a.DatapointsToAlarm))
	if need == 0 {
		need = n
	}
	breaching := 0
	for _, points := range periods[max(0, len(periods)-n):] {
		v, ok, known := periodValue(a, points)
		if !known {
			return false
		}
		if !ok {
			breaching += b2i(missing == "breaching")
			continue
		}
		th := aws.ToFloat64(a.Threshold)
		switch a.ComparisonOperator {
		case cwtypes.ComparisonOperatorGreaterThanThreshold:
			breaching += b2i(v > th)
		case cwtypes.ComparisonOperatorLessThanThreshold:
			breaching += b2i(v < th)
		}
	}
	return breaching >= need
}

// periodValue is an alarm's datapoint in one period's points (ok false:
// none); known false for an alarm this evaluator cannot read: a statistic
// other than Sum, Minimum, Maximum, or an expression other than
// uncountedExpression's form "<id> - FILL(<id>, 0)".
func periodValue(a alarm, points []metrics.Point) (v float64, ok, known bool) {
	if len(a.Metrics) == 0 {
		ns := aws.ToString(a.Namespace)
		if a.MetricName == nil || ns != metricsNamespace && ns != lambdaNamespace {
			return 0, false, false
		}
		return statValue(aws.ToString(a.MetricName), a.Dimensions, string(a.Statistic), points)
	}
	vals, have := map[string]float64{}, map[string]bool{}
	var expr string
	for _, q := range a.Metrics {
		if q.Expression != nil {
			expr = aws.ToString(q.Expression)
			continue
		}
		m := q.MetricStat
		v, ok, known := statValue(aws.ToString(m.Metric.MetricName), m.Metric.Dimensions, aws.ToString(m.Stat), points)
		if !known {
			return 0, false, false
		}
		vals[aws.ToString(q.Id)], have[aws.ToString(q.Id)] = v, ok
	}
	var x, y string
	if _, err := fmt.Sscanf(expr, "%s - FILL(%s 0)", &x, &y); err != nil || !strings.HasSuffix(y, ",") {
		return 0, false, false
	}
	y = strings.TrimSuffix(y, ",")
	if !have[x] {
		return 0, false, true
	}
	return vals[x] - vals[y], true, true
}

// statValue is stat over the values of the points named name with exactly
// dims.
func statValue(name string, dims []cwtypes.Dimension, stat string, points []metrics.Point) (v float64, ok, known bool) {
	want := map[string]string{}
	for _, d := range dims {
		want[aws.ToString(d.Name)] = aws.ToString(d.Value)
	}
	var values []float64
	for _, p := range points {
		if p.Name == name && maps.Equal(p.Dimensions, want) {
			values = append(values, p.Values...)
		}
	}
	if len(values) == 0 {
		return 0, false, true
	}
	switch cwtypes.Statistic(stat) {
	case cwtypes.StatisticSum:
		for _, x := range values {
			v += x
		}
	case cwtypes.StatisticMinimum:
		v = slices.Min(values)
	case cwtypes.StatisticMaximum:
		v = slices.Max(values)
	default:
		return 0, false, false
	}
	return v, true, true
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
