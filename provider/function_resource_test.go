package provider

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

func functionConfig(table, name, handler, extra string) string {
	return providerConfig() + fmt.Sprintf(`
resource "ghrunner_table" "state" {
  name = %q
}
resource "ghrunner_queue" "linux" {
  name = %q
}
resource "ghrunner_function" "fn" {
  name             = %q
  handler          = %q
  table            = ghrunner_table.state.name
  github_parameter = "/ghrunner/acc/github"
  queue_arns       = [ghrunner_queue.linux.arn]
%s
}
`, table, table+"-q", name, handler, extra)
}

// checkFunction reads the function back from Lambda and compares it with
// what the embedded bundle and the attributes say it must be.
func checkFunction(name, arch string, timeout, memory, concurrency, retention int32) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		c := env.Config(&testing.T{})
		out, err := admin.Lambda(c).GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
		if err != nil {
			return err
		}
		cfg := out.Configuration
		code, err := functionAsset(arch)
		if err != nil {
			return err
		}
		if got := aws.ToString(cfg.CodeSha256); got != code.sha256B64 {
			return fmt.Errorf("CodeSha256 %s, want the embedded %s bundle's %s", got, arch, code.sha256B64)
		}
		wantArch := map[string]string{"arm64": "arm64", "amd64": "x86_64"}[arch]
		if len(cfg.Architectures) != 1 || string(cfg.Architectures[0]) != wantArch {
			return fmt.Errorf("architectures %v, want %s", cfg.Architectures, wantArch)
		}
		if aws.ToInt32(cfg.Timeout) != timeout || aws.ToInt32(cfg.MemorySize) != memory || aws.ToString(cfg.Handler) != "bootstrap" {
			return fmt.Errorf("timeout %d memory %d handler %s", aws.ToInt32(cfg.Timeout), aws.ToInt32(cfg.MemorySize), aws.ToString(cfg.Handler))
		}
		vars := cfg.Environment.Variables
		if vars["GHRUNNER_ENVIRONMENT"] != "acc" || vars["GHRUNNER_GITHUB_PARAMETER"] != "/ghrunner/acc/github" || vars["GHRUNNER_TABLE"] == "" {
			return fmt.Errorf("environment %v", vars)
		}
		conc, err := admin.Lambda(c).GetFunctionConcurrency(ctx, &lambda.GetFunctionConcurrencyInput{FunctionName: aws.String(name)})
		if err != nil {
			return err
		}
		if got := int32(-1); conc.ReservedConcurrentExecutions != nil && *conc.ReservedConcurrentExecutions != concurrency || conc.ReservedConcurrentExecutions == nil && concurrency != got {
			return fmt.Errorf("reserved concurrency %v, want %d", conc.ReservedConcurrentExecutions, concurrency)
		}
		async, err := admin.Lambda(c).GetFunctionEventInvokeConfig(ctx, &lambda.GetFunctionEventInvokeConfigInput{FunctionName: aws.String(name)})
		if err != nil || aws.ToInt32(async.MaximumRetryAttempts) != 0 || aws.ToInt32(async.MaximumEventAgeInSeconds) != maxEventAge {
			return fmt.Errorf("asynchronous invocations: %v %+v, want no retry and a maximum age of %d s", err, async, maxEventAge)
		}
		groups, err := admin.Logs(c).DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{LogGroupNamePrefix: aws.String("/aws/lambda/" + name)})
		if err != nil || len(groups.LogGroups) != 1 || aws.ToInt32(groups.LogGroups[0].RetentionInDays) != retention {
			return fmt.Errorf("log group: %v %+v, want retention %d", err, groups, retention)
		}
		return nil
	}
}

