// The module, applied and destroyed for real: the provider as `make install`
// builds it, found by terraform through the filesystem mirror, against moto.
package runnerpool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

var env *awstest.Moto

func TestMain(m *testing.M) {
	if _, err := exec.LookPath("terraform"); err != nil {
		fmt.Fprintln(os.Stderr, "terraform not found on PATH: install it, or build one with `go install github.com/hashicorp/terraform@v1.5.7`")
		os.Exit(1)
	}
	mirror, err := os.MkdirTemp("", "ghrunner-mirror")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mirrorDir = mirror
	code := awstest.Main(m, &env)
	os.RemoveAll(mirror)
	os.Exit(code)
}

var (
	mirrorDir   string
	installOnce sync.Once
	installErr  error
)

// tf runs terraform in dir with the mirror's CLI config and returns its output.
func tf(t *testing.T, dir, cliConfig string, args ...string) string {
	t.Helper()
	cmd := exec.Command("terraform", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "TF_PLUGIN_CACHE_DIR=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// install runs `make install` into a temporary mirror, exactly as a user
// would, once per test binary.
func install(t *testing.T) string {
	t.Helper()
	installOnce.Do(func() {
		out, err := exec.Command("make", "-C", "../..", "install", "MIRROR="+mirrorDir).CombinedOutput()
		if err != nil {
			installErr = fmt.Errorf("make install: %v\n%s", err, out)
		}
	})
	if installErr != nil {
		t.Fatal(installErr)
	}
	return filepath.Join(mirrorDir, "terraformrc")
}

const root = `
terraform {
  required_providers {
    ghrunner = { source = "ghrunner/ghrunner" }
  }
}

provider "ghrunner" {
  region      = "us-east-1"
  environment = "modtest"
  endpoints {
    cloudwatch = %[1]q
    dynamodb  = %[1]q
    ec2       = %[1]q
    iam       = %[1]q
    lambda    = %[1]q
    logs      = %[1]q
    s3        = %[1]q
    scheduler = %[1]q
    sns       = %[1]q
    sqs       = %[1]q
    ssm       = %[1]q
    sts       = %[1]q
  }
}

module "runners" {
  source           = %[2]q
  prefix           = "ci"
  github_parameter = "/ghrunner/modtest/github"
  architecture     = "amd64"

  invoker_repositories = ["acme/app", "acme/api"]
  create_oidc_provider = true
  monitoring           = { alarm_emails = ["oncall@example.com"] }
  pools = {
    linux = {
      owner          = "acme"
      image_id       = %[3]q
      instance_types = ["c7i.large", "m7i.large"]
      subnet_ids     = [%[4]q]
      idle_windows   = [{ cron = "* 8-18 * * 1-5", time_zone = "Europe/Berlin", idle_count = 2 }]
    }
    linux-large = {
      owner          = "acme/api"
      image_id       = %[3]q
      instance_types = ["c7i.4xlarge"]
      subnet_ids     = [%[4]q]
      usage_class    = "on-demand"
      timings        = { max_uses = 10 }
    }
  }
}

output "runners" {
  value = module.runners
}
`

func TestModuleApplyDestroy(t *testing.T) {
	cliConfig := install(t)
	moduleDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	n := env.Network(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(fmt.Sprintf(root, env.URL, moduleDir, n.AMI, n.Subnet)), 0o644); err != nil {
		t.Fatal(err)
	}

	tf(t, moduleDir, cliConfig, "fmt", "-check", "-recursive")
	tf(t, dir, cliConfig, "init", "-input=false", "-no-color")
	tf(t, dir, cliConfig, "validate", "-no-color")
	start := time.Now()
	plan := tf(t, dir, cliConfig, "plan", "-input=false", "-no-color", "-out=tfplan")
	t.Logf("terraform plan of the module (2 pools, nothing deployed yet): %.1fs", time.Since(start).Seconds())
	if !strings.Contains(plan, "Plan: 15 to add") {
		t.Errorf("plan does not add the 15 objects (table, 2 queues, 2 pools, 5 functions, 2 schedules, the invoker role, the alarm topic, the monitoring):\n%s", lastLines(plan, 5))
	}
	tf(t, dir, cliConfig, "apply", "-input=false", "-no-color", "tfplan")

	var out struct {
		Runners struct {
			Value struct {
				FunctionNames map[string]string `json:"function_names"`
				TableName     string            `json:"table_name"`
				QueueURLs     map[string]string `json:"queue_urls"`
				ScheduleNames map[string]string `json:"schedule_names"`
				InvokerRole   string            `json:"invoker_role_arn"`
				Dashboard     string            `json:"dashboard_name"`
				Alarms        []string          `json:"alarm_names"`
				AlarmTopic    string            `json:"alarm_topic_arn"`
				LogGroups     map[string]string `json:"log_groups"`
			} `json:"value"`
		} `json:"runners"`
	}
	if err := json.Unmarshal([]byte(tf(t, dir, cliConfig, "output", "-json")), &out); err != nil {
		t.Fatal(err)
	}
	got := out.Runners.Value
	if got.TableName != "ci-state" || got.FunctionNames["provision"] != "ci-provision" || got.FunctionNames["scale-down"] != "ci-scale-down" ||
		len(got.QueueURLs) != 2 || got.ScheduleNames["refresh"] != "ci-refresh" || !strings.HasSuffix(got.InvokerRole, ":role/ghr-modtest-us-east-1-invoke-ci") ||
		got.Dashboard != "ci" || len(got.Alarms) != 17 || got.AlarmTopic != "arn:aws:sns:us-east-1:123456789012:ci-alarms" || got.LogGroups["linux-large"] != "/ghrunner/modtest/linux-large" {
		t.Fatalf("outputs %+v", got)
	}
	// Two pools' 4 alarms, the deployment's 4 and one on Lambda's own
	// Errors per function.
	for h := range got.FunctionNames {
		if !slices.Contains(got.Alarms, "ci-lambda-errors-"+h) {
			t.Errorf("no Lambda errors alarm for function %s among %q", h, got.Alarms)
		}
	}
	// The jit function is fed by the table's stream (the mapping is kept
	// by the moto proxy: awstest/mappings.go).
	if ms := env.Mappings(); len(ms) != 1 || !strings.HasSuffix(aws.ToString(ms[0].FunctionArn), ":function:ci-jit") || !strings.Contains(aws.ToString(ms[0].EventSourceArn), "table/ci-state/stream/") {
		t.Errorf("event source mappings %+v, want ci-jit's from the table's stream", ms)
	}
	// No function sends each failure to the alarm topic: a GitHub outage
	// fails refresh every minute, and the topic would mail each one (issue
	// 30, item 13); the alarms watch the condition instead.
	for fn, want := range map[string]string{"ci-refresh": "", "ci-scale-down": "", "ci-provision": ""} {
		async, err := admin.Lambda(env.Config(t)).GetFunctionEventInvokeConfig(context.Background(), &lambda.GetFunctionEventInvokeConfigInput{FunctionName: aws.String(fn)})
		got := ""
		if err == nil && async.DestinationConfig != nil && async.DestinationConfig.OnFailure != nil {
			got = aws.ToString(async.DestinationConfig.OnFailure.Destination)
		}
		if err != nil || got != want {
			t.Errorf("%s: on-failure destination %q (%v), want %q", fn, got, err, want)
		}
	}
	pools, err := state.New(env.Config(t).DynamoDB(), got.TableName).ListPoolConfigs(context.Background())
	if err != nil || len(pools) != 2 || pools[1].Owner != "acme/api" || pools[1].Timings.MaxUses != 10 || len(pools[0].IdleWindows) != 1 {
		t.Fatalf("pool configs %+v: %v", pools, err)
	}

	start = time.Now()
	again := tf(t, dir, cliConfig, "plan", "-input=false", "-no-color", "-detailed-exitcode")
	t.Logf("terraform plan of the deployed module (no changes): %.1fs", time.Since(start).Seconds())
	if !strings.Contains(again, "No changes") {
		t.Errorf("a second plan is not empty:\n%s", again)
	}

	tf(t, dir, cliConfig, "destroy", "-auto-approve", "-input=false", "-no-color")
	if left := leftovers(t); len(left) > 0 {
		t.Errorf("destroy left behind: %s", strings.Join(left, ", "))
	}
}

// leftovers lists every object of the deployment still in moto.
func leftovers(t *testing.T) []string {
	ctx, c := context.Background(), env.Config(t)
	var left []string
	tables, _ := c.DynamoDB().ListTables(ctx, &dynamodb.ListTablesInput{})
	left = append(left, prefixed("table", tables.TableNames, "ci-")...)
	queues, _ := c.SQS().ListQueues(ctx, &sqs.ListQueuesInput{})
	left = append(left, prefixed("queue", queues.QueueUrls, "")...)
	fns, _ := admin.Lambda(c).ListFunctions(ctx, &lambda.ListFunctionsInput{})
	for _, f := range fns.Functions {
		left = append(left, "function "+aws.ToString(f.FunctionName))
	}
	roles, _ := admin.IAM(c).ListRoles(ctx, &iam.ListRolesInput{})
	for _, r := range roles.Roles {
		if strings.HasPrefix(aws.ToString(r.RoleName), "ghr-modtest-") {
			left = append(left, "role "+aws.ToString(r.RoleName))
		}
	}
	profiles, _ := admin.IAM(c).ListInstanceProfiles(ctx, &iam.ListInstanceProfilesInput{})
	for _, p := range profiles.InstanceProfiles {
		left = append(left, "instance profile "+aws.ToString(p.InstanceProfileName))
	}
	lts, _ := c.EC2().DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{})
	for _, lt := range lts.LaunchTemplates {
		left = append(left, "launch template "+aws.ToString(lt.LaunchTemplateName))
	}
	buckets, _ := admin.S3(c).ListBuckets(ctx, &s3.ListBucketsInput{})
	for _, b := range buckets.Buckets {
		left = append(left, "bucket "+aws.ToString(b.Name))
	}
	groups, _ := admin.Logs(c).DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{})
	for _, g := range groups.LogGroups {
		left = append(left, "log group "+aws.ToString(g.LogGroupName))
	}
	schedules, _ := admin.Scheduler(c).ListSchedules(ctx, &scheduler.ListSchedulesInput{})
	for _, s := range schedules.Schedules {
		left = append(left, "schedule "+aws.ToString(s.Name))
	}
	dashboards, _ := admin.CloudWatch(c).ListDashboards(ctx, &cloudwatch.ListDashboardsInput{})
	for _, d := range dashboards.DashboardEntries {
		left = append(left, "dashboard "+aws.ToString(d.DashboardName))
	}
	alarms, _ := admin.CloudWatch(c).DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{})
	for _, a := range alarms.MetricAlarms {
		left = append(left, "alarm "+aws.ToString(a.AlarmName))
	}
	oidc, _ := admin.IAM(c).ListOpenIDConnectProviders(ctx, &iam.ListOpenIDConnectProvidersInput{})
	for _, p := range oidc.OpenIDConnectProviderList {
		left = append(left, "OIDC provider "+aws.ToString(p.Arn))
	}
	return left
}

