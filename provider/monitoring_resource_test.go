package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

func monitoringConfig(name, pools, extra string) string {
	return providerConfig() + fmt.Sprintf(`
resource "ghrunner_monitoring" "ci" {
  name  = %q
  pools = %s
%s
}
`, name, pools, extra)
}

// alarmsOf reads the alarms of the dashboard name from CloudWatch.
func alarmsOf(name string) (map[string]float64, map[string][]string, error) {
	out, err := admin.CloudWatch(env.Config(&testing.T{})).DescribeAlarms(context.Background(), &cloudwatch.DescribeAlarmsInput{AlarmNamePrefix: aws.String(name + "-")})
	if err != nil {
		return nil, nil, err
	}
	thresholds, actions := map[string]float64{}, map[string][]string{}
	for _, a := range out.MetricAlarms {
		thresholds[aws.ToString(a.AlarmName)] = aws.ToFloat64(a.Threshold)
		actions[aws.ToString(a.AlarmName)] = a.AlarmActions
	}
	return thresholds, actions, nil
}

func checkMonitoring(name string, pools []string, topic string, missRatio float64, scaleSets []string, functions map[string]string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		dash, err := admin.CloudWatch(env.Config(&testing.T{})).GetDashboard(context.Background(), &cloudwatch.GetDashboardInput{DashboardName: aws.String(name)})
		if err != nil {
			return fmt.Errorf("dashboard: %w", err)
		}
		var body struct {
			Widgets []struct{ Properties map[string]any }
		}
		if err := json.Unmarshal([]byte(aws.ToString(dash.DashboardBody)), &body); err != nil || len(body.Widgets) < 6 {
			return fmt.Errorf("dashboard body: %v, %d widgets", err, len(body.Widgets))
		}
		if b := aws.ToString(dash.DashboardBody); !strings.Contains(b, `"environment","acc"`) || !strings.Contains(b, `"pool","`+pools[0]+`"`) {
			return fmt.Errorf("dashboard does not chart environment acc's pool %s: %s", pools[0], b)
		}
		thresholds, actions, err := alarmsOf(name)
		if err != nil {
			return err
		}
		want := 4*len(pools) + 4 + len(functions)
		if err := checkLambdaErrorsAlarms(name, functions); err != nil {
			return err
		}
		for _, p := range scaleSets {
			want++
			if got, ok := thresholds[name+"-listener-polls-"+p]; !ok || got != 1 {
				return fmt.Errorf("pool %s's listener alarm: threshold %v (made: %v), want 1", p, got, ok)
			}
		}
		if len(thresholds) != want {
			return fmt.Errorf("%d alarms, want %d: %v", len(thresholds), want, thresholds)
		}
		for _, p := range pools {
			for _, kind := range []string{"provision-failures", "stuck-runs", "runner-version"} {
				if _, ok := thresholds[name+"-"+kind+"-"+p]; !ok {
					return fmt.Errorf("no %s alarm for pool %s: %v", kind, p, thresholds)
				}
			}
			if got := thresholds[name+"-pool-misses-"+p]; got != missRatio {
				return fmt.Errorf("pool-miss alarm of %s: threshold %v, want %v", p, got, missRatio)
			}
		}
		if got := actions[name+"-repairs"]; topic != "" && (len(got) != 1 || got[0] != topic) || topic == "" && len(got) != 0 {
			return fmt.Errorf("repairs alarm actions %v, want topic %q", got, topic)
		}
		return nil
	}
}

