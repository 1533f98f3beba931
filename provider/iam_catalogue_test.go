package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/iamsim"
)

// The policies the provider writes, asked of a real IAM evaluator
// (internal/testenv/iamsim): what each role must be able to do, and a
// catalogue of what it must not, each one denied. The sandbox enforces the
// same policies on every request the product makes (internal/sandbox,
// iam.go); this catalogue asks what the product never does, the requests a
// compromised function, instance or job would make.

const (
	catAccount = "123456789012"
	catRegion  = "eu-west-1"
	catEnv     = "prod"
	catTable   = "arn:aws:dynamodb:eu-west-1:123456789012:table/ghr-prod"
	catQueue   = "arn:aws:sqs:eu-west-1:123456789012:ghr-prod-linux"
)

func catARN(service, resource string) string {
	return fmt.Sprintf("arn:aws:%s:%s:%s:%s", service, catRegion, catAccount, resource)
}

// catSTS is a role session's ARN: global, no region.
func catSTS(resource string) string { return "arn:aws:sts::" + catAccount + ":" + resource }

// catIAM is an IAM ARN: global, no region.
func catIAM(resource string) string { return "arn:aws:iam::" + catAccount + ":" + resource }

// evaluator starts the evaluator once per test binary.
func evaluator(t *testing.T) *iamsim.Evaluator {
	t.Helper()
	dir, err := iamsim.Dir()
	if err != nil {
		t.Fatal(err)
	}
	e, err := iamsim.Start(dir)
	if err != nil {
		t.Fatal(err) // never a skip: says how to install it
	}
	t.Cleanup(e.Close)
	return e
}

// ask is one request of the catalogue.
type ask struct {
	name     string
	action   string
	resource string
	context  map[string][]string
	allowed  bool
}

// tags are the condition keys of key, value pairs (iamsim.Tags).
func tags(prefix string, kv ...string) map[string][]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return iamsim.Tags(prefix, m)
}

func runCatalogue(t *testing.T, e *iamsim.Evaluator, principal string, policy string, base map[string][]string, asks []ask) {
	t.Helper()
	runCatalogueOn(t, e, principal, policy, "", base, asks)
}

// runCatalogueOn asks with the resources' own policy too (a KMS key always
// has one: IAM policies count only when it lets them).
func runCatalogueOn(t *testing.T, e *iamsim.Evaluator, principal, policy, resourcePolicy string, base map[string][]string, asks []ask) {
	t.Helper()
	for _, a := range asks {
		req := iamsim.Request{Principal: principal, Account: catAccount, Action: a.action, Resource: a.resource,
			Context: iamsim.Merge(base, a.context), Policies: []iamsim.Policy{{Name: "generated", Document: json.RawMessage(policy)}}}
		if resourcePolicy != "" {
			req.ResourcePolicy = json.RawMessage(resourcePolicy)
		}
		d, err := e.Evaluate(context.Background(), req)
		if err != nil {
			t.Errorf("%s: %v", a.name, err)
			continue
		}
		if d.Allowed() != a.allowed {
			t.Errorf("%s: %s %s on %s: got %s, want allowed=%v\n  %s", a.name, principal, a.action, a.resource, d.Result, a.allowed, strings.Join(d.Why, "\n  "))
		}
	}
}

func TestEveryActionOfTheGeneratedPoliciesIsARealIAMAction(t *testing.T) {
	e := evaluator(t)
	var docs []string
	for _, h := range bundle.Handlers {
		p, err := functionPolicy(h, catTable, "", []string{catQueue}, "/ghrunner/github", "ghrunner-prod-"+h, catEnv, "/", false)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, p)
	}
	inVPC, err := functionPolicy(bundle.HandlerProvision, catTable, "", []string{catQueue}, "/ghrunner/github", "ghrunner-prod-provision", catEnv, "/", true)
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, inVPC)
	agent, err := agentPolicy(catTable, "", catEnv, "linux", "ghr-prod-agent")
	if err != nil {
		t.Fatal(err)
	}
	fn := catARN("lambda", "function:ghrunner-prod-refresh")
	bounded := catDeployment
	bounded.boundary = catIAM("policy/ci-boundary")
	docs = append(docs, agent, scheduleInvokePolicy(fn), scheduleTrustPolicy(fn), deployerPolicy(catDeployment), deployerPolicy(bounded))
	seen := 0
	for _, doc := range docs {
		var pd policyDocument
		if err := json.Unmarshal([]byte(doc), &pd); err != nil {
			t.Fatal(err)
		}
		for _, st := range pd.Statement {
			for _, action := range st.Action {
				seen++
				// Any resource will do: an action IAM does not know is an
				// error whatever the resource; a known one just is denied.
				_, err := e.Evaluate(context.Background(), iamsim.Request{Principal: catIAM("role/x"), Account: catAccount, Action: action, Resource: "*"})
				if err != nil && strings.Contains(err.Error(), "invalid.action") {
					t.Errorf("statement %s: %s is not an IAM action", st.Sid, action)
				}
			}
		}
	}
	if seen < 30 {
		t.Fatalf("only %d actions seen", seen)
	}
}

