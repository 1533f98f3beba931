package sandbox_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// withoutStatement removes the statement sid from the one inline policy of
// the function's role and returns a func that puts the policy back.
func withoutStatement(t *testing.T, sb *sandbox.Sandbox, function, sid string) (restore func()) {
	t.Helper()
	put, err := sb.WithoutStatement(context.Background(), function, sid)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
}

// deniedWithoutLaunchStatement: the sandbox enforces the policies terraform
// deployed. With the provision role's statement that allows launching
// tagged resources removed, a provision that must launch fails with EC2's
// UnauthorizedOperation, nothing is launched, and the endpoint recorded the
// denial of ec2:CreateFleet. Put back, the same provision succeeds.
func deniedWithoutLaunchStatement(t *testing.T, sb *sandbox.Sandbox, d sandbox.Deployment, fn *lambda.Client) {
	ctx := context.Background()
	list := func() int {
		live, err := fleet.New(sb.AWS.EC2(), sandbox.Environment).List(ctx, fleet.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(live)
	}
	before := list()
	provision := d.Functions[bundle.HandlerProvision]
	restore := withoutStatement(t, sb, provision, "LaunchTagged")
	// Preflight finds it first, changing nothing.
	if checks := preflight(t, fn, provision); !strings.Contains(checks, `"check":"launch","pool":"linux","ok":false`) || !strings.Contains(checks, "UnauthorizedOperation") {
		t.Errorf("preflight without LaunchTagged: %s; want the launch check failed with UnauthorizedOperation", checks)
	}
	payload := `{"runId":"77002","pool":"linux","instanceCount":` + itoa(before+1) + `}`
	res, err := fn.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(provision), Payload: signed(t, fn, payload)})
	if err != nil {
		t.Fatal(err)
	}
	if res.FunctionError == nil || !strings.Contains(string(res.Payload), "UnauthorizedOperation") {
		t.Errorf("provision without LaunchTagged: FunctionError %v, payload %s; want EC2's UnauthorizedOperation", aws.ToString(res.FunctionError), res.Payload)
	}
	denied := sb.TakeDenials()
	if !slices.ContainsFunc(denied, func(d sandbox.Denial) bool { return d.Action == "ec2:CreateFleet" }) {
		t.Errorf("denials %v, want ec2:CreateFleet", denied)
	}
	if n := list(); n != before {
		t.Errorf("%d instances after the refused launch, want %d", n, before)
	}
	restore()
	if checks := preflight(t, fn, provision); !strings.HasPrefix(checks, "preflight-ok") || !strings.Contains(checks, `"check":"terminate","pool":"linux","ok":true,"detail":"i-`) {
		t.Errorf("preflight with the policy restored: %s; want every check passed, the terminate check tried on an instance", checks)
	}
	var out struct{ Status string }
	invoke(t, fn, provision, `{"runId":"77003","pool":"linux","instanceCount":`+itoa(before+1)+`}`, &out)
	if out.Status != "ready" {
		t.Errorf("provision with the policy restored: %+v", out)
	}
}

// preflight invokes provision with {"preflight": true} and returns its
// status and checks, as text for the assertions.
func preflight(t *testing.T, fn *lambda.Client, provision string) string {
	t.Helper()
	var out struct {
		Status string
		Checks json.RawMessage
	}
	invoke(t, fn, provision, `{"preflight": true}`, &out)
	return out.Status + " " + string(out.Checks)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// eachInstanceReachesOnlyItsOwnRecord: records are keyed <role id>:<instance
// id> and the instance role allows only the key that is its session's
// aws:userid. With one instance's credentials, as its metadata service
// gives them, the endpoint lets it read and write its own record and
// denies another instance's record (read or write) and its own by the bare
// instance id (the endpoint answers before moto sees the request).
func eachInstanceReachesOnlyItsOwnRecord(t *testing.T, sb *sandbox.Sandbox, d sandbox.Deployment, ids []string) {
	ctx := context.Background()
	if len(ids) < 2 {
		t.Fatalf("need two instances, have %v", ids)
	}
	self, other := ids[0], ids[1]
	store := state.New(sb.AWS.DynamoDB(), d.Table)
	mine, err := store.FindInstance(ctx, self)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := store.FindInstance(ctx, other) // its agent's heartbeats keep changing it: the key is what matters
	if err != nil {
		t.Fatal(err)
	}
	roleName, creds, err := sb.InstanceCredentials(self)
	if err != nil {
		t.Fatal(err)
	}
	role, err := admin.IAM(sb.AWS).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
	if err != nil {
		t.Fatal(err)
	}
	if want := state.InstanceKey(aws.ToString(role.Role.RoleId), self); mine.Key != want {
		t.Fatalf("record of %s is keyed %s, want %s (its instance role's id and the instance id)", self, mine.Key, want)
	}
	cfg, err := awsconf.Load(ctx, awsconf.Options{Region: sandbox.Region, Endpoint: sb.URL, MaxAttempts: 1,
		AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey, SessionToken: creds.Token})
	if err != nil {
		t.Fatal(err)
	}
	stolen := state.New(cfg.DynamoDB(), d.Table)
	if _, err := stolen.Get(ctx, mine.Key); err != nil {
		t.Errorf("%s reading its own record: %v", self, err)
	}
	if err := stolen.Heartbeat(ctx, mine.Key); err != nil {
		t.Errorf("%s writing its own record: %v", self, err)
	}
	sb.TakeDenials()
	for _, c := range []struct {
		what string
		do   func() error
	}{
		{"read " + other + "'s record", func() error { _, err := stolen.Get(ctx, theirs.Key); return err }},
		{"write " + other + "'s record", func() error { return stolen.Heartbeat(ctx, theirs.Key) }},
		{"read its record by the bare instance id", func() error { _, err := stolen.Get(ctx, state.Key(self)); return err }},
	} {
		if err := c.do(); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
			t.Errorf("%s with %s's credentials: %v, want AccessDenied", c.what, self, err)
		}
	}
	if denied := sb.TakeDenials(); len(denied) != 3 || !slices.ContainsFunc(denied, func(d sandbox.Denial) bool { return d.Action == "dynamodb:UpdateItem" }) {
		t.Errorf("denials %v, want the 3 refused requests", denied)
	}
	ownRecordWritesOnlyAgentFields(t, sb, cfg.DynamoDB(), d.Table, mine.Key)
}