func TestAccFunction_basic_update_import(t *testing.T) {
	table, name := awstest.Name(t, "tbl"), awstest.Name(t, "fn")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: functionConfig(table, name, "provision", ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkFunction(name, "arm64", 900, 512, -1, 30),
					resource.TestCheckResourceAttr("ghrunner_function.fn", "role_name", roleNameIn("acc", awstest.Region, "fn-", name)),
					// github.com's issuer and ghrunner's audience by default.
					resource.TestCheckResourceAttr("ghrunner_function.fn", "oidc_issuer", "https://token.actions.githubusercontent.com"),
					resource.TestCheckResourceAttr("ghrunner_function.fn", "oidc_audience", "ghrunner"),
					resource.TestMatchResourceAttr("ghrunner_function.fn", "arn", regexp.MustCompile(`:function:`+name+`$`)),
				),
			},
			// New code (another architecture) and settings: updated in place.
			{
				Config: functionConfig(table, name, "provision", `
  architecture       = "amd64"
  memory_size        = 1024
  timeout            = 600
  log_retention_days = 7
  reserved_concurrency = 5
  oidc_issuer        = "https://ghe.example.com/_services/token"
  oidc_audience      = "ci-runners"
`),
				Check: resource.ComposeAggregateTestCheckFunc(checkFunction(name, "amd64", 600, 1024, 5, 7),
					resource.TestCheckResourceAttr("ghrunner_function.fn", "oidc_issuer", "https://ghe.example.com/_services/token")),
			},
			{ResourceName: "ghrunner_function.fn", ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"tags", "queue_arns", "volume_kms_key_arns"}},
		},
	})
}

// Scheduled handlers run one at a time.
func TestAccFunction_scheduledDefaults(t *testing.T) {
	table, name := awstest.Name(t, "tbl"), awstest.Name(t, "fn")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{{
			Config: functionConfig(table, name, "scale-down", ""),
			Check:  checkFunction(name, "arm64", 300, 512, -1, 30),
		}},
	})
}

func TestAccFunction_disappears(t *testing.T) {
	table, name := awstest.Name(t, "tbl"), awstest.Name(t, "fn")
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{{
			Config: functionConfig(table, name, "release", ""),
			Check: func(*terraform.State) error {
				_, err := admin.Lambda(env.Config(&testing.T{})).DeleteFunction(context.Background(), &lambda.DeleteFunctionInput{FunctionName: aws.String(name)})
				return err
			},
			ExpectNonEmptyPlan: true,
		}},
	})
}

func TestAccFunction_validation(t *testing.T) {
	for _, c := range []struct{ handler, extra, want string }{
		{"deploy", "", `value must be one of`},
		{"provision", `timeout = 901`, `between 1 and 900`},
		{"provision", `log_retention_days = 2`, `value must be one of`},
		{"provision", `architecture = "x86_64"`, `value must be one of`},
		{"provision", `queue_arns = ["https://sqs.us-east-1.amazonaws.com/1/q"]`, `must be an SQS queue ARN`},
		{"provision", `oidc_issuer = "http://token.actions.githubusercontent.com"`, `must be https`},
		{"release", `oidc_issuer = "https://token.actions.githubusercontent.com/"`, `without query, fragment, user or trailing slash`},
		{"provision", `oidc_audience = "a b"`, `without spaces, commas or quotes`},
	} {
		t.Run(c.want+c.extra, func(t *testing.T) {
			cfg := functionConfig("tbl-validation", "fn-validation", c.handler, c.extra)
			if strings.Contains(c.extra, "queue_arns") {
				cfg = strings.Replace(cfg, "  queue_arns       = [ghrunner_queue.linux.arn]\n", "", 1)
			}
			resource.ParallelTest(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				CheckDestroy:             checkDestroyed,
				Steps:                    []resource.TestStep{{Config: cfg, PlanOnly: true, ExpectError: regexp.MustCompile(c.want)}},
			})
		})
	}
}

func TestAccFunction_withoutBundle(t *testing.T) {
	saved := assets
	assets = fstest.MapFS{}
	defer func() { assets = saved }()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{{Config: functionConfig("tbl-nobundle", "fn-nobundle", "provision", ""), PlanOnly: true,
			ExpectError: regexp.MustCompile(`built without bundle: run make build`)}},
	})
}

