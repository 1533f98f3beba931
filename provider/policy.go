package provider

import (
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// IAM policy documents the provider attaches. They are plain data built by
// these functions: unit tests assert their statements, iam_catalogue_test.go
// asks a real IAM evaluator what they allow and forbid, and the sandbox
// enforces them on every request the product makes (docs/security.md, "IAM
// in the sandbox").

type policyDocument struct {
	Version   string            `json:"Version"`
	Statement []policyStatement `json:"Statement"`
}

type policyStatement struct {
	Sid       string                    `json:"Sid,omitempty"`
	Effect    string                    `json:"Effect"`
	Principal map[string]string         `json:"Principal,omitempty"`
	Action    []string                  `json:"Action"`
	Resource  []string                  `json:"Resource,omitempty"`
	Condition map[string]map[string]any `json:"Condition,omitempty"`
}

func (d policyDocument) String() string {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // only strings and maps of strings
	}
	return string(b)
}

// trustPolicy lets one AWS service assume a role, under conditions if any.
func trustPolicy(service string, condition map[string]map[string]any) string {
	return policyDocument{Version: "2012-10-17", Statement: []policyStatement{{
		Effect: "Allow", Principal: map[string]string{"Service": service}, Action: []string{"sts:AssumeRole"}, Condition: condition,
	}}}.String()
}

// samePolicy reports whether an IAM document (URL-encoded, as IAM returns it)
// says the same as want, whitespace and key order aside.
func samePolicy(encoded, want string) bool {
	doc, err := url.QueryUnescape(encoded)
	if err != nil {
		doc = encoded
	}
	return sameJSON(doc, want)
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// arnParts splits an ARN into partition, region and account.
type arnParts struct{ partition, region, account string }

func parseARN(arn string) (arnParts, error) {
	f := strings.SplitN(arn, ":", 6)
	if len(f) != 6 || f[0] != "arn" || f[1] == "" || f[4] == "" {
		return arnParts{}, fmt.Errorf("%q is not an ARN (arn:partition:service:region:account:resource)", arn)
	}
	return arnParts{partition: f[1], region: f[3], account: f[4]}, nil
}

// agentPolicy is the instance role's only policy. Every statement is an
// Allow: anything not listed is denied.
//   - the agent reads and updates its own instance record and nothing else:
//     records are keyed <role id>:<instance id> (state.InstanceKey), which
//     is ${aws:userid} of the instance-profile session EC2 gives the
//     instance, so LeadingKeys = ${aws:userid} matches exactly one item, the
//     caller's. Never pool, run, token or scale set status items, another
//     instance's record, puts, deletes, queries or scans. The Null clause
//     keeps ForAllValues from holding for a request without a key;
//   - of its record it may write only what the agent owns
//     (state.AgentAttributes: its signals, heartbeat, lease extension and
//     runner fields), never runId, pool, owner, instanceId, uses or jitSeq.
//     dynamodb:Attributes lists every top-level attribute a request names
//     (its key, update and condition expressions), so the list also holds
//     the attributes the agent's conditions read; the Null clause keeps
//     ForAllValues from holding for a request that names none. Reads are
//     not narrowed: the record is the instance's own. The control plane
//     still treats whatever an instance can write as a request about that
//     instance only (docs/security.md, T6);
//   - it terminates only itself: the calling instance's ARN must be the
//     target's (the target's id as a policy variable; a bare
//     ${ec2:SourceInstanceARN} in Resource is not in ARN format, which IAM
//     refuses), and the target must carry this environment's and pool's tags;
//   - it writes log streams of its pool's log group only (CreateLogStream,
//     PutLogEvents: no reading, no deleting, no other group). IAM cannot
//     narrow this to the instance's own streams: stream names cannot hold
//     the ':' of ${aws:userid} or ${ec2:SourceInstanceARN}, the only
//     variables naming the instance (docs/security.md, T2);
//   - it downloads only the agent.
func agentPolicy(tableARN, tableKey, environment, pool, agentBucket string) (string, error) {
	a, err := parseARN(tableARN)
	if err != nil {
		return "", fmt.Errorf("table arn: %w", err)
	}
	instances := fmt.Sprintf("arn:%s:ec2:%s:%s:instance/", a.partition, a.region, a.account)
	st := []policyStatement{
		{
			Sid: "ReadOwnInstanceRecord", Effect: "Allow",
			Action:   []string{"dynamodb:GetItem"},
			Resource: []string{tableARN},
			Condition: map[string]map[string]any{
				"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": []string{"${aws:userid}"}},
				"Null":                      {"dynamodb:LeadingKeys": "false"},
			},
		},
		{
			Sid: "WriteAgentFieldsOfOwnRecord", Effect: "Allow",
			Action:   []string{"dynamodb:UpdateItem"},
			Resource: []string{tableARN},
			Condition: map[string]map[string]any{
				"ForAllValues:StringEquals": {
					"dynamodb:LeadingKeys": []string{"${aws:userid}"},
					"dynamodb:Attributes":  state.AgentAttributes,
				},
				"Null": {"dynamodb:LeadingKeys": "false", "dynamodb:Attributes": "false"},
			},
		},
		{
			Sid: "TerminateItself", Effect: "Allow",
			Action:   []string{"ec2:TerminateInstances"},
			Resource: []string{instances + "*"},
			Condition: map[string]map[string]any{
				"ArnEquals": {"ec2:SourceInstanceARN": instances + "${ec2:InstanceID}"},
				"StringEquals": {
					"aws:ResourceTag/ghr:environment": environment,
					"aws:ResourceTag/ghr:pool":        pool,
				},
			},
		},
	}
	st = append(st, policyStatement{
		Sid: "PoolLogStreams", Effect: "Allow",
		Action:   []string{"logs:CreateLogStream", "logs:PutLogEvents"},
		Resource: []string{fmt.Sprintf("arn:%s:logs:%s:%s:log-group:%s:log-stream:*", a.partition, a.region, a.account, poolLogGroup(environment, pool))},
	})
	st = append(st, tableKeyStatement(tableKey, a.region)...)
	if agentBucket != "" {
		st = append(st, policyStatement{
			Sid: "DownloadAgent", Effect: "Allow",
			Action:   []string{"s3:GetObject"},
			Resource: []string{fmt.Sprintf("arn:%s:s3:::%s/agent/*", a.partition, agentBucket)},
		})
	}
	return policyDocument{Version: "2012-10-17", Statement: st}.String(), nil
}

