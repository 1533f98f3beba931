package provider

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/iamsim"
)

// The deployer's policy (issue 15 item 13), asked of the real evaluator:
// each call the provider makes on apply and destroy is allowed on the
// deployment's own objects, and the same calls on anything else are denied.

var catDeployment = deployment{partition: "aws", account: catAccount, region: catRegion, environment: catEnv, namePrefix: "ghrunner", rolePath: "/"}

const catDeployer = "arn:aws:sts::123456789012:assumed-role/ci-deployer/terraform"

func TestDeployerPolicy_allowsTheDeploymentAndNothingElse(t *testing.T) {
	e := evaluator(t)
	envTag := func(prefix string) map[string][]string { return tags(prefix, "ghr:environment", catEnv) }
	other := func(prefix string) map[string][]string { return tags(prefix, "ghr:environment", "staging") }
	role, profile := catIAM("role/ghr-prod-eu-west-1-fn-ghrunner-provision"), catIAM("instance-profile/ghr-prod-eu-west-1-linux")
	table := catARN("dynamodb", "table/ghrunner-state")
	tmpl, inst := catARN("ec2", "launch-template/lt-0123456789abcdef0"), catARN("ec2", "instance/i-0123456789abcdef0")
	bucket := "arn:aws:s3:::ghr-prod-agent-0a1b2c3d"
	runCatalogue(t, e, catDeployer, deployerPolicy(catDeployment), nil, []ask{
		{"make a function's role", "iam:CreateRole", role, nil, true},
		{"write its policy", "iam:PutRolePolicy", role, nil, true},
		{"restore its trust", "iam:UpdateAssumeRolePolicy", role, nil, true},
		{"make a pool's instance profile", "iam:CreateInstanceProfile", profile, nil, true},
		{"put the role in it", "iam:AddRoleToInstanceProfile", profile, nil, true},
		{"pass a function's role to Lambda", "iam:PassRole", role, map[string][]string{"iam:PassedToService": {"lambda.amazonaws.com"}}, true},
		{"pass a schedule's role to Scheduler", "iam:PassRole", catIAM("role/ghr-prod-eu-west-1-sched-ghrunner-refresh"), map[string][]string{"iam:PassedToService": {"scheduler.amazonaws.com"}}, true},
		{"make the table", "dynamodb:CreateTable", table, nil, true},
		{"write a pool config", "dynamodb:PutItem", table, nil, true},
		{"turn on PITR", "dynamodb:UpdateContinuousBackups", table, nil, true},
		{"make a queue", "sqs:CreateQueue", catARN("sqs", "ghrunner-linux"), nil, true},
		{"make a function", "lambda:CreateFunction", catARN("lambda", "function:ghrunner-provision"), nil, true},
		{"set its concurrency", "lambda:PutFunctionConcurrency", catARN("lambda", "function:ghrunner-refresh"), nil, true},
		{"make its log group", "logs:CreateLogGroup", catARN("logs", "log-group:/aws/lambda/ghrunner-provision"), nil, true},
		{"make a schedule", "scheduler:CreateSchedule", catARN("scheduler", "schedule/default/ghrunner-refresh"), nil, true},
		{"make the agent bucket", "s3:CreateBucket", bucket, nil, true},
		{"upload the agent", "s3:PutObject", bucket + "/agent/linux-amd64", nil, true},
		{"make a launch template tagged as the environment's", "ec2:CreateLaunchTemplate", tmpl, envTag("aws:RequestTag/"), true},
		{"tag it as it is made", "ec2:CreateTags", tmpl, iamsim.Merge(envTag("aws:RequestTag/"), map[string][]string{"ec2:CreateAction": {"CreateLaunchTemplate"}}), true},
		{"add a template version", "ec2:CreateLaunchTemplateVersion", tmpl, envTag("aws:ResourceTag/"), true},
		{"terminate the pool's instances on destroy", "ec2:TerminateInstances", inst, envTag("aws:ResourceTag/"), true},

		{"make a role outside the environment's names", "iam:CreateRole", catIAM("role/Admin"), nil, false},
		{"rewrite another environment's role", "iam:PutRolePolicy", catIAM("role/ghr-staging-eu-west-1-fn-x"), nil, false},
		{"attach a managed policy to its own role", "iam:AttachRolePolicy", role, nil, false},
		{"pass its roles to EC2 (only provision launches)", "iam:PassRole", role, map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}, false},
		{"delete another deployment's table", "dynamodb:DeleteTable", catARN("dynamodb", "table/other-state"), nil, false},
		{"read another table's items", "dynamodb:GetItem", catARN("dynamodb", "table/payroll"), nil, false},
		{"replace another function's code", "lambda:UpdateFunctionCode", catARN("lambda", "function:billing"), nil, false},
		{"delete another environment's template", "ec2:DeleteLaunchTemplate", tmpl, other("aws:ResourceTag/"), false},
		{"make an untagged launch template", "ec2:CreateLaunchTemplate", tmpl, nil, false},
		{"tag an existing instance", "ec2:CreateTags", inst, envTag("aws:RequestTag/"), false},
		{"terminate another environment's instance", "ec2:TerminateInstances", inst, other("aws:ResourceTag/"), false},
		{"launch an instance itself", "ec2:RunInstances", inst, envTag("aws:RequestTag/"), false},
		{"read another bucket", "s3:GetObject", "arn:aws:s3:::ghr-staging-agent-0a1b2c3d/agent", nil, false},
		{"read the GitHub credentials", "ssm:GetParameter", catARN("ssm", "parameter/ghrunner/github"), nil, false},
	})
}