// The policy of each handler holds exactly the actions its code calls.
func TestFunctionPolicy(t *testing.T) {
	table := "arn:aws:dynamodb:eu-west-1:123456789012:table/ghr"
	queues := []string{"arn:aws:sqs:eu-west-1:123456789012:linux"}
	actions := func(doc string) (all []string, bySid map[string]policyStatement) {
		var d policyDocument
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatal(err)
		}
		bySid = map[string]policyStatement{}
		for _, s := range d.Statement {
			all = append(all, s.Action...)
			bySid[s.Sid] = s
			if s.Effect != "Allow" {
				t.Errorf("%s: effect %s", s.Sid, s.Effect)
			}
			for _, a := range s.Action {
				if strings.Contains(a, "*") {
					t.Errorf("%s: wildcard action %s", s.Sid, a)
				}
			}
		}
		return all, bySid
	}
	for handler, want := range map[string]struct{ has, hasNot []string }{
		"provision": {has: []string{"ec2:CreateFleet", "iam:PassRole", "sqs:ReceiveMessage", "ec2:TerminateInstances", "servicequotas:GetServiceQuota", "ec2:StartInstances"}, hasNot: []string{"ec2:DeleteTags", "ec2:StopInstances"}},
		"release":   {has: []string{"sqs:SendMessage", "dynamodb:Query"}, hasNot: []string{"ec2:CreateFleet", "iam:PassRole", "sqs:ReceiveMessage", "ec2:StopInstances", "ec2:StartInstances"}},
		// Refresh launches to pre-warm pools, as provision does, and never
		// receives pool messages or removes tags.
		"refresh": {has: []string{"ec2:TerminateInstances", "sqs:SendMessage", "ec2:CreateFleet", "iam:PassRole"}, hasNot: []string{"sqs:ReceiveMessage", "ec2:DeleteTags", "servicequotas:GetServiceQuota", "ec2:StopInstances", "ec2:StartInstances"}},
		// The stopped tier: scale-down stops, provision starts.
		"scale-down": {has: []string{"ec2:CreateTags", "ec2:DeleteTags", "ec2:TerminateInstances", "ec2:StopInstances"}, hasNot: []string{"ec2:CreateFleet", "sqs:SendMessage", "sqs:ReceiveMessage", "ec2:StartInstances"}},
	} {
		doc, err := functionPolicy(handler, table, "", queues, "/ghrunner/github", "ci-"+handler, "prod", "/", false)
		if err != nil {
			t.Fatal(err)
		}
		all, bySid := actions(doc)
		for _, a := range want.has {
			if !slices.Contains(all, a) {
				t.Errorf("%s: missing %s", handler, a)
			}
		}
		for _, a := range want.hasNot {
			if slices.Contains(all, a) {
				t.Errorf("%s: must not have %s", handler, a)
			}
		}
		term := bySid["TerminateOwnInstances"]
		if term.Condition["StringEquals"]["aws:ResourceTag/ghr:environment"] != "prod" {
			t.Errorf("%s: termination not limited to the environment: %+v", handler, term)
		}
		if got := bySid["GitHubCredentials"].Resource; len(got) != 1 || got[0] != "arn:aws:ssm:eu-west-1:123456789012:parameter/ghrunner/github" {
			t.Errorf("%s: parameter resource %v", handler, got)
		}
		if got := bySid["Logs"].Resource; len(got) != 1 || got[0] != "arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/ci-"+handler+":*" {
			t.Errorf("%s: logs resource %v", handler, got)
		}
	}
	if _, err := functionPolicy("provision", "not-an-arn", "", nil, "/p", "f", "e", "/", false); err == nil {
		t.Error("accepted a table ARN that is not an ARN")
	}
}