func TestTheProvisionRoleLaunchesTaggedAndNothingElse(t *testing.T) {
	e := evaluator(t)
	policy, err := functionPolicy(bundle.HandlerProvision, catTable, "", []string{catQueue}, "/ghrunner/github", "ghrunner-prod-provision", catEnv, "/", false)
	if err != nil {
		t.Fatal(err)
	}
	ours := tags("aws:RequestTag/", "ghr:environment", catEnv, "ghr:pool", "linux")
	launch := map[string][]string{"ec2:CreateAction": {"CreateFleet"}}
	poolRole := tags("aws:ResourceTag/", "ghr:environment", catEnv, "ghr:pool", "linux")
	runCatalogue(t, e, catSTS("assumed-role/ghr-prod-fn-provision/ghrunner-prod-provision"), policy, nil, []ask{
		{"the fleet it creates, tagged", "ec2:CreateFleet", catARN("ec2", "fleet/*"), ours, true},
		{"the fleet it creates, untagged (blocker 1)", "ec2:CreateFleet", catARN("ec2", "fleet/*"), nil, false},
		{"the instances it launches, tagged", "ec2:RunInstances", catARN("ec2", "instance/*"), ours, true},
		{"a spot request, untagged (an instant fleet cannot tag one; issue 30 blocker 1)", "ec2:RunInstances", catARN("ec2", "spot-instances-request/*"), nil, true},
		{"its own launch template", "ec2:CreateFleet", catARN("ec2", "launch-template/lt-1"), tags("aws:ResourceTag/", "ghr:environment", catEnv), true},
		{"another deployment's launch template", "ec2:CreateFleet", catARN("ec2", "launch-template/lt-2"), tags("aws:ResourceTag/", "ghr:environment", "staging"), false},
		{"tags at launch", "ec2:CreateTags", catARN("ec2", "instance/*"), iamsim.Merge(ours, launch), true},
		{"tag an instance that exists with its environment, to terminate it next (item 6)", "ec2:CreateTags", catARN("ec2", "instance/i-foreign"), ours, false},
		{"terminate its environment's instance", "ec2:TerminateInstances", catARN("ec2", "instance/i-1"), tags("aws:ResourceTag/", "ghr:environment", catEnv), true},
		{"terminate another environment's instance", "ec2:TerminateInstances", catARN("ec2", "instance/i-2"), tags("aws:ResourceTag/", "ghr:environment", "staging"), false},
		{"terminate an untagged instance", "ec2:TerminateInstances", catARN("ec2", "instance/i-3"), nil, false},
		{"start its environment's stopped instance (the stopped tier)", "ec2:StartInstances", catARN("ec2", "instance/i-1"), tags("aws:ResourceTag/", "ghr:environment", catEnv), true},
		{"start another environment's instance", "ec2:StartInstances", catARN("ec2", "instance/i-2"), tags("aws:ResourceTag/", "ghr:environment", "staging"), false},
		{"stop an instance (scale-down's)", "ec2:StopInstances", catARN("ec2", "instance/i-1"), tags("aws:ResourceTag/", "ghr:environment", catEnv), false},
		{"pass a pool role to EC2", "iam:PassRole", catIAM("role/ghr-prod-linux"), iamsim.Merge(poolRole, map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}), true},
		{"pass a pool role to Lambda", "iam:PassRole", catIAM("role/ghr-prod-linux"), iamsim.Merge(poolRole, map[string][]string{"iam:PassedToService": {"lambda.amazonaws.com"}}), false},
		{"pass a function role to EC2 (item 8)", "iam:PassRole", catIAM("role/ghr-prod-fn-provision"),
			iamsim.Merge(tags("aws:ResourceTag/", "ghr:environment", catEnv), map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}), false},
		{"pass a schedule role to EC2 (item 8)", "iam:PassRole", catIAM("role/ghr-prod-sched-refresh"),
			iamsim.Merge(tags("aws:ResourceTag/", "ghr:environment", catEnv, "ghr:schedule", "refresh"), map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}), false},
		{"read its table", "dynamodb:GetItem", catTable, nil, true},
		{"read another deployment's table", "dynamodb:GetItem", catARN("dynamodb", "table/ghr-staging"), nil, false},
		{"delete a record", "dynamodb:DeleteItem", catTable, nil, false},
		{"scan the table", "dynamodb:Scan", catTable, nil, false},
		{"receive from its pool queue", "sqs:ReceiveMessage", catQueue, nil, true},
		{"receive from another deployment's queue", "sqs:ReceiveMessage", catARN("sqs", "ghr-staging-linux"), nil, false},
		{"purge its pool queue", "sqs:PurgeQueue", catQueue, nil, false},
		{"read its GitHub parameter", "ssm:GetParameter", catARN("ssm", "parameter/ghrunner/github"), nil, true},
		{"read another parameter", "ssm:GetParameter", catARN("ssm", "parameter/other/secret"), nil, false},
		{"change a role", "iam:PutRolePolicy", catIAM("role/ghr-prod-linux"), nil, false},
		{"read the account's vCPU quota (preflight)", "servicequotas:GetServiceQuota", catARN("servicequotas", "ec2/L-1216C47A"), nil, true},
		{"ask for a larger quota", "servicequotas:RequestServiceQuotaIncrease", catARN("servicequotas", "ec2/L-1216C47A"), nil, false},
	})
}