// functionPolicy grants one handler what its code calls and nothing else:
// the table and its indexes, the pool queues, EC2 only on instances tagged
// with this environment (launches only through the deployment's templates
// and roles), the GitHub parameter, and its own log group.
func functionPolicy(handler, tableARN, tableKey string, queueARNs []string, parameter, functionName, environment, rolePath string, inVPC bool) (string, error) {
	a, err := parseARN(tableARN)
	if err != nil {
		return "", fmt.Errorf("table arn: %w", err)
	}
	arn := func(service, resource string) string {
		return fmt.Sprintf("arn:%s:%s:%s:%s:%s", a.partition, service, a.region, a.account, resource)
	}
	ours := map[string]map[string]any{"StringEquals": {"aws:ResourceTag/" + tagEnvironment: environment}}
	st := []policyStatement{
		// TransactWriteItems is not an IAM action: each part of a
		// transaction is authorized as PutItem or UpdateItem.
		{Sid: "StateTable", Effect: "Allow", Resource: []string{tableARN, tableARN + "/index/*"},
			Action: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:Query", "dynamodb:BatchGetItem"}},
		{Sid: "GitHubCredentials", Effect: "Allow", Action: []string{"ssm:GetParameter"},
			Resource: []string{arn("ssm", "parameter/"+strings.TrimPrefix(parameter, "/"))}},
		{Sid: "DecryptGitHubCredentials", Effect: "Allow", Action: []string{"kms:Decrypt"}, Resource: []string{arn("kms", "key/*")},
			Condition: map[string]map[string]any{"StringEquals": {"kms:ViaService": viaService("ssm", a.region)}}},
		{Sid: "Logs", Effect: "Allow", Action: []string{"logs:CreateLogStream", "logs:PutLogEvents"},
			Resource: []string{arn("logs", "log-group:/aws/lambda/"+functionName+":*")}},
	}
	if handler == bundle.HandlerJIT {
		// The stream consumer reads the table's stream (Lambda's event
		// source mapping polls it with this role) and touches no instance.
		st = append(st, policyStatement{Sid: "StateTableStream", Effect: "Allow", Resource: []string{tableARN + "/stream/*"},
			Action: []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}})
	} else {
		st = append(st,
			policyStatement{Sid: "ListInstances", Effect: "Allow", Action: []string{"ec2:DescribeInstances"}, Resource: []string{"*"}},
			policyStatement{Sid: "TerminateOwnInstances", Effect: "Allow", Action: []string{"ec2:TerminateInstances"},
				Resource: []string{arn("ec2", "instance/*")}, Condition: ours})
	}
	st = append(st, tableKeyStatement(tableKey, a.region)...)
	if inVPC {
		// Lambda attaches the function's network interfaces with the
		// execution role (what AWSLambdaVPCAccessExecutionRole grants; these
		// EC2 actions take no resource-level permissions but "*").
		st = append(st, policyStatement{Sid: "FunctionNetworkInterfaces", Effect: "Allow", Resource: []string{"*"},
			Action: []string{"ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
				"ec2:DescribeNetworkInterfaces", "ec2:UnassignPrivateIpAddresses"}})
	}
	// The stopped tier (issue 41): scale-down stops idle instances and
	// provision starts them, this environment's only, as they terminate.
	tier := map[string]struct{ sid, action string }{
		bundle.HandlerScaleDown: {"StopOwnInstances", "ec2:StopInstances"},
		bundle.HandlerProvision: {"StartOwnInstances", "ec2:StartInstances"},
	}
	if t, ok := tier[handler]; ok {
		st = append(st, policyStatement{Sid: t.sid, Effect: "Allow", Action: []string{t.action}, Resource: []string{arn("ec2", "instance/*")}, Condition: ours})
	}
	// Scale-down never touches the queues: a message of an instance it
	// terminated is dropped by the next provision's claim.
	actions := map[string][]string{
		bundle.HandlerProvision: {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:SendMessage"},
		bundle.HandlerRelease:   {"sqs:SendMessage"},
		bundle.HandlerRefresh:   {"sqs:SendMessage"},
	}[handler]
	if len(queueARNs) > 0 && len(actions) > 0 {
		st = append(st, policyStatement{Sid: "PoolQueues", Effect: "Allow", Action: actions, Resource: queueARNs})
	}
	switch handler {
	case bundle.HandlerProvision, bundle.HandlerRefresh:
		// Refresh launches too: it pre-warms pools within their idle
		// windows, through provision's launch path.
		requestTagged := map[string]any{"aws:RequestTag/" + tagEnvironment: environment}
		st = append(st,
			// What a launch creates (the fleet, its instances) must carry
			// this environment's tag from the start.
			policyStatement{Sid: "LaunchTagged", Effect: "Allow", Action: []string{"ec2:CreateFleet", "ec2:RunInstances"},
				Resource: []string{"*"}, Condition: map[string]map[string]any{"StringEquals": requestTagged}},
			// Tags only as part of a launch: never on an instance that
			// exists (which would make it this environment's, hence
			// terminable by it).
			policyStatement{Sid: "TagAtLaunch", Effect: "Allow", Action: []string{"ec2:CreateTags"}, Resource: []string{"*"},
				Condition: map[string]map[string]any{"StringEquals": requestTagged, "ForAnyValue:StringEquals": {"ec2:CreateAction": []string{"CreateFleet", "RunInstances"}}}},
			// Only this deployment's launch templates.
			policyStatement{Sid: "OwnLaunchTemplates", Effect: "Allow", Action: []string{"ec2:CreateFleet", "ec2:RunInstances"},
				Resource: []string{arn("ec2", "launch-template/*")}, Condition: ours},
			// A spot launch's spot requests come untagged: an instant
			// fleet cannot tag them, and a template that does breaks every
			// on-demand launch (pool_launch_template.go).
			policyStatement{Sid: "LaunchResources", Effect: "Allow", Action: []string{"ec2:CreateFleet", "ec2:RunInstances"},
				Resource: []string{arn("ec2", "subnet/*"), arn("ec2", "security-group/*"), arn("ec2", "network-interface/*"),
					arn("ec2", "volume/*"), arn("ec2", "spot-instances-request/*"), fmt.Sprintf("arn:%s:ec2:%s::image/*", a.partition, a.region)}},
			policyStatement{Sid: "TagVolumes", Effect: "Allow", Action: []string{"ec2:CreateTags"}, Resource: []string{arn("ec2", "volume/*")}},
			policyStatement{Sid: "ReadTemplates", Effect: "Allow", Action: []string{"ec2:DescribeLaunchTemplateVersions", "ec2:DescribeVolumes"}, Resource: []string{"*"}},
			// Only pool roles (tagged with their pool), never a function's
			// or a schedule's, and only to EC2.
			policyStatement{Sid: "PassInstanceRoles", Effect: "Allow", Action: []string{"iam:PassRole"},
				Resource: []string{fmt.Sprintf("arn:%s:iam::%s:role%sghr-%s-*", a.partition, a.account, rolePath, environment)},
				Condition: map[string]map[string]any{
					"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com", "aws:ResourceTag/" + tagEnvironment: environment},
					"Null":         {"aws:ResourceTag/" + tagPool: "false"},
				}},
			policyStatement{Sid: "SpotServiceRole", Effect: "Allow", Action: []string{"iam:CreateServiceLinkedRole"}, Resource: []string{"*"},
				Condition: map[string]map[string]any{"StringEquals": {"iam:AWSServiceName": "spot.amazonaws.com"}}},
		)
	}
	if handler == bundle.HandlerProvision {
		// Preflight compares each pool's maximum with the account's
		// vCPU quotas (lambdas/provision/quota.go): reads only.
		st = append(st, policyStatement{Sid: "ReadVCPUQuotas", Effect: "Allow", Action: []string{"servicequotas:GetServiceQuota", "ec2:DescribeInstanceTypes"},
			Resource: []string{"*"}})
	}
	switch handler {
	case bundle.HandlerScaleDown:
		// Only its own marks: never ghr:environment or any other tag.
		st = append(st, policyStatement{Sid: "OrphanTags", Effect: "Allow", Action: []string{"ec2:CreateTags", "ec2:DeleteTags"},
			Resource: []string{arn("ec2", "instance/*")}, Condition: map[string]map[string]any{
				"StringEquals":              ours["StringEquals"],
				"ForAllValues:StringEquals": {"aws:TagKeys": []string{fleet.TagOrphan, fleet.TagGithubRunnerID}},
				"Null":                      {"aws:TagKeys": "false"},
			}})
	}
	return policyDocument{Version: "2012-10-17", Statement: st}.String(), nil
}