// ownRecordWritesOnlyAgentFields: with an instance's own credentials, each
// attribute the control plane decides by (issue 29: runId, pool, owner,
// instanceId, uses, jitSeq, poolState) cannot be written into its own
// record, even with no condition at all; a signal can. Without the
// policy's dynamodb:Attributes condition every write here is allowed.
func ownRecordWritesOnlyAgentFields(t *testing.T, sb *sandbox.Sandbox, db *dynamodb.Client, table string, key state.Key) {
	ctx := context.Background()
	set := func(attr string, v types.AttributeValue) error {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(table),
			Key:                       map[string]types.AttributeValue{state.AttrPK: &types.AttributeValueMemberS{Value: string(key)}},
			UpdateExpression:          aws.String("SET #a = :v"),
			ExpressionAttributeNames:  map[string]string{"#a": attr},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": v},
		})
		return err
	}
	str := func(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
	num := func(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }
	sb.TakeDenials()
	forged := map[string]types.AttributeValue{"runId": str("someone-elses-run"), "pool": str("gpu"), "owner": str("other-org"),
		"instanceId": str("i-0another"), "uses": num("0"), "jitSeq": num("0"), "poolState": str("linux#idle")}
	for attr, v := range forged {
		if err := set(attr, v); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
			t.Errorf("an instance setting %s of its own record: %v, want AccessDenied", attr, err)
		}
	}
	if denied := sb.TakeDenials(); len(denied) != len(forged) {
		t.Errorf("denials %v, want the %d refused writes", denied, len(forged))
	}
	if err := set("heartbeatAt", num("1")); err != nil {
		t.Errorf("an instance writing its heartbeat time: %v", err)
	}
}

// instanceLogsReachThePoolsLogGroup: each instance's agent sends its own log
// and the user data's output to streams named after the instance in its
// pool's log group, through the endpoint that enforces the instance role's
// policy (a denied PutLogEvents would show among the denials).
func instanceLogsReachThePoolsLogGroup(t *testing.T, sb *sandbox.Sandbox, id string) {
	ctx := context.Background()
	logs := admin.Logs(sb.AWS)
	group := "/ghrunner/" + sandbox.Environment + "/linux"
	read := func(stream string) string {
		var text strings.Builder
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			res, err := logs.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String(group), LogStreamName: aws.String(stream), StartFromHead: aws.Bool(true)})
			if err == nil && len(res.Events) > 0 {
				for _, e := range res.Events {
					text.WriteString(aws.ToString(e.Message) + "\n")
				}
				return text.String()
			}
			time.Sleep(time.Second) // the agent sends every few seconds
		}
		return ""
	}
	if agent := read(id + "/agent"); !strings.Contains(agent, `"msg":"agent starting"`) || !strings.Contains(agent, id) {
		t.Errorf("stream %s/agent of %s: %q; want the agent's JSON log", id, group, agent)
	}
	if ud := read(id + "/user-data"); !strings.Contains(ud, "ghrunner-userdata: agent started") {
		t.Errorf("stream %s/user-data of %s: %q; want the user data's output", id, group, ud)
	}
	for _, d := range sb.Denials() {
		if strings.HasPrefix(d.Action, "logs:") {
			t.Errorf("log shipping denied: %v", d)
		}
	}
}