// With iam_role_path and iam_permissions_boundary set, the deployer makes
// roles only under the path and only with the boundary.
func TestDeployerPolicy_makesRolesOnlyUnderThePathWithTheBoundary(t *testing.T) {
	e := evaluator(t)
	d := catDeployment
	d.rolePath, d.boundary = "/ci/", catIAM("policy/ci-boundary")
	role := catIAM("role/ci/ghr-prod-eu-west-1-linux")
	withBoundary := map[string][]string{"iam:PermissionsBoundary": {d.boundary}}
	runCatalogue(t, e, catDeployer, deployerPolicy(d), nil, []ask{
		{"make a role under the path with the boundary", "iam:CreateRole", role, withBoundary, true},
		{"make a role without the boundary", "iam:CreateRole", role, nil, false},
		{"make a role with another boundary", "iam:CreateRole", role, map[string][]string{"iam:PermissionsBoundary": {catIAM("policy/wide-open")}}, false},
		{"lift the boundary of a role", "iam:DeleteRolePermissionsBoundary", role, nil, false},
		{"make a role outside the path", "iam:CreateRole", catIAM("role/ghr-prod-eu-west-1-linux"), withBoundary, false},
		{"write the policy of a role under the path", "iam:PutRolePolicy", role, nil, true},
	})
}

// Every AWS operation the provider's code calls is an action the deployer
// policy grants: a new call fails here until the policy names it.
func TestDeployerPolicy_coversEveryCallOfTheProvider(t *testing.T) {
	granted := map[string]bool{}
	var pd policyDocument
	if err := json.Unmarshal([]byte(deployerPolicy(catDeployment)), &pd); err != nil {
		t.Fatal(err)
	}
	d := catDeployment
	d.boundary = "arn:aws:iam::aws:policy/x"
	var bounded policyDocument
	if err := json.Unmarshal([]byte(deployerPolicy(d)), &bounded); err != nil {
		t.Fatal(err)
	}
	for _, st := range append(pd.Statement, bounded.Statement...) {
		for _, a := range st.Action {
			granted[strings.ToLower(a)] = true
		}
	}
	// The calls the provider makes through packages it shares with the
	// functions: pool configs (internal/state) and the pool's instances on
	// destroy (internal/fleet); and the listener's image push (internal/image).
	calls := map[string]bool{"dynamodb.TransactWriteItems": true, "dynamodb.GetItem": true, "ec2.DescribeInstances": true, "ec2.TerminateInstances": true,
		"ecr.GetAuthorizationToken": true}
	call := regexp.MustCompile(`\b(ec2|ecr|ecs|iam|lambda|dynamodb|cloudwatch|cloudwatchlogs|s3|scheduler|sns|sqs|sts)\.([A-Z][A-Za-z0-9]+)Input\{`)
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			calls[m[1]+"."+m[2]] = true
		}
	}
	// Where the IAM action is not the operation's name.
	actionOf := map[string][]string{
		"dynamodb.TransactWriteItems": {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"},
		"s3.HeadObject":               {"s3:GetObject"},
		"s3.HeadBucket":               {"s3:ListBucket"},
		"s3.ListObjectsV2":            {"s3:ListBucket"},
		"s3.PutPublicAccessBlock":     {"s3:PutBucketPublicAccessBlock"},
		"sts.GetCallerIdentity":       nil, // needs no permission
		// image.Push and remote.Head: the registry's API, ECR's actions.
		"ecr.GetAuthorizationToken": {"ecr:GetAuthorizationToken", "ecr:BatchCheckLayerAvailability", "ecr:InitiateLayerUpload", "ecr:UploadLayerPart",
			"ecr:CompleteLayerUpload", "ecr:PutImage", "ecr:BatchGetImage"},
	}
	var missing []string
	for c := range calls {
		actions, ok := actionOf[c]
		if !ok {
			svc, op, _ := strings.Cut(c, ".")
			actions = []string{strings.Replace(svc, "cloudwatchlogs", "logs", 1) + ":" + op}
		}
		for _, a := range actions {
			if !granted[strings.ToLower(a)] {
				missing = append(missing, a+" (for "+c+")")
			}
		}
	}
	sort.Strings(missing)
	if len(calls) < 50 || len(missing) > 0 {
		t.Fatalf("%d calls found; the deployer policy lacks: %s", len(calls), strings.Join(missing, ", "))
	}
}