// Refresh launches too (pre-warming), under the same launch rules as
// provision: tagged, from this deployment's templates, passing only pool
// roles; and it never receives pool messages.
func TestTheRefreshRoleLaunchesOnlyAsProvisionDoes(t *testing.T) {
	e := evaluator(t)
	policy, err := functionPolicy(bundle.HandlerRefresh, catTable, "", []string{catQueue}, "/ghrunner/github", "ghrunner-prod-refresh", catEnv, "/", false)
	if err != nil {
		t.Fatal(err)
	}
	ours := tags("aws:RequestTag/", "ghr:environment", catEnv, "ghr:pool", "linux")
	poolRole := tags("aws:ResourceTag/", "ghr:environment", catEnv, "ghr:pool", "linux")
	runCatalogue(t, e, catSTS("assumed-role/ghr-prod-fn-refresh/ghrunner-prod-refresh"), policy, nil, []ask{
		{"the fleet it creates, tagged", "ec2:CreateFleet", catARN("ec2", "fleet/*"), ours, true},
		{"the fleet it creates, untagged", "ec2:CreateFleet", catARN("ec2", "fleet/*"), nil, false},
		{"another deployment's launch template", "ec2:CreateFleet", catARN("ec2", "launch-template/lt-2"), tags("aws:ResourceTag/", "ghr:environment", "staging"), false},
		{"tag an instance that exists with its environment", "ec2:CreateTags", catARN("ec2", "instance/i-foreign"), ours, false},
		{"pass a pool role to EC2", "iam:PassRole", catIAM("role/ghr-prod-linux"), iamsim.Merge(poolRole, map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}), true},
		{"pass a function role to EC2", "iam:PassRole", catIAM("role/ghr-prod-fn-provision"),
			iamsim.Merge(tags("aws:ResourceTag/", "ghr:environment", catEnv), map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}), false},
		{"receive from its pool queue", "sqs:ReceiveMessage", catQueue, nil, false},
		{"send to its pool queue (a lost pool message)", "sqs:SendMessage", catQueue, nil, true},
	})
}