// checkLambdaErrorsAlarms: each function has its alarm on the errors
// Lambda counted and ghrunner did not, as CloudWatch holds it: Lambda's
// Errors by FunctionName, ghrunner's by function, their difference.
func checkLambdaErrorsAlarms(name string, functions map[string]string) error {
	out, err := admin.CloudWatch(env.Config(&testing.T{})).DescribeAlarms(context.Background(), &cloudwatch.DescribeAlarmsInput{AlarmNamePrefix: aws.String(name + "-lambda-errors-")})
	if err != nil {
		return err
	}
	got := map[string]string{}
	for _, a := range out.MetricAlarms {
		handler := strings.TrimPrefix(aws.ToString(a.AlarmName), name+"-lambda-errors-")
		var fn, expr string
		for _, q := range a.Metrics {
			if q.Expression != nil {
				expr = aws.ToString(q.Expression)
			}
			if m := q.MetricStat; m != nil && m.Metric != nil && aws.ToString(m.Metric.Namespace) == "AWS/Lambda" && aws.ToString(m.Metric.MetricName) == "Errors" &&
				len(m.Metric.Dimensions) == 1 && aws.ToString(m.Metric.Dimensions[0].Name) == "FunctionName" {
				fn = aws.ToString(m.Metric.Dimensions[0].Value)
			}
		}
		if fn == "" || expr != uncountedExpression || aws.ToString(a.TreatMissingData) != "notBreaching" {
			return fmt.Errorf("alarm %s: %d queries (Lambda's of %q, expression %q), missing data %s; want Lambda's Errors by FunctionName less ghrunner's, notBreaching",
				aws.ToString(a.AlarmName), len(a.Metrics), fn, expr, aws.ToString(a.TreatMissingData))
		}
		got[handler] = fn
	}
	if !maps.Equal(got, functions) && len(got)+len(functions) > 0 {
		return fmt.Errorf("Lambda errors alarms for %v, want %v", got, functions)
	}
	return nil
}

func TestAccMonitoring_basic_update_import(t *testing.T) {
	name := awstest.Name(t, "ghr")
	topic := "arn:aws:sns:us-east-1:123456789012:ci-pages"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: monitoringConfig(name, `["linux", "gpu"]`, ""),
				Check: resource.ComposeAggregateTestCheckFunc(checkMonitoring(name, []string{"linux", "gpu"}, "", 0.5, nil, nil),
					resource.TestCheckResourceAttr("ghrunner_monitoring.ci", "alarm_names.#", "12"),
					resource.TestCheckResourceAttr("ghrunner_monitoring.ci", "github_rate_limit_threshold", "500")),
			},
			// A pool less, a topic, a threshold, a listener and two
			// functions: the pool's alarms go, the listener's and the
			// functions' come.
			{
				Config: monitoringConfig(name, `["linux"]`, fmt.Sprintf("  alarm_topic_arn = %q\n  pool_miss_ratio_threshold = 0.25\n  scale_set_pools = [\"linux\"]\n"+
					"  functions = { provision = \"ci-provision\", refresh = \"ci-refresh\" }", topic)),
				Check: resource.ComposeAggregateTestCheckFunc(checkMonitoring(name, []string{"linux"}, topic, 0.25, []string{"linux"}, map[string]string{"provision": "ci-provision", "refresh": "ci-refresh"}),
					resource.TestCheckResourceAttr("ghrunner_monitoring.ci", "alarm_names.#", "11")),
			},
			{ResourceName: "ghrunner_monitoring.ci", ImportState: true, ImportStateId: name, ImportStateVerify: true},
		},
	})
}

func TestAccMonitoring_disappears(t *testing.T) {
	name := awstest.Name(t, "ghr")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{{
			Config: monitoringConfig(name, `["linux"]`, ""),
			Check: func(*terraform.State) error {
				// One alarm deleted outside Terraform: the next plan makes
				// them all again.
				_, err := admin.CloudWatch(env.Config(&testing.T{})).DeleteAlarms(context.Background(), &cloudwatch.DeleteAlarmsInput{AlarmNames: []string{name + "-repairs"}})
				return err
			},
			ExpectNonEmptyPlan: true,
		}},
	})
}

func TestAccMonitoring_badInput(t *testing.T) {
	for _, c := range []struct{ pools, extra, want string }{
		{`[]`, "", "pools"},
		{`["Linux Pool"]`, "", "must be a pool name"},
		{`["linux"]`, `  alarm_topic_arn = "ci-pages"`, "must be the ARN of an SNS topic"},
		{`["linux"]`, `  pool_miss_ratio_threshold = 2`, "pool_miss_ratio_threshold"},
		{`["linux"]`, `  functions = { listener = "ci-listener" }`, `functions(.|\n)*value must be one of`},
		{`["linux"]`, `  functions = { provision = "arn:aws:lambda:x" }`, "must be a function name"},
	} {
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: factories,
			Steps:                    []resource.TestStep{{Config: monitoringConfig("ghr-bad", c.pools, c.extra), PlanOnly: true, ExpectError: regexp.MustCompile(c.want)}},
		})
	}
}