// The data source renders it for the provider's account, environment and
// region.
func TestAccDeployerPolicyDataSource(t *testing.T) {
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{
			Config: providerConfig() + `
data "ghrunner_deployer_policy" "this" {
  name_prefix = "ci"
}
`,
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestMatchResourceAttr("data.ghrunner_deployer_policy.this", "account_id", regexp.MustCompile(`^\d{12}$`)),
				resource.TestMatchResourceAttr("data.ghrunner_deployer_policy.this", "json", regexp.MustCompile(`arn:aws:lambda:us-east-1:\d{12}:function:ci-\*`)),
				resource.TestMatchResourceAttr("data.ghrunner_deployer_policy.this", "json", regexp.MustCompile(`arn:aws:iam::\d{12}:role/ghr-acc-\*`)),
				resource.TestCheckResourceAttr("data.ghrunner_deployer_policy.this", "documents.#", "2"),
			),
		}},
	})
}

// Issue 30, item 11: the deployer policy is 6,812 characters for prefix
// ghrunner (more for a long prefix, a role path and a boundary), and IAM
// refuses a customer managed policy over 6,144 (white space not counted).
// Its documents each fit, and together they are the policy, statement for
// statement and in order.
func TestTheDeployerPolicyIsCutIntoDocumentsIAMAccepts(t *testing.T) {
	long := catDeployment
	long.namePrefix, long.environment, long.rolePath = strings.Repeat("p", 40), "a-31-character-long-environment", "/teams/platform/ci/"
	long.boundary = "arn:aws:iam::123456789012:policy/teams/platform/permissions-boundary"
	for _, d := range []deployment{catDeployment, long} {
		whole := deployerPolicy(d)
		if len(whole) <= managedPolicyLimit {
			t.Logf("prefix %q: %d characters, one document would do", d.namePrefix, len(whole))
		}
		parts, err := splitPolicy(whole, managedPolicyLimit)
		if err != nil {
			t.Fatal(err)
		}
		var want, got policyDocument
		if err := json.Unmarshal([]byte(whole), &want); err != nil {
			t.Fatal(err)
		}
		for i, p := range parts {
			if n := len(strings.Join(strings.Fields(p), "")); n > managedPolicyLimit {
				t.Errorf("prefix %q: document %d is %d characters, over IAM's %d", d.namePrefix, i, n, managedPolicyLimit)
			}
			var pd policyDocument
			if err := json.Unmarshal([]byte(p), &pd); err != nil {
				t.Fatal(err)
			}
			got.Statement = append(got.Statement, pd.Statement...)
		}
		w, g := (policyDocument{Statement: want.Statement}).String(), (policyDocument{Statement: got.Statement}).String()
		if w != g {
			t.Errorf("prefix %q: the documents together differ from the policy", d.namePrefix)
		}
		t.Logf("prefix %q: %d characters in %d documents", d.namePrefix, len(whole), len(parts))
	}
}