func TestScaleDownMarksOrphansAndTouchesNoOtherTag(t *testing.T) {
	e := evaluator(t)
	policy, err := functionPolicy(bundle.HandlerScaleDown, catTable, "", nil, "/ghrunner/github", "ghrunner-prod-scale-down", catEnv, "/", false)
	if err != nil {
		t.Fatal(err)
	}
	mine := tags("aws:ResourceTag/", "ghr:environment", catEnv)
	runCatalogue(t, e, catSTS("assumed-role/ghr-prod-fn-scale-down/ghrunner-prod-scale-down"), policy, nil, []ask{
		{"mark an orphan", "ec2:CreateTags", catARN("ec2", "instance/i-1"), iamsim.Merge(mine, tags("aws:RequestTag/", "ghr:orphan", "a-1", "ghr:github_runner_id", "7")), true},
		{"unmark an orphan", "ec2:DeleteTags", catARN("ec2", "instance/i-1"), iamsim.Merge(mine, map[string][]string{"aws:TagKeys": {"ghr:orphan"}}), true},
		{"rewrite ghr:environment (item 9)", "ec2:CreateTags", catARN("ec2", "instance/i-1"), iamsim.Merge(mine, tags("aws:RequestTag/", "ghr:environment", "staging")), false},
		{"remove ghr:environment (item 9)", "ec2:DeleteTags", catARN("ec2", "instance/i-1"), iamsim.Merge(mine, map[string][]string{"aws:TagKeys": {"ghr:environment"}}), false},
		{"delete every tag (no keys)", "ec2:DeleteTags", catARN("ec2", "instance/i-1"), mine, false},
		{"mark another environment's instance", "ec2:CreateTags", catARN("ec2", "instance/i-2"),
			iamsim.Merge(tags("aws:ResourceTag/", "ghr:environment", "staging"), tags("aws:RequestTag/", "ghr:orphan", "a-1")), false},
		{"send to a pool queue", "sqs:SendMessage", catQueue, nil, false},
		{"launch", "ec2:RunInstances", catARN("ec2", "instance/*"), tags("aws:RequestTag/", "ghr:environment", catEnv), false},
		{"stop an idle instance for the stopped tier", "ec2:StopInstances", catARN("ec2", "instance/i-1"), mine, true},
		{"stop another environment's instance", "ec2:StopInstances", catARN("ec2", "instance/i-2"), tags("aws:ResourceTag/", "ghr:environment", "staging"), false},
		{"start a stopped instance (provision's)", "ec2:StartInstances", catARN("ec2", "instance/i-1"), mine, false},
	})
}