func prefixed(kind string, names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, kind+" "+n)
		}
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// examples/complete is valid against this module and the installed provider.
func TestCompleteExampleValidates(t *testing.T) {
	cliConfig := install(t)
	tmp := t.TempDir()
	for _, d := range []string{"examples/complete", "modules/runner-pool"} {
		if err := sandbox.CopyTerraform(filepath.Join("../..", d), filepath.Join(tmp, d)); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(tmp, "examples/complete")
	tf(t, dir, cliConfig, "fmt", "-check")
	tf(t, dir, cliConfig, "init", "-input=false", "-no-color", "-backend=false")
	tf(t, dir, cliConfig, "validate", "-no-color")
}

// Issue 30, item 14: a prefix and a pool name that each pass their own rule
// may make a queue name over SQS's 80 characters; plan says so, naming the
// pool, instead of CreateQueue failing mid-apply.
func TestModulePlanRefusesAQueueNameOverSQSsLimit(t *testing.T) {
	cliConfig := install(t)
	moduleDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	n := env.Network(t)
	dir := t.TempDir()
	long := strings.Repeat("pool-name-", 6) // 60 characters: a valid pool name
	cfg := fmt.Sprintf(root, env.URL, moduleDir, n.AMI, n.Subnet)
	cfg = strings.Replace(cfg, `prefix           = "ci"`, `prefix           = "a-thirty-one-character-prefix-x"`, 1)
	cfg = strings.Replace(cfg, "    linux = {", "    "+long+" = {", 1)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tf(t, dir, cliConfig, "init", "-input=false", "-no-color")
	cmd := exec.Command("terraform", "plan", "-input=false", "-no-color")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "TF_PLUGIN_CACHE_DIR=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(strings.Join(strings.Fields(string(out)), " "), "is over SQS's 80 characters") || !strings.Contains(string(out), long) {
		t.Fatalf("plan with a 92-character queue name: %v\n%s", err, lastLines(string(out), 20))
	}
}

