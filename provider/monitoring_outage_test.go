package provider

import (
	"context"
	"encoding/json"
	"maps"
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
// on them as CloudWatch would (alarmFires).
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
	for _, c := range []struct {
		name  string
		fault func(param string, fnEnv map[string]string)
	}{
		{"the key removed from SSM", func(param string, _ map[string]string) {
			if _, err := env.Config(t).SSM().DeleteParameter(context.Background(), &ssm.DeleteParameterInput{Name: aws.String(param)}); err != nil {
				t.Fatal(err)
			}
		}},
		{"an invalid log level", func(_ string, fnEnv map[string]string) { fnEnv["GHRUNNER_LOG_LEVEL"] = "loud" }},
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
				for _, h := range calls {
					if res := invokeOnce(t, bootstrap, h, fnEnv, logs); res.FunctionError == "" {
						t.Fatalf("%s succeeded: %s", h, res.Payload)
					}
				}
				points, err := metrics.Read(strings.NewReader(logs.String()))
				if err != nil {
					t.Fatal(err)
				}
				periods, seen = append(periods, points[seen:]), len(points)
			}
			spec := monitoringSpec{Name: "ci", Environment: name, Region: awstest.Region, Pools: []string{"linux"}, MissRatio: 0.5, RateLimitLow: 500}
			var firing []string
			for _, a := range spec.alarms() {
				if alarmFires(a, periods) {
					firing = append(firing, aws.ToString(a.AlarmName))
				}
			}
			if want := []string{"ci-provision-failures-linux", "ci-refresh-errors"}; !slices.Equal(firing, want) {
				t.Errorf("alarms firing %q, want %q\nlogs:\n%s", firing, want, logs.String())
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

// alarmFires evaluates a single-metric alarm as CloudWatch does on
// periods, the points of consecutive periods (the last is the newest):
// each period's datapoint is the alarm's statistic over the values of the
// metric with exactly the alarm's dimensions; a period without one is
// missing, which breaches as the alarm's TreatMissingData says
// (notBreaching or breaching). It fires when DatapointsToAlarm of the last
// EvaluationPeriods breach. Alarms on a metric math expression are not
// evaluated (false).
func alarmFires(a alarm, periods [][]metrics.Point) bool {
	missing := aws.ToString(a.TreatMissingData)
	if a.MetricName == nil || aws.ToString(a.Namespace) != metricsNamespace || missing != "notBreaching" && missing != "breaching" {
		return false
	}
	want := map[string]string{}
	for _, d := range a.Dimensions {
		want[aws.ToString(d.Name)] = aws.ToString(d.Value)
	}
	n := int(aws.ToInt32(a.EvaluationPeriods))
	need := int(aws.ToInt32(a.DatapointsToAlarm))
	if need == 0 {
		need = n
	}
	breaching := 0
	for _, points := range periods[max(0, len(periods)-n):] {
		var values []float64
		for _, p := range points {
			if p.Name == aws.ToString(a.MetricName) && maps.Equal(p.Dimensions, want) {
				values = append(values, p.Values...)
			}
		}
		if len(values) == 0 {
			breaching += b2i(missing == "breaching")
			continue
		}
		var v float64
		switch a.Statistic {
		case cwtypes.StatisticSum:
			for _, x := range values {
				v += x
			}
		case cwtypes.StatisticMinimum:
			v = slices.Min(values)
		case cwtypes.StatisticMaximum:
			v = slices.Max(values)
		default:
			return false
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

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