func TestTheAgentReachesOnlyItsOwnInstance(t *testing.T) {
	e := evaluator(t)
	policy, err := agentPolicy(catTable, "", catEnv, "linux", "ghr-prod-agent")
	if err != nil {
		t.Fatal(err)
	}
	// An instance-profile session: aws:userid is <role id>:<instance id>,
	// and so is the key of the instance's record (state.InstanceKey).
	const role = "AROACATALOGUEPOOL0001"
	own := func(id string) map[string][]string {
		return map[string][]string{"dynamodb:LeadingKeys": {string(state.InstanceKey(role, id))}}
	}
	// writes carries the attributes an UpdateItem names (its key, update
	// and condition expressions: dynamodb:Attributes).
	writes := func(id string, attrs ...string) map[string][]string {
		return iamsim.Merge(own(id), map[string][]string{"dynamodb:Attributes": append([]string{"pk", "version"}, attrs...)})
	}
	self := map[string][]string{"ec2:SourceInstanceARN": {catARN("ec2", "instance/i-self")}, "aws:userid": {role + ":i-self"}}
	pool := tags("aws:ResourceTag/", "ghr:environment", catEnv, "ghr:pool", "linux")
	runCatalogue(t, e, catSTS("assumed-role/ghr-prod-linux/i-self"), policy, self, []ask{
		{"read its own record", "dynamodb:GetItem", catTable, own("i-self"), true},
		{"write a signal of its own record", "dynamodb:UpdateItem", catTable, writes("i-self", "signals", "state", "assignment"), true},
		{"beat its heartbeat", "dynamodb:UpdateItem", catTable, writes("i-self", "heartbeats", "heartbeatAt", "state"), true},
		{"extend its lease", "dynamodb:UpdateItem", catTable, writes("i-self", "threshold", "leaseAt", "leaseCap", "state", "assignment"), true},
		{"record its runner", "dynamodb:UpdateItem", catTable, writes("i-self", "githubRunnerId", "runnerName", "registration", "state", "assignment"), true},
		{"write its own record naming no attribute", "dynamodb:UpdateItem", catTable, own("i-self"), false},
		{"move its own record to another run (issue 29)", "dynamodb:UpdateItem", catTable, writes("i-self", "signals", "runId"), false},
		{"move its own record to another pool or owner", "dynamodb:UpdateItem", catTable, writes("i-self", "pool", "owner"), false},
		{"rename the instance its record is of", "dynamodb:UpdateItem", catTable, writes("i-self", "instanceId"), false},
		{"rewind its use count or just-in-time number", "dynamodb:UpdateItem", catTable, writes("i-self", "uses", "jitSeq"), false},
		{"reset what bounds its just-in-time requests (issue 36 item 1)", "dynamodb:UpdateItem", catTable, writes("i-self", "signals", "jitAt", "jitServed", "jitRefused"), false},
		{"make its last runner look minted a moment ago (issue 37 item 7)", "dynamodb:UpdateItem", catTable, writes("i-self", "signals", "jitMintedAt"), false},
		{"forget runners minted for it, so release leaves them registered", "dynamodb:UpdateItem", catTable, writes("i-self", "jitRunners"), false},
		{"put itself into the idle index", "dynamodb:UpdateItem", catTable, writes("i-self", "poolState"), false},
		// A listener finishes the release of an idle, unpooled record whose
		// lastRunId is one of its scale set's runs (issue 38).
		{"name a scale set's run as the one its last release ended", "dynamodb:UpdateItem", catTable, writes("i-self", "lastRunId"), false},
		// IAM cannot tell these from what its conditions read: refresh
		// judges them against leaseLimit and poolState (issue 36).
		{"forge its own state, lease and cap", "dynamodb:UpdateItem", catTable, writes("i-self", "state", "threshold", "leaseCap", "leaseAt"), true},
		{"move the lease the control plane gave it", "dynamodb:UpdateItem", catTable, writes("i-self", "leaseLimit"), false},
		{"move its launch time", "dynamodb:UpdateItem", catTable, writes("i-self", "launchedAt"), false},
		{"read another instance's record (item 7)", "dynamodb:GetItem", catTable, own("i-other"), false},
		{"write another instance's record (item 7)", "dynamodb:UpdateItem", catTable, writes("i-other", "signals"), false},
		{"read its record by the bare instance id", "dynamodb:GetItem", catTable, map[string][]string{"dynamodb:LeadingKeys": {"i-self"}}, false},
		{"write a record of another pool's role", "dynamodb:UpdateItem", catTable, map[string][]string{"dynamodb:LeadingKeys": {"AROAOTHERPOOLROLE0001:i-self"}, "dynamodb:Attributes": {"pk", "signals"}}, false},
		{"update without a key", "dynamodb:UpdateItem", catTable, nil, false},
		{"read a pool config item", "dynamodb:GetItem", catTable, map[string][]string{"dynamodb:LeadingKeys": {"pool#linux"}}, false},
		{"write a run item", "dynamodb:UpdateItem", catTable, map[string][]string{"dynamodb:LeadingKeys": {"run#1"}, "dynamodb:Attributes": {"pk", "signals"}}, false},
		// The status ghrunner status shows of a scale set is the listener's
		// word alone (issue 38 item 6).
		{"write a scale set's listener status", "dynamodb:UpdateItem", catTable, map[string][]string{"dynamodb:LeadingKeys": {state.ScaleSetStatusKey("linux")}, "dynamodb:Attributes": {"pk", "holder", "error"}}, false},
		{"put a scale set's listener status", "dynamodb:PutItem", catTable, map[string][]string{"dynamodb:LeadingKeys": {state.ScaleSetStatusKey("linux")}}, false},
		// The cost report counts what the control plane wrote (issue 41
		// item 2): the usage ledger and the span attributes of a record.
		{"write the usage ledger", "dynamodb:UpdateItem", catTable, map[string][]string{"dynamodb:LeadingKeys": {"usage#20260101T0000#0"}, "dynamodb:Attributes": {"pk", "spans"}}, false},
		{"read the usage ledger", "dynamodb:BatchGetItem", catTable, map[string][]string{"dynamodb:LeadingKeys": {"usage#20260101T0000#0"}}, false},
		{"relabel the state its time counts as", "dynamodb:UpdateItem", catTable, writes("i-self", "spanState", "state"), false},
		{"move when its state began", "dynamodb:UpdateItem", catTable, writes("i-self", "stateAt"), false},
		{"rewrite the span its last transition closed", "dynamodb:UpdateItem", catTable, writes("i-self", "prevState", "prevStateAt", "prevRunId"), false},
		{"put a record", "dynamodb:PutItem", catTable, own("i-self"), false},
		{"query the table", "dynamodb:Query", catTable, own("i-self"), false},
		{"scan the table", "dynamodb:Scan", catTable, nil, false},
		{"terminate itself", "ec2:TerminateInstances", catARN("ec2", "instance/i-self"), iamsim.Merge(pool, map[string][]string{"ec2:InstanceID": {"i-self"}}), true},
		{"terminate another instance of its pool", "ec2:TerminateInstances", catARN("ec2", "instance/i-other"), iamsim.Merge(pool, map[string][]string{"ec2:InstanceID": {"i-other"}}), false},
		{"write a stream of its pool's log group", "logs:PutLogEvents", catARN("logs", "log-group:/ghrunner/prod/linux:log-stream:i-self/agent"), nil, true},
		{"make a stream of its pool's log group", "logs:CreateLogStream", catARN("logs", "log-group:/ghrunner/prod/linux:log-stream:i-self/user-data"), nil, true},
		{"write another pool's log group", "logs:PutLogEvents", catARN("logs", "log-group:/ghrunner/prod/gpu:log-stream:i-self/agent"), nil, false},
		{"write a function's log group", "logs:PutLogEvents", catARN("logs", "log-group:/aws/lambda/ghrunner-prod-provision:log-stream:x"), nil, false},
		{"read its pool's logs", "logs:GetLogEvents", catARN("logs", "log-group:/ghrunner/prod/linux:log-stream:i-other/agent"), nil, false},
		{"delete a log stream", "logs:DeleteLogStream", catARN("logs", "log-group:/ghrunner/prod/linux:log-stream:i-other/agent"), nil, false},
		{"download the agent", "s3:GetObject", "arn:aws:s3:::ghr-prod-agent/agent/ghrunner-agent-linux-arm64", nil, true},
		{"read another object of the bucket", "s3:GetObject", "arn:aws:s3:::ghr-prod-agent/state/x", nil, false},
		{"read the GitHub credentials", "ssm:GetParameter", catARN("ssm", "parameter/ghrunner/github"), nil, false},
		{"send a pool message", "sqs:SendMessage", catQueue, nil, false},
		{"launch an instance", "ec2:RunInstances", catARN("ec2", "instance/*"), tags("aws:RequestTag/", "ghr:environment", catEnv), false},
		{"tag itself into another pool", "ec2:CreateTags", catARN("ec2", "instance/i-self"), iamsim.Merge(pool, tags("aws:RequestTag/", "ghr:pool", "gpu")), false},
	})
}