// The agent's instance policy (docs/security.md): instance records only, no
// put/delete/query/scan, termination of the calling instance alone (and only
// within its environment and pool), the agent download only. IAM is not
// enforced by moto, so the document itself is what is checked.
func TestAgentPolicy(t *testing.T) {
	raw, err := agentPolicy("arn:aws:dynamodb:eu-west-1:123456789012:table/ghr", "", "prod", "linux", "ghr-prod-agent-1")
	if err != nil {
		t.Fatal(err)
	}
	var d policyDocument
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		t.Fatal(err)
	}
	if d.Version != "2012-10-17" || len(d.Statement) != 5 {
		t.Fatalf("version %s, %d statements: %s", d.Version, len(d.Statement), raw)
	}
	var all []string
	for _, s := range d.Statement {
		if s.Effect != "Allow" || len(s.Resource) == 0 || s.Principal != nil {
			t.Errorf("%s: effect %s, resources %v, principal %v", s.Sid, s.Effect, s.Resource, s.Principal)
		}
		for _, r := range s.Resource {
			if r == "*" {
				t.Errorf("%s: resource *", s.Sid)
			}
		}
		for _, a := range s.Action {
			if strings.Contains(a, "*") {
				t.Errorf("%s: wildcard action %s", s.Sid, a)
			}
		}
		all = append(all, s.Action...)
	}
	// Exactly what the agent calls: nothing else is allowed.
	slices.Sort(all)
	if want := []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "ec2:TerminateInstances", "logs:CreateLogStream", "logs:PutLogEvents", "s3:GetObject"}; !slices.Equal(all, want) {
		t.Errorf("actions %v, want %v", all, want)
	}

	rec, write, term, logs, get := d.Statement[0], d.Statement[1], d.Statement[2], d.Statement[3], d.Statement[4]
	// Streams of its pool's log group only: no reading, no other group.
	if logs.Sid != "PoolLogStreams" || !slices.Equal(logs.Resource, []string{"arn:aws:logs:eu-west-1:123456789012:log-group:/ghrunner/prod/linux:log-stream:*"}) {
		t.Errorf("log statement %+v", logs)
	}
	// Its own record only: the table itself (no index), the one key that
	// is the session's aws:userid (the catalogue evaluates it).
	if rec.Sid != "ReadOwnInstanceRecord" || !slices.Equal(rec.Action, []string{"dynamodb:GetItem"}) || !slices.Equal(rec.Resource, []string{"arn:aws:dynamodb:eu-west-1:123456789012:table/ghr"}) ||
		len(rec.Condition) != 2 || fmt.Sprint(rec.Condition["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"]) != "[${aws:userid}]" ||
		rec.Condition["Null"]["dynamodb:LeadingKeys"] != "false" {
		t.Errorf("record statement %+v", rec)
	}
	// Writes to that record name only the agent's attributes (T6).
	if write.Sid != "WriteAgentFieldsOfOwnRecord" || !slices.Equal(write.Action, []string{"dynamodb:UpdateItem"}) || !slices.Equal(write.Resource, rec.Resource) ||
		fmt.Sprint(write.Condition["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"]) != "[${aws:userid}]" ||
		fmt.Sprint(write.Condition["ForAllValues:StringEquals"]["dynamodb:Attributes"]) != fmt.Sprint(state.AgentAttributes) ||
		write.Condition["Null"]["dynamodb:Attributes"] != "false" || write.Condition["Null"]["dynamodb:LeadingKeys"] != "false" {
		t.Errorf("record write statement %+v", write)
	}
	// Itself only: the caller's instance ARN must be the target's, and the
	// target must be of this environment and pool.
	if term.Sid != "TerminateItself" || !slices.Equal(term.Resource, []string{"arn:aws:ec2:eu-west-1:123456789012:instance/*"}) {
		t.Errorf("terminate statement %+v", term)
	}
	if got := term.Condition["ArnEquals"]["ec2:SourceInstanceARN"]; got != "arn:aws:ec2:eu-west-1:123456789012:instance/${ec2:InstanceID}" {
		t.Errorf("termination not limited to the calling instance: %v", got)
	}
	if term.Condition["StringEquals"]["aws:ResourceTag/ghr:pool"] != "linux" || term.Condition["StringEquals"]["aws:ResourceTag/ghr:environment"] != "prod" || len(term.Condition) != 2 {
		t.Errorf("terminate conditions %+v", term.Condition)
	}
	// The variable reaches IAM as written (not escaped, not in Resource).
	if !strings.Contains(raw, `"ec2:SourceInstanceARN":"arn:aws:ec2:eu-west-1:123456789012:instance/${ec2:InstanceID}"`) || strings.Contains(raw, `"Resource":["${`) {
		t.Errorf("policy JSON: %s", raw)
	}
	if get.Sid != "DownloadAgent" || !slices.Equal(get.Resource, []string{"arn:aws:s3:::ghr-prod-agent-1/agent/*"}) || get.Condition != nil {
		t.Errorf("download statement %+v", get)
	}
	if doc, _ := agentPolicy("arn:aws:dynamodb:eu-west-1:1:table/ghr", "", "prod", "linux", ""); strings.Contains(doc, "s3:") {
		t.Errorf("preinstalled agent still allowed to download: %s", doc)
	}
	// Other partitions keep their partition in every ARN.
	if doc, _ := agentPolicy("arn:aws-cn:dynamodb:cn-north-1:1:table/ghr", "", "prod", "linux", "b"); strings.Contains(doc, "arn:aws:") {
		t.Errorf("partition lost: %s", doc)
	}
	if _, err := agentPolicy("not-an-arn", "", "prod", "linux", ""); err == nil {
		t.Error("accepted a table ARN that is not an ARN")
	}
}