// tableKeyStatement lets a role use the state table's KMS key, and only
// through DynamoDB: a table encrypted with a customer managed key refuses
// every read and write of a role without it. None for the AWS owned key.
func tableKeyStatement(key, region string) []policyStatement {
	if key == "" {
		return nil
	}
	return []policyStatement{{Sid: "StateTableKey", Effect: "Allow",
		Action:    []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*", "kms:DescribeKey"},
		Resource:  []string{key},
		Condition: map[string]map[string]any{"StringEquals": {"kms:ViaService": viaService("dynamodb", region)}}}}
}

// scheduleInvokePolicy is a schedule role's only policy: it may invoke
// exactly one function.
func scheduleInvokePolicy(functionARN string) string {
	return policyDocument{Version: "2012-10-17", Statement: []policyStatement{{
		Effect: "Allow", Action: []string{"lambda:InvokeFunction"}, Resource: []string{functionARN},
	}}}.String()
}

// withStatement adds a statement to a policy document.
func withStatement(doc string, st policyStatement) (string, error) {
	var d policyDocument
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return "", err
	}
	d.Statement = append(d.Statement, st)
	return d.String(), nil
}

// kmsKeyARNRE is a KMS key's ARN (not an alias: IAM matches grants on keys).
var kmsKeyARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:key/[A-Za-z0-9-]+$`)

// volumeKeyStatements let a launching role (provision, refresh) use the KMS
// keys pools encrypt their root volumes with: EC2 asks KMS, with the
// caller's permissions, for a grant for the new volume and for its data key
// (the EC2 User Guide's EBS encryption permissions: kms:CreateGrant for an
// AWS resource, kms:GenerateDataKeyWithoutPlaintext, kms:Decrypt,
// kms:DescribeKey and kms:ReEncrypt*), and only through EC2. Without them
// EC2 ends every instance at launch with Client.InternalError.
func volumeKeyStatements(keys []string, region string) []policyStatement {
	via := map[string]any{"kms:ViaService": viaService("ec2", region)}
	return []policyStatement{
		{Sid: "RootVolumeKeyGrants", Effect: "Allow", Action: []string{"kms:CreateGrant"}, Resource: keys,
			Condition: map[string]map[string]any{"StringEquals": via, "Bool": {"kms:GrantIsForAWSResource": "true"}}},
		{Sid: "RootVolumeKeyUse", Effect: "Allow", Resource: keys, Condition: map[string]map[string]any{"StringEquals": via},
			Action: []string{"kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncryptFrom", "kms:ReEncryptTo"}},
	}
}

// listenerPolicy is the listener task's role policy (ghrunner_listener):
// the scale-set listener provisions and releases runs through the very code
// of provision and release, so it gets provision's statements (a superset of
// release's: the table, the pool queues, launches tagged with this
// environment from its templates, PassRole of pool roles to EC2 only,
// terminating its environment's instances, the GitHub parameter through SSM
// and its KMS key, the table's key), and its logs go to its own group. No
// ecs:* (ECS runs the task with the execution role, not this one) and no
// iam:* beyond that PassRole.
func listenerPolicy(tableARN, tableKey string, queueARNs []string, parameter, logGroup, environment, rolePath string, volumeKeys []string) (string, error) {
	doc, err := functionPolicy(bundle.HandlerProvision, tableARN, tableKey, queueARNs, parameter, "", environment, rolePath, false)
	if err != nil {
		return "", err
	}
	var d policyDocument
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return "", err
	}
	a, _ := parseARN(tableARN) // functionPolicy parsed it
	for i := range d.Statement {
		if d.Statement[i].Sid == "Logs" {
			d.Statement[i].Resource = []string{logStreamsARN(a, logGroup)}
		}
	}
	if len(volumeKeys) > 0 {
		d.Statement = append(d.Statement, volumeKeyStatements(volumeKeys, a.region)...)
	}
	return d.String(), nil
}

// listenerExecutionPolicy is what ECS needs to start the listener's task
// (AmazonECSTaskExecutionRolePolicy, scoped): pull the image of one
// repository (GetAuthorizationToken takes no resource but "*") and write
// the container's output to its log group. repositoryARN is "" for a
// user-given image, whose pull permissions are the user's to grant.
func listenerExecutionPolicy(tableARN, repositoryARN, logGroup string) (string, error) {
	a, err := parseARN(tableARN)
	if err != nil {
		return "", fmt.Errorf("table arn: %w", err)
	}
	st := []policyStatement{
		{Sid: "Logs", Effect: "Allow", Action: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, Resource: []string{logStreamsARN(a, logGroup)}},
	}
	if repositoryARN != "" {
		st = append(st,
			policyStatement{Sid: "RegistryLogin", Effect: "Allow", Action: []string{"ecr:GetAuthorizationToken"}, Resource: []string{"*"}},
			policyStatement{Sid: "PullImage", Effect: "Allow", Action: []string{"ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"},
				Resource: []string{repositoryARN}})
	}
	return policyDocument{Version: "2012-10-17", Statement: st}.String(), nil
}

// logStreamsARN is the ARN of every stream of a log group.
func logStreamsARN(a arnParts, group string) string {
	return fmt.Sprintf("arn:%s:logs:%s:%s:log-group:%s:log-stream:*", a.partition, a.region, a.account, group)
}