func TestScheduleRolesInvokeOneFunctionForTheirOwnAccount(t *testing.T) {
	e := evaluator(t)
	fn := catARN("lambda", "function:ghrunner-prod-refresh")
	runCatalogue(t, e, catSTS("assumed-role/ghr-prod-sched-refresh/s"), scheduleInvokePolicy(fn), nil, []ask{
		{"invoke its function", "lambda:InvokeFunction", fn, nil, true},
		{"invoke another function", "lambda:InvokeFunction", catARN("lambda", "function:ghrunner-prod-provision"), nil, false},
	})
	// The trust policy is the role's resource policy for sts:AssumeRole.
	trust := json.RawMessage(scheduleTrustPolicy(fn))
	role := catIAM("role/ghr-prod-sched-refresh")
	for _, c := range []struct {
		name    string
		context map[string][]string
		allowed bool
	}{
		{"Scheduler for a schedule of this account", map[string][]string{"aws:SourceAccount": {catAccount}, "aws:SourceArn": {catARN("scheduler", "schedule-group/default")}}, true},
		{"Scheduler for another account (confused deputy, item 9)", map[string][]string{"aws:SourceAccount": {"210987654321"}, "aws:SourceArn": {"arn:aws:scheduler:eu-west-1:210987654321:schedule-group/default"}}, false},
		{"Scheduler without a source", nil, false},
	} {
		d, err := e.Evaluate(context.Background(), iamsim.Request{Principal: "scheduler.amazonaws.com", Account: catAccount, Action: "sts:AssumeRole",
			Resource: role, Context: c.context, ResourcePolicy: trust})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if d.Allowed() != c.allowed {
			t.Errorf("%s: got %s, want allowed=%v\n  %s", c.name, d.Result, c.allowed, strings.Join(d.Why, "\n  "))
		}
	}
}