// Issue 40, item 6: a pool's proxy passes through the module to
// ghrunner_pool, whose plan refuses one with credentials in its URL,
// naming the field and the rule. (Without the pass-through the plan
// accepts the pool: the module's variable keeps the value to itself.)
func TestModulePlanPassesAPoolsProxyOnToItsRules(t *testing.T) {
	cliConfig := install(t)
	moduleDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	n := env.Network(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(root, env.URL, moduleDir, n.AMI, n.Subnet)
	cfg = strings.Replace(cfg, `      idle_windows   = [`, "      proxy          = { url = \"http://ci:hunter2@proxy.internal:3128\", no_proxy = [\".corp.example\"] }\n      idle_windows   = [", 1)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tf(t, dir, cliConfig, "init", "-input=false", "-no-color")
	cmd := exec.Command("terraform", "plan", "-input=false", "-no-color")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "TF_PLUGIN_CACHE_DIR=")
	out, err := cmd.CombinedOutput()
	text := strings.Join(strings.Fields(string(out)), " ")
	if err == nil || !strings.Contains(text, "proxy.url:") || !strings.Contains(text, "no user:password@") || strings.Contains(text, "hunter2") {
		t.Fatalf("plan with a proxy URL holding credentials: %v\n%s", err, lastLines(string(out), 20))
	}
}