// A provider release with a new bundle plans an in-place update of the code.
func TestAccFunction_newBundleIsAnUpdate(t *testing.T) {
	table, name := awstest.Name(t, "tbl"), awstest.Name(t, "fn")
	saved := assets
	defer func() { assets = saved }()
	newer, err := bundle.Zip("bootstrap", []byte("a newer bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(newer)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{Config: functionConfig(table, name, "release", "")},
			{
				PreConfig: func() { assets = fstest.MapFS{bundle.FunctionZip("arm64"): {Data: newer}} },
				Config:    functionConfig(table, name, "release", ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("ghrunner_function.fn", plancheck.ResourceActionUpdate),
				}},
				Check: resource.TestCheckResourceAttr("ghrunner_function.fn", "code_sha256", base64.StdEncoding.EncodeToString(sum[:])),
			},
		},
	})
}

// TestAccFunction_jitReadsTheTablesStream: the jit function gets an event
// source mapping from the state table's stream (requests only, partial
// batch responses), and none is left when it is destroyed; on a table
// without a stream it is refused, saying what to set.
func TestAccFunction_jitReadsTheTablesStream(t *testing.T) {
	table, name := awstest.Name(t, "tbl"), awstest.Name(t, "fn")
	config := func(stream bool) string {
		return strings.Replace(functionConfig(table, name, bundle.HandlerJIT, ""), "resource \"ghrunner_table\" \"state\" {\n", fmt.Sprintf("resource \"ghrunner_table\" \"state\" {\n  stream = %t\n", stream), 1)
	}
	mappings := func() ([]lambdatypes.EventSourceMappingConfiguration, error) {
		out, err := admin.Lambda(env.Config(&testing.T{})).ListEventSourceMappings(context.Background(), &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(name)})
		if err != nil {
			return nil, err
		}
		return out.EventSourceMappings, nil
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: resource.ComposeAggregateTestCheckFunc(checkDestroyed, func(*terraform.State) error {
			if ms, err := mappings(); err == nil && len(ms) > 0 {
				return fmt.Errorf("event source mappings left: %+v", ms)
			}
			return nil
		}),
		Steps: []resource.TestStep{
			{Config: config(false), ExpectError: regexp.MustCompile(`has no stream[\s\S]*set stream = true`)},
			{Config: config(true), Check: func(s *terraform.State) error {
				ms, err := mappings()
				if err != nil || len(ms) != 1 {
					return fmt.Errorf("mappings %+v %v, want one", ms, err)
				}
				m, stream := ms[0], s.RootModule().Resources["ghrunner_table.state"].Primary.Attributes["stream_arn"]
				if aws.ToString(m.EventSourceArn) != stream || len(m.FunctionResponseTypes) != 1 || m.FunctionResponseTypes[0] != lambdatypes.FunctionResponseTypeReportBatchItemFailures {
					return fmt.Errorf("mapping %+v, want the table's stream %s with partial batch responses", m, stream)
				}
				if m.FilterCriteria == nil || len(m.FilterCriteria.Filters) != 1 || !strings.Contains(aws.ToString(m.FilterCriteria.Filters[0].Pattern), "UD_JIT_NEXT") {
					return fmt.Errorf("mapping filter %+v, want requests only", m.FilterCriteria)
				}
				return nil
			}},
		},
	})
}