func TestATableKeyIsUsableOnlyThroughDynamoDB(t *testing.T) {
	e := evaluator(t)
	key := catARN("kms", "key/1234abcd-12ab-34cd-56ef-1234567890ab")
	fn, err := functionPolicy(bundle.HandlerRelease, catTable, key, []string{catQueue}, "/ghrunner/github", "ghrunner-prod-release", catEnv, "/", false)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := agentPolicy(catTable, key, catEnv, "linux", "")
	if err != nil {
		t.Fatal(err)
	}
	viaDynamo := map[string][]string{"kms:ViaService": {"dynamodb." + catRegion + ".amazonaws.com"}}
	// The key policy AWS gives a new key: IAM policies of the account decide.
	keyPolicy := `{"Version":"2012-10-17","Statement":[{"Sid":"Enable IAM User Permissions","Effect":"Allow",` +
		`"Principal":{"AWS":"arn:aws:iam::` + catAccount + `:root"},"Action":"kms:*","Resource":"*"}]}`
	for who, policy := range map[string]string{"release": fn, "agent": agent} {
		runCatalogueOn(t, e, catSTS("assumed-role/"+who+"/s"), policy, keyPolicy, nil, []ask{
			{who + " decrypts the table's data key through DynamoDB (item 3)", "kms:Decrypt", key, viaDynamo, true},
			{who + " makes a data key through DynamoDB (item 3)", "kms:GenerateDataKey", key, viaDynamo, true},
			{who + " decrypts with the table's key directly", "kms:Decrypt", key, map[string][]string{"kms:ViaService": {"s3." + catRegion + ".amazonaws.com"}}, false},
			{who + " uses another key through DynamoDB", "kms:Decrypt", catARN("kms", "key/other"), viaDynamo, false},
		})
	}
}

// Issue 30, item 8: a pool whose root volumes are encrypted with a customer
// managed key. EC2 uses the key with the launching role's permissions; the
// provision role may create grants for AWS resources on that key through
// EC2 and use it for data keys, and nothing else of KMS.
func TestTheProvisionRoleUsesThePoolsVolumeKeyThroughEC2Only(t *testing.T) {
	e := evaluator(t)
	policy, err := functionPolicy(bundle.HandlerProvision, catTable, "", []string{catQueue}, "/ghrunner/github", "ghrunner-prod-provision", catEnv, "/", false)
	if err != nil {
		t.Fatal(err)
	}
	key := catARN("kms", "key/1234abcd-12ab-34cd-56ef-1234567890ab")
	for _, st := range volumeKeyStatements([]string{key}, catRegion) {
		if policy, err = withStatement(policy, st); err != nil {
			t.Fatal(err)
		}
	}
	viaEC2 := map[string][]string{"kms:ViaService": {"ec2." + catRegion + ".amazonaws.com"}}
	grant := iamsim.Merge(viaEC2, map[string][]string{"kms:GrantIsForAWSResource": {"true"}})
	// The key policy AWS gives a new key: IAM policies of the account decide.
	keyPolicy := `{"Version":"2012-10-17","Statement":[{"Sid":"Enable IAM User Permissions","Effect":"Allow",` +
		`"Principal":{"AWS":"arn:aws:iam::` + catAccount + `:root"},"Action":"kms:*","Resource":"*"}]}`
	runCatalogueOn(t, e, catSTS("assumed-role/ghr-prod-fn-provision/ghrunner-prod-provision"), policy, keyPolicy, nil, []ask{
		{"a grant for the new volume, through EC2", "kms:CreateGrant", key, grant, true},
		{"a data key for the new volume, through EC2", "kms:GenerateDataKeyWithoutPlaintext", key, viaEC2, true},
		{"a grant for itself (not an AWS resource)", "kms:CreateGrant", key, iamsim.Merge(viaEC2, map[string][]string{"kms:GrantIsForAWSResource": {"false"}}), false},
		{"the key used directly, not through EC2", "kms:Decrypt", key, nil, false},
		{"another key", "kms:CreateGrant", catARN("kms", "key/ffffffff-12ab-34cd-56ef-1234567890ab"), grant, false},
		{"the key's policy changed", "kms:PutKeyPolicy", key, nil, false},
	})
}