// Issue 36, fair share: with a reserved concurrency for provision, a pool
// without max_provisions_per_repository (or limits summing to it) would let
// one repository hold every execution; plan refuses, naming both settings.
// (With the precondition removed the plan goes on and this test reports
// "plan with a reserved concurrency one repository could exhaust: <nil>".)
func TestModulePlanRefusesAProvisionConcurrencyOneRepositoryCouldExhaust(t *testing.T) {
	cliConfig := install(t)
	moduleDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	n := env.Network(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(root, env.URL, moduleDir, n.AMI, n.Subnet)
	cfg = strings.Replace(cfg, `prefix           = "ci"`, `prefix           = "ci"`+"\n  provision_reserved_concurrency = 5", 1)
	cfg = strings.Replace(cfg, `      idle_windows   = [`, "      max_provisions_per_repository = 2\n      idle_windows   = [", 1)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tf(t, dir, cliConfig, "init", "-input=false", "-no-color")
	cmd := exec.Command("terraform", "plan", "-input=false", "-no-color")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "TF_PLUGIN_CACHE_DIR=")
	out, err := cmd.CombinedOutput()
	text := strings.Join(strings.Fields(string(out)), " ")
	if err == nil || !strings.Contains(text, "provision_reserved_concurrency (5) must be more than the sum of the pools' max_provisions_per_repository") {
		t.Fatalf("plan with a reserved concurrency one repository could exhaust: %v\n%s", err, lastLines(string(out), 20))
	}
}

