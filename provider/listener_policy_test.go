package provider

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/iamsim"
)

// The listener's roles, asked of the IAM evaluator: the task role does what
// provision and release do, writes its own log group and nothing of ECS or
// IAM beyond passing pool roles to EC2; the execution role pulls one
// repository's images and writes the log group.

const catListenerGroup = "/ghrunner/prod/listener"

func TestTheListenerRoleProvisionsAndReleasesAndNothingElse(t *testing.T) {
	e := evaluator(t)
	policy, err := listenerPolicy(catTable, "", []string{catQueue}, "/ghrunner/github", catListenerGroup, catEnv, "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	ours := tags("aws:RequestTag/", "ghr:environment", catEnv, "ghr:pool", "linux")
	poolRole := tags("aws:ResourceTag/", "ghr:environment", catEnv, "ghr:pool", "linux")
	listenerRole := tags("aws:ResourceTag/", "ghr:environment", catEnv)
	runCatalogue(t, e, catSTS("assumed-role/ghr-prod-eu-west-1-listener-task/task"), policy, nil, []ask{
		{"read its table", "dynamodb:GetItem", catTable, nil, true},
		{"read records in a batch (a pool's records in a state when it takes the session)", "dynamodb:BatchGetItem", catTable, nil, true},
		{"claim a run (update an item)", "dynamodb:UpdateItem", catTable, nil, true},
		{"query an index", "dynamodb:Query", catTable + "/index/byPool", nil, true},
		{"delete a record", "dynamodb:DeleteItem", catTable, nil, false},
		{"another deployment's table", "dynamodb:GetItem", catARN("dynamodb", "table/ghr-staging"), nil, false},
		{"receive from its pool queue", "sqs:ReceiveMessage", catQueue, nil, true},
		{"send to its pool queue (release)", "sqs:SendMessage", catQueue, nil, true},
		{"another deployment's queue", "sqs:SendMessage", catARN("sqs", "ghr-staging-linux"), nil, false},
		{"launch tagged", "ec2:RunInstances", catARN("ec2", "instance/*"), ours, true},
		{"launch untagged", "ec2:CreateFleet", catARN("ec2", "fleet/*"), nil, false},
		{"terminate its environment's instance", "ec2:TerminateInstances", catARN("ec2", "instance/i-1"), tags("aws:ResourceTag/", "ghr:environment", catEnv), true},
		{"terminate another environment's instance", "ec2:TerminateInstances", catARN("ec2", "instance/i-2"), tags("aws:ResourceTag/", "ghr:environment", "staging"), false},
		{"pass a pool role to EC2", "iam:PassRole", catIAM("role/ghr-prod-eu-west-1-linux"), iamsim.Merge(poolRole, map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}), true},
		{"pass its own role to ECS tasks", "iam:PassRole", catIAM("role/ghr-prod-eu-west-1-listener-task"),
			iamsim.Merge(listenerRole, map[string][]string{"iam:PassedToService": {"ecs-tasks.amazonaws.com"}}), false},
		{"pass its own role to EC2 (no ghr:pool tag)", "iam:PassRole", catIAM("role/ghr-prod-eu-west-1-listener-task"),
			iamsim.Merge(listenerRole, map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}), false},
		{"change a role", "iam:PutRolePolicy", catIAM("role/ghr-prod-eu-west-1-listener-task"), nil, false},
		{"read its GitHub parameter", "ssm:GetParameter", catARN("ssm", "parameter/ghrunner/github"), nil, true},
		{"read another parameter", "ssm:GetParameter", catARN("ssm", "parameter/other/secret"), nil, false},
		{"decrypt directly", "kms:Decrypt", catARN("kms", "key/k1"), nil, false},
		{"write its log group", "logs:PutLogEvents", catARN("logs", "log-group:"+catListenerGroup+":log-stream:listener/listener/abc"), nil, true},
		{"write a pool's log group", "logs:PutLogEvents", catARN("logs", "log-group:/ghrunner/prod/linux:log-stream:x"), nil, false},
		{"write a function's log group", "logs:PutLogEvents", catARN("logs", "log-group:/aws/lambda/ghrunner-prod-provision:log-stream:x"), nil, false},
		{"stop its own service", "ecs:UpdateService", catARN("ecs", "service/ghr-prod/ghr-prod-listener"), nil, false},
		{"run a task", "ecs:RunTask", catARN("ecs", "task-definition/ghr-prod-listener:1"), nil, false},
		{"push an image", "ecr:PutImage", catARN("ecr", "repository/ghr-prod-listener"), nil, false},
	})
}

func TestTheListenerExecutionRolePullsOneRepository(t *testing.T) {
	e := evaluator(t)
	repo := catARN("ecr", "repository/ghr-prod-listener")
	policy, err := listenerExecutionPolicy(catTable, repo, catListenerGroup)
	if err != nil {
		t.Fatal(err)
	}
	runCatalogue(t, e, catSTS("assumed-role/ghr-prod-eu-west-1-listener-exec/task"), policy, nil, []ask{
		{"log in to the registry", "ecr:GetAuthorizationToken", "*", nil, true},
		{"pull its image", "ecr:BatchGetImage", repo, nil, true},
		{"pull its layers", "ecr:GetDownloadUrlForLayer", repo, nil, true},
		{"pull another repository", "ecr:BatchGetImage", catARN("ecr", "repository/other"), nil, false},
		{"push to its repository", "ecr:PutImage", repo, nil, false},
		{"write its log group", "logs:CreateLogStream", catARN("logs", "log-group:"+catListenerGroup+":log-stream:listener/listener/abc"), nil, true},
		{"write another log group", "logs:CreateLogStream", catARN("logs", "log-group:/ghrunner/prod/linux:log-stream:x"), nil, false},
		{"read the table", "dynamodb:GetItem", catTable, nil, false},
	})
	// A user's image: the pull is the user's to grant, only the logs here.
	own, err := listenerExecutionPolicy(catTable, "", catListenerGroup)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(own, "ecr:") {
		t.Errorf("with image_uri the execution role still grants ECR: %s", own)
	}
}

func TestEveryActionOfTheListenerPoliciesIsARealIAMAction(t *testing.T) {
	e := evaluator(t)
	// No table key: its kms:GenerateDataKey* is a pattern, not an action.
	task, err := listenerPolicy(catTable, "", []string{catQueue}, "/ghrunner/github", catListenerGroup, catEnv, "/",
		[]string{"arn:aws:kms:eu-west-1:123456789012:key/v"})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := listenerExecutionPolicy(catTable, catARN("ecr", "repository/ghr-prod-listener"), catListenerGroup)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{task, exec, deployerPolicy(catDeployment)} {
		var pd policyDocument
		if err := json.Unmarshal([]byte(doc), &pd); err != nil {
			t.Fatal(err)
		}
		for _, st := range pd.Statement {
			for _, action := range st.Action {
				_, err := e.Evaluate(context.Background(), iamsim.Request{Principal: catIAM("role/x"), Account: catAccount, Action: action, Resource: "*"})
				if err != nil && strings.Contains(err.Error(), "invalid.action") {
					t.Errorf("statement %s: %s is not an IAM action", st.Sid, action)
				}
			}
		}
	}
}
