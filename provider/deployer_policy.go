package provider

import (
	"encoding/json"
	"fmt"
	"sort"
)

// The deployer's policy: what the identity that runs terraform apply and
// destroy of modules/runner-pool needs, and no more — every call the
// provider's resources make, scoped to the deployment's names (the module's
// name prefix, the environment's roles under the role path, its agent
// buckets) or to its ghr:environment tag where names are not the
// provider's to choose (launch templates, instances). Organizations that let
// no one hold AdministratorAccess give this to their CI's deployer role
// (data ghrunner_deployer_policy renders it).

// deployment is what the deployer policy is scoped to.
type deployment struct {
	partition, account, region string
	environment                string
	namePrefix                 string // the module's prefix: table, queues, functions, log groups, schedules
	rolePath, boundary         string // the provider's iam_role_path ("/" unless set) and iam_permissions_boundary
}

// deployerPolicy renders d's deployer policy.
func deployerPolicy(d deployment) string {
	arn := func(service, resource string) string {
		return fmt.Sprintf("arn:%s:%s:%s:%s:%s", d.partition, service, d.region, d.account, resource)
	}
	global := func(service, resource string) string {
		return fmt.Sprintf("arn:%s:%s::%s:%s", d.partition, service, d.account, resource)
	}
	roles := []string{global("iam", "role"+d.rolePath+"ghr-"+d.environment+"-*"), global("iam", "instance-profile"+d.rolePath+"ghr-"+d.environment+"-*")}
	tagged := map[string]map[string]any{"StringEquals": {"aws:ResourceTag/" + tagEnvironment: d.environment}}
	tagging := map[string]map[string]any{"StringEquals": {"aws:RequestTag/" + tagEnvironment: d.environment}}
	buckets := fmt.Sprintf("arn:%s:s3:::ghr-%s-agent-*", d.partition, d.environment)

	roleActions := []string{"iam:GetRole", "iam:DeleteRole", "iam:TagRole", "iam:UntagRole", "iam:PutRolePolicy", "iam:GetRolePolicy",
		"iam:DeleteRolePolicy", "iam:UpdateAssumeRolePolicy", "iam:CreateInstanceProfile", "iam:GetInstanceProfile", "iam:DeleteInstanceProfile",
		"iam:TagInstanceProfile", "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile"}
	st := []policyStatement{}
	if d.boundary == "" {
		roleActions = append(roleActions, "iam:CreateRole", "iam:PutRolePermissionsBoundary", "iam:DeleteRolePermissionsBoundary")
	} else {
		// A role may be made, or its boundary set, only with the boundary:
		// the deployer cannot make a role that escapes it.
		st = append(st, policyStatement{Sid: "RolesOnlyWithTheBoundary", Effect: "Allow", Action: []string{"iam:CreateRole", "iam:PutRolePermissionsBoundary"},
			Resource: roles[:1], Condition: map[string]map[string]any{"StringEquals": {"iam:PermissionsBoundary": d.boundary}}})
	}
	sort.Strings(roleActions)
	st = append(st,
		policyStatement{Sid: "DeploymentRoles", Effect: "Allow", Action: roleActions, Resource: roles},
		// Execution roles to Lambda, schedule roles to Scheduler and the
		// listener's task and execution roles to ECS tasks; pool
		// roles are passed by provision at launch, never by the deployer.
		// ghrunner_invoker_role's identity provider for GitHub's tokens
		// (github.com's issuer, or a GitHub Enterprise Server's).
		policyStatement{Sid: "GitHubOIDCProvider", Effect: "Allow", Resource: []string{global("iam", "oidc-provider/*")},
			Action: []string{"iam:CreateOpenIDConnectProvider", "iam:DeleteOpenIDConnectProvider", "iam:GetOpenIDConnectProvider", "iam:TagOpenIDConnectProvider"}},
		policyStatement{Sid: "PassDeploymentRoles", Effect: "Allow", Action: []string{"iam:PassRole"}, Resource: roles[:1],
			Condition: map[string]map[string]any{"StringEquals": {"iam:PassedToService": []string{"lambda.amazonaws.com", "scheduler.amazonaws.com", "ecs-tasks.amazonaws.com"}}}},
		policyStatement{Sid: "Functions", Effect: "Allow", Resource: []string{arn("lambda", "function:"+d.namePrefix+"-*")},
			Action: []string{"lambda:CreateFunction", "lambda:DeleteFunction", "lambda:DeleteFunctionConcurrency", "lambda:GetFunction",
				"lambda:GetFunctionConcurrency", "lambda:GetFunctionEventInvokeConfig", "lambda:ListTags", "lambda:PutFunctionConcurrency",
				"lambda:PutFunctionEventInvokeConfig", "lambda:DeleteFunctionEventInvokeConfig", "lambda:TagResource", "lambda:UntagResource", "lambda:UpdateFunctionCode", "lambda:UpdateFunctionConfiguration"}},
		// The jit function's source, the table's stream: mappings are
		// created and deleted for the deployment's functions only.
		policyStatement{Sid: "StreamSources", Effect: "Allow", Resource: []string{"*"},
			Action:    []string{"lambda:CreateEventSourceMapping"},
			Condition: map[string]map[string]any{"StringLike": {"lambda:FunctionArn": arn("lambda", "function:"+d.namePrefix+"-*")}}},
		policyStatement{Sid: "StreamSourceChanges", Effect: "Allow", Resource: []string{arn("lambda", "event-source-mapping:*")},
			Action:    []string{"lambda:DeleteEventSourceMapping"},
			Condition: map[string]map[string]any{"StringLike": {"lambda:FunctionArn": arn("lambda", "function:"+d.namePrefix+"-*")}}},
		policyStatement{Sid: "ListStreamSources", Effect: "Allow", Resource: []string{"*"}, Action: []string{"lambda:ListEventSourceMappings"}},
		policyStatement{Sid: "FunctionLogs", Effect: "Allow", Resource: []string{arn("logs", "log-group:/aws/lambda/"+d.namePrefix+"-*")},
			Action: []string{"logs:CreateLogGroup", "logs:DeleteLogGroup", "logs:PutRetentionPolicy", "logs:TagLogGroup", "logs:TagResource", "logs:UntagResource"}},
		policyStatement{Sid: "PoolLogs", Effect: "Allow", Resource: []string{arn("logs", "log-group:"+poolLogGroup(d.environment, "*"))},
			Action: []string{"logs:CreateLogGroup", "logs:DeleteLogGroup", "logs:PutRetentionPolicy", "logs:TagLogGroup", "logs:TagResource", "logs:UntagResource"}},
		policyStatement{Sid: "AlarmTopics", Effect: "Allow", Resource: []string{arn("sns", d.namePrefix+"-*")},
			Action: []string{"sns:CreateTopic", "sns:DeleteTopic", "sns:GetTopicAttributes", "sns:ListSubscriptionsByTopic", "sns:Subscribe", "sns:Unsubscribe", "sns:TagResource"}},
		policyStatement{Sid: "ListLogGroups", Effect: "Allow", Action: []string{"logs:DescribeLogGroups"}, Resource: []string{arn("logs", "log-group:*")}},
		policyStatement{Sid: "Schedules", Effect: "Allow", Resource: []string{arn("scheduler", "schedule/"+scheduleGroup+"/"+d.namePrefix+"-*")},
			Action: []string{"scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule", "scheduler:UpdateSchedule"}},
		policyStatement{Sid: "StateTable", Effect: "Allow", Resource: []string{arn("dynamodb", "table/"+d.namePrefix+"-*"), arn("dynamodb", "table/"+d.namePrefix+"-*/index/*")},
			Action: []string{"dynamodb:BatchGetItem", "dynamodb:CreateTable", "dynamodb:DeleteItem", "dynamodb:DeleteTable", "dynamodb:DescribeContinuousBackups",
				"dynamodb:DescribeTable", "dynamodb:DescribeTimeToLive", "dynamodb:GetItem", "dynamodb:ListTagsOfResource", "dynamodb:PutItem", "dynamodb:Query",
				"dynamodb:TagResource", "dynamodb:UntagResource", "dynamodb:UpdateContinuousBackups", "dynamodb:UpdateItem", "dynamodb:UpdateTable", "dynamodb:UpdateTimeToLive"}},
		// A table encrypted with the team's key: DynamoDB checks the key
		// with the caller's permissions when the table is made.
		policyStatement{Sid: "StateTableKey", Effect: "Allow", Resource: []string{arn("kms", "key/*")},
			Action:    []string{"kms:CreateGrant", "kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey"},
			Condition: map[string]map[string]any{"StringEquals": {"kms:ViaService": viaService("dynamodb", d.region)}}},
		policyStatement{Sid: "PoolQueues", Effect: "Allow", Resource: []string{arn("sqs", d.namePrefix+"-*")},
			Action: []string{"sqs:CreateQueue", "sqs:DeleteQueue", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ListQueueTags",
				"sqs:SetQueueAttributes", "sqs:TagQueue", "sqs:UntagQueue"}},
		policyStatement{Sid: "AgentBuckets", Effect: "Allow", Resource: []string{buckets},
			Action: []string{"s3:CreateBucket", "s3:DeleteBucket", "s3:ListBucket", "s3:PutBucketPublicAccessBlock", "s3:PutBucketTagging"}},
		policyStatement{Sid: "AgentObjects", Effect: "Allow", Resource: []string{buckets + "/*"},
			Action: []string{"s3:DeleteObject", "s3:GetObject", "s3:PutObject"}},
		// Launch templates and instances carry no name of ours: the
		// environment's tag says whose they are, given at creation.
		policyStatement{Sid: "CreateTaggedTemplates", Effect: "Allow", Action: []string{"ec2:CreateLaunchTemplate"},
			Resource: []string{arn("ec2", "launch-template/*")}, Condition: tagging},
		policyStatement{Sid: "TagTemplatesAtCreation", Effect: "Allow", Action: []string{"ec2:CreateTags"}, Resource: []string{arn("ec2", "launch-template/*")},
			Condition: map[string]map[string]any{"StringEquals": {"ec2:CreateAction": "CreateLaunchTemplate", "aws:RequestTag/" + tagEnvironment: d.environment}}},
		policyStatement{Sid: "OwnTemplates", Effect: "Allow", Action: []string{"ec2:CreateLaunchTemplateVersion", "ec2:DeleteLaunchTemplate", "ec2:ModifyLaunchTemplate"},
			Resource: []string{arn("ec2", "launch-template/*")}, Condition: tagged},
		// A pool's destroy terminates what is left of the pool.
		policyStatement{Sid: "TerminateOwnInstances", Effect: "Allow", Action: []string{"ec2:TerminateInstances"},
			Resource: []string{arn("ec2", "instance/*")}, Condition: tagged},
		policyStatement{Sid: "Describe", Effect: "Allow", Resource: []string{"*"},
			// Lambda checks a function's subnets and security groups with
			// the caller's permissions.
			Action: []string{"ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeLaunchTemplateVersions", "ec2:DescribeLaunchTemplates",
				"ec2:DescribeInstanceTypes", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets", "ec2:DescribeVpcs"}},
		// ghrunner_monitoring: the dashboard named by the prefix and its
		// alarms (a dashboard's ARN has no region).
		policyStatement{Sid: "Monitoring", Effect: "Allow", Action: []string{"cloudwatch:PutDashboard", "cloudwatch:GetDashboard", "cloudwatch:DeleteDashboards"},
			Resource: []string{global("cloudwatch", "dashboard/"+d.namePrefix+"*")}},
		policyStatement{Sid: "MonitoringAlarms", Effect: "Allow", Action: []string{"cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms"},
			Resource: []string{arn("cloudwatch", "alarm:"+d.namePrefix+"-*")}},
		policyStatement{Sid: "ListAlarms", Effect: "Allow", Action: []string{"cloudwatch:DescribeAlarms"}, Resource: []string{"*"}},
		// ghrunner_listener: its repository (made, pushed to, deleted), its
		// cluster and its service, named by the environment. The task
		// definition calls take no resource but "*" (ECS's service
		// authorization reference); the first service of an account makes
		// ECS's service-linked role.
		policyStatement{Sid: "ListenerRepository", Effect: "Allow", Resource: []string{arn("ecr", "repository/"+listenerName(d.environment))},
			Action: []string{"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:CompleteLayerUpload", "ecr:CreateRepository", "ecr:DeleteRepository",
				"ecr:DescribeRepositories", "ecr:InitiateLayerUpload", "ecr:PutImage", "ecr:TagResource", "ecr:UntagResource", "ecr:UploadLayerPart"}},
		policyStatement{Sid: "RegistryLogin", Effect: "Allow", Action: []string{"ecr:GetAuthorizationToken"}, Resource: []string{"*"}},
		policyStatement{Sid: "ListenerCluster", Effect: "Allow", Resource: []string{arn("ecs", "cluster/ghr-"+d.environment)},
			Action: []string{"ecs:CreateCluster", "ecs:DeleteCluster", "ecs:DescribeClusters", "ecs:TagResource", "ecs:UntagResource"}},
		policyStatement{Sid: "ListenerService", Effect: "Allow", Resource: []string{arn("ecs", "service/*/"+listenerName(d.environment))},
			Action: []string{"ecs:CreateService", "ecs:DeleteService", "ecs:DescribeServices", "ecs:TagResource", "ecs:UntagResource", "ecs:UpdateService"}},
		policyStatement{Sid: "ListenerTaskDefinitions", Effect: "Allow", Resource: []string{"*"},
			Action: []string{"ecs:DeregisterTaskDefinition", "ecs:DescribeTaskDefinition", "ecs:ListTaskDefinitions", "ecs:RegisterTaskDefinition", "ecs:TagResource"}},
		policyStatement{Sid: "ECSServiceRole", Effect: "Allow", Action: []string{"iam:CreateServiceLinkedRole"}, Resource: []string{"*"},
			Condition: map[string]map[string]any{"StringEquals": {"iam:AWSServiceName": "ecs.amazonaws.com"}}},
		// A pool without image_id reads the latest image's id from its
		// publisher's public parameter (no account in its ARN).
		policyStatement{Sid: "PublicImageParameters", Effect: "Allow", Action: []string{"ssm:GetParameter"},
			Resource: []string{fmt.Sprintf("arn:%s:ssm:%s::parameter/aws/service/*", d.partition, d.region)}},
	)
	return policyDocument{Version: "2012-10-17", Statement: st}.String()
}

// IAM's quotas on policy size, in characters, white space not counted (IAM
// User Guide, "IAM and AWS STS quotas"): a customer managed policy holds
// 6,144; the inline policies of one role 10,240 together, of one user
// 2,048. The deployer policy is larger than one managed policy.
const managedPolicyLimit = 6144

// splitPolicy cuts a policy document into documents of whole statements,
// each within limit characters, in order: together they allow exactly what
// the one document does (IAM allows what any attached policy allows).
func splitPolicy(doc string, limit int) ([]string, error) {
	var pd policyDocument
	if err := json.Unmarshal([]byte(doc), &pd); err != nil {
		return nil, err
	}
	var out []string
	var cur []policyStatement
	size := func(st []policyStatement) int {
		return len(policyDocument{Version: pd.Version, Statement: st}.String())
	}
	for _, st := range pd.Statement {
		if size([]policyStatement{st}) > limit {
			return nil, fmt.Errorf("statement %s alone is %d characters, over %d", st.Sid, size([]policyStatement{st}), limit)
		}
		if len(cur) > 0 && size(append(cur[:len(cur):len(cur)], st)) > limit {
			out = append(out, policyDocument{Version: pd.Version, Statement: cur}.String())
			cur = nil
		}
		cur = append(cur, st)
	}
	if len(cur) > 0 {
		out = append(out, policyDocument{Version: pd.Version, Statement: cur}.String())
	}
	return out, nil
}