// Scale sets: the module's plan refuses what ghrunner_pool would (a name
// that is no runs-on label, max_runners over max_instances, token
// registration) and what no single pool can see: two pools of one owner
// serving one scale set name, whatever its case.
func TestModulePlanRefusesBadScaleSets(t *testing.T) {
	cliConfig := install(t)
	moduleDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	n := env.Network(t)
	dir := t.TempDir()
	// Valid: one name for two owners, max_runners up to max_instances.
	good := fmt.Sprintf(root, env.URL, moduleDir, n.AMI, n.Subnet)
	good = strings.Replace(good, `      idle_windows   = [`, "      scale_set      = { name = \"Big\", max_runners = 20 }\n      idle_windows   = [", 1)
	good = strings.Replace(good, `      owner          = "acme/api"`, "      owner          = \"acme/api\"\n      scale_set      = { name = \"big\" }", 1)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	tf(t, dir, cliConfig, "init", "-input=false", "-no-color")
	plan := tf(t, dir, cliConfig, "plan", "-input=false", "-no-color")
	if !strings.Contains(plan, `+ name        = "Big"`) {
		t.Errorf("the plan does not pass the scale set to the pool:\n%s", plan)
	}
	// Scale sets bring the listener, in the first scale-set pool's subnets.
	listener := regexp.MustCompile(`(?s)# module\.runners\.ghrunner_listener\.this\[0\] will be created.*?\n    \}\n`).FindString(plan)
	if listener == "" || !strings.Contains(listener, n.Subnet) || !strings.Contains(listener, `+ cpu `) || !strings.Contains(listener, `+ image_digest `) {
		t.Errorf("the plan does not make the listener in the pool's subnet %s:\n%s", n.Subnet, lastLines(plan, 80))
	}
	cfg := fmt.Sprintf(root, env.URL, moduleDir, n.AMI, n.Subnet)
	cfg = strings.Replace(cfg, `      idle_windows   = [`, "      scale_set      = { name = \"Big\", max_runners = 30 }\n      idle_windows   = [", 1)
	cfg = strings.Replace(cfg, `      owner          = "acme/api"`, "      owner          = \"ACME\"\n      registration   = \"token\"\n      scale_set      = { name = \"big\" }", 1)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("terraform", "plan", "-input=false", "-no-color")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "TF_PLUGIN_CACHE_DIR=")
	out, err := cmd.CombinedOutput()
	text := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{
		"pools[*].scale_set.max_runners must be 1 to the pool's max_instances",
		`pools[*].scale_set needs registration = "jit"`,
		"pools[*].scale_set.name must differ between the pools of one owner",
	} {
		if err == nil || !strings.Contains(text, want) {
			t.Errorf("plan with bad scale sets: %v, want %q in\n%s", err, want, lastLines(string(out), 40))
		}
	}
	// The name rule alone.
	cfg = strings.Replace(cfg, `scale_set      = { name = "big" }`, `scale_set      = { name = "big,gpu" }`, 1)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command("terraform", "plan", "-input=false", "-no-color")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "TF_PLUGIN_CACHE_DIR=")
	out, err = cmd.CombinedOutput()
	if want := "pools[*].scale_set.name must be 1-45 letters, digits"; err == nil || !strings.Contains(strings.Join(strings.Fields(string(out)), " "), want) {
		t.Errorf("plan with scale set name big,gpu: %v, want %q in\n%s", err, want, lastLines(string(out), 40))
	}
}

// A pool's stopped tier reaches ghrunner_pool through the module: on a
// spot pool without on-demand fallback the provider's plan refuses it,
// naming the setting. (Without the module's pass-through the plan goes on:
// "plan with a stopped tier on a spot-only pool: <nil>".)
func TestModulePlanPassesAPoolsStoppedTierOnToItsRules(t *testing.T) {
	cliConfig := install(t)
	moduleDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	n := env.Network(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(root, env.URL, moduleDir, n.AMI, n.Subnet)
	cfg = strings.Replace(cfg, `      idle_windows   = [`, "      usage_class    = \"spot\"\n      on_demand_fallback = false\n      stopped        = { max = 2, keep_seconds = 3600 }\n      idle_windows   = [", 1)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tf(t, dir, cliConfig, "init", "-input=false", "-no-color")
	cmd := exec.Command("terraform", "plan", "-input=false", "-no-color")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "TF_PLUGIN_CACHE_DIR=")
	out, err := cmd.CombinedOutput()
	text := strings.Join(strings.Fields(string(out)), " ")
	if err == nil || !strings.Contains(text, "A stopped tier needs on-demand instances") {
		t.Fatalf("plan with a stopped tier on a spot-only pool: %v\n%s", err, lastLines(string(out), 20))
	}
}
