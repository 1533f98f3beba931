// ECS in the sandbox, without terraform: the real AWS SDK against the
// front endpoint creates what the provider's ghrunner_listener resource
// creates (a repository and its image, roles, a cluster, a task definition,
// a service), and the sandbox runs the service's task as a process.
package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/image"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

// testImage is the ecstask program (testdata/ecstask) built as the
// listener's image is.
func testImage(t *testing.T) []byte {
	t.Helper()
	bin, err := testbin.Build(testbin.Module + "/internal/sandbox/testdata/ecstask")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// taskReport is what testdata/ecstask writes when it starts.
type taskReport struct {
	PID              int               `json:"pid"`
	Hostname         string            `json:"hostname"`
	Env              map[string]string `json:"env"`
	AccessKeyID      string            `json:"accessKeyId"`
	Source           string            `json:"source"`
	CredentialsError string            `json:"credentialsError"`
	Parameter        string            `json:"parameter"`
	ParameterError   string            `json:"parameterError"`
}

func TestAnECSServiceRunsOneTaskOfItsTaskDefinitionAsAProcessWithTheTaskRole(t *testing.T) {
	t.Parallel()
	sb, cfg := bare(t)
	ctx := context.Background()
	out := t.TempDir()

	// The task role may read one parameter; the task reads it with the
	// credentials ECS's endpoint gives.
	const param = "/ecstest/greeting"
	if _, err := cfg.SSM().PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(param), Value: aws.String("hello from ssm"), Type: ssmtypes.ParameterTypeString}); err != nil {
		t.Fatal(err)
	}
	roles := admin.IAM(cfg)
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ecs-tasks.amazonaws.com"},"Action":"sts:AssumeRole"}]}`
	taskRole, err := roles.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("listener-task"), AssumeRolePolicyDocument: aws.String(trust)})
	if err != nil {
		t.Fatal(err)
	}
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ssm:GetParameter","Resource":"arn:aws:ssm:%s:*:parameter%s"}]}`, sandbox.Region, param)
	if _, err := roles.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("listener-task"), PolicyName: aws.String("read"), PolicyDocument: aws.String(policy)}); err != nil {
		t.Fatal(err)
	}
	// The execution role pulls the image and writes the logs, as the
	// actions AmazonECSTaskExecutionRolePolicy grants.
	execRole, err := roles.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("listener-execution"), AssumeRolePolicyDocument: aws.String(trust)})
	if err != nil {
		t.Fatal(err)
	}
	execPolicy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":"ecr:GetAuthorizationToken","Resource":"*"},
		{"Effect":"Allow","Action":["ecr:BatchGetImage","ecr:GetDownloadUrlForLayer","ecr:BatchCheckLayerAvailability"],"Resource":"arn:aws:ecr:%[1]s:*:repository/listener"},
		{"Effect":"Allow","Action":["logs:CreateLogStream","logs:PutLogEvents"],"Resource":"arn:aws:logs:%[1]s:*:log-group:/ghrunner/listener:*"}]}`, sandbox.Region)
	if _, err := roles.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("listener-execution"), PolicyName: aws.String("pull"), PolicyDocument: aws.String(execPolicy)}); err != nil {
		t.Fatal(err)
	}
	// A role that may log in to ECR but not pull.
	loginOnly, err := roles.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("login-only"), AssumeRolePolicyDocument: aws.String(trust)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := roles.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("login-only"), PolicyName: aws.String("login"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ecr:GetAuthorizationToken","Resource":"*"}]}`)}); err != nil {
		t.Fatal(err)
	}

	// The image, pushed as the provider pushes the listener's.
	api := ecrClient(cfg)
	repo, err := api.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String("listener")})
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(testImage(t), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	auth, _, err := image.ECRAuth(ctx, api)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := image.Push(ctx, img, aws.ToString(repo.Repository.RepositoryUri)+":latest", auth)
	if err != nil {
		t.Fatal(err)
	}

	logs := admin.Logs(cfg)
	if _, err := logs.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String("/ghrunner/listener")}); err != nil {
		t.Fatal(err)
	}
	tasks := ecs.NewFromConfig(cfg.AWS, func(o *ecs.Options) { o.BaseEndpoint = cfg.Endpoint("ecs") })
	if _, err := tasks.CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("ghrunner")}); err != nil {
		t.Fatal(err)
	}
	register := func(mark string, stopTimeout int32, ignoreTerm string, execRoleARN *string) string {
		t.Helper()
		out, err := tasks.RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
			Family: aws.String("listener"), RequiresCompatibilities: []ecstypes.Compatibility{ecstypes.CompatibilityFargate},
			NetworkMode: ecstypes.NetworkModeAwsvpc, Cpu: aws.String("256"), Memory: aws.String("512"),
			TaskRoleArn: taskRole.Role.Arn, ExecutionRoleArn: execRoleARN,
			RuntimePlatform: &ecstypes.RuntimePlatform{OperatingSystemFamily: ecstypes.OSFamilyLinux},
			ContainerDefinitions: []ecstypes.ContainerDefinition{{
				Name: aws.String("listener"), Image: aws.String(ref), Essential: aws.Bool(true), StopTimeout: aws.Int32(stopTimeout),
				Environment: []ecstypes.KeyValuePair{
					{Name: aws.String("ECSTASK_OUT"), Value: aws.String(out)},
					{Name: aws.String("ECSTASK_MARK"), Value: aws.String(mark)},
					{Name: aws.String("ECSTASK_PARAMETER"), Value: aws.String(param)},
					{Name: aws.String("ECSTASK_IGNORE_TERM"), Value: aws.String(ignoreTerm)},
				},
				LogConfiguration: &ecstypes.LogConfiguration{LogDriver: ecstypes.LogDriverAwslogs, Options: map[string]string{
					"awslogs-group": "/ghrunner/listener", "awslogs-region": sandbox.Region, "awslogs-stream-prefix": "listener"}},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.TaskDefinition.TaskDefinitionArn)
	}
	first := register("one", 30, "", execRole.Role.Arn)
	subnets, err := cfg.EC2().DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil || len(subnets.Subnets) == 0 {
		t.Fatalf("the default VPC's subnets: %v", err)
	}
	// moto 5.2 fails (500, a KeyError) on an awsvpc configuration without
	// security groups, which AWS accepts: name the default VPC's.
	groups, err := cfg.EC2().DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{})
	if err != nil || len(groups.SecurityGroups) == 0 {
		t.Fatalf("the default VPC's security groups: %v", err)
	}
	if _, err := tasks.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String("ghrunner"), ServiceName: aws.String("listener"),
		TaskDefinition: aws.String(first), DesiredCount: aws.Int32(1), LaunchType: ecstypes.LaunchTypeFargate,
		DeploymentConfiguration: &ecstypes.DeploymentConfiguration{MinimumHealthyPercent: aws.Int32(0), MaximumPercent: aws.Int32(100)},
		NetworkConfiguration: &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: []string{aws.ToString(subnets.Subnets[0].SubnetId)},
			SecurityGroups: []string{aws.ToString(groups.SecurityGroups[0].GroupId)}}},
	}); err != nil {
		t.Fatal(err)
	}

	running := func(what string, ok func([]sandbox.ECSTask) bool) []sandbox.ECSTask {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := sb.ECSTasks()
			if ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: running %+v; starts %v; events %+v", what, got, sb.ECSTaskStarts(), sb.ECSTaskEvents())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	report := func(pid int) taskReport {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			raw, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("%d.json", pid)))
			if err == nil {
				var r taskReport
				if err := json.Unmarshal(raw, &r); err != nil {
					t.Fatal(err)
				}
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("task process %d wrote no report", pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	var task sandbox.ECSTask
	t.Run("the service is stable once its task runs", func(t *testing.T) {
		in := &ecs.DescribeServicesInput{Cluster: aws.String("ghrunner"), Services: []string{"listener"}}
		if err := ecs.NewServicesStableWaiter(tasks, func(o *ecs.ServicesStableWaiterOptions) { o.MinDelay, o.MaxDelay = 100*time.Millisecond, time.Second }).
			Wait(ctx, in, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if len(sb.ECSTasks()) != 1 {
			t.Fatalf("stable with tasks %+v", sb.ECSTasks())
		}
		out, err := tasks.DescribeServices(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if sv := out.Services[0]; sv.RunningCount != 1 || sv.PendingCount != 0 || sv.Deployments[0].RolloutState != ecstypes.DeploymentRolloutStateCompleted {
			t.Fatalf("service %+v, want runningCount 1, pendingCount 0, its deployment COMPLETED", sv)
		}
	})

	t.Run("the task runs the image's entrypoint with the container's environment and the task role's credentials", func(t *testing.T) {
		task = running("the first task", func(ts []sandbox.ECSTask) bool { return len(ts) == 1 })[0]
		if task.Service != "listener" || task.Cluster != "ghrunner" || task.TaskDefinition != first {
			t.Fatalf("task %+v, want listener of ghrunner running %s", task, first)
		}
		r := report(task.PID)
		for k, want := range map[string]string{
			"ECSTASK_MARK":      "one",
			"GHRUNNER_HANDLER":  "listener", // the image's own environment
			"AWS_ENDPOINT_URL":  sb.URL,
			"AWS_REGION":        sandbox.Region,
			"AWS_EXECUTION_ENV": "AWS_ECS_FARGATE",
		} {
			if r.Env[k] != want {
				t.Errorf("env %s = %q, want %q", k, r.Env[k], want)
			}
		}
		if r.Env["AWS_ACCESS_KEY_ID"] != "" || r.Env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] == "" || r.Env["AWS_CONTAINER_AUTHORIZATION_TOKEN"] == "" {
			t.Errorf("credentials env: %v, want AWS_CONTAINER_CREDENTIALS_FULL_URI and AWS_CONTAINER_AUTHORIZATION_TOKEN and no keys", r.Env)
		}
		if os.Getuid() == 0 && (r.Hostname != r.Env["HOSTNAME"] || !strings.HasSuffix(r.Hostname, ".compute.internal")) {
			t.Errorf("the task's host name %q (HOSTNAME %q), want one of its own", r.Hostname, r.Env["HOSTNAME"])
		}
		if r.CredentialsError != "" || !strings.HasPrefix(r.AccessKeyID, "ASIA") {
			t.Fatalf("the SDK's credentials in the task: %q (%s) %s", r.AccessKeyID, r.Source, r.CredentialsError)
		}
		if r.Parameter != "hello from ssm" {
			t.Errorf("GetParameter as the task role: %q %s", r.Parameter, r.ParameterError)
		}
		if !slices.ContainsFunc(sb.IAMAllowed(), func(s string) bool { return strings.HasPrefix(s, "listener-task ssm:GetParameter ") }) {
			t.Errorf("IAM allowed %v, want listener-task ssm:GetParameter", sb.IAMAllowed())
		}
		// The endpoint answers the task's token only.
		req, _ := http.NewRequest(http.MethodGet, r.Env["AWS_CONTAINER_CREDENTIALS_FULL_URI"], nil)
		req.Header.Set("Authorization", "not the token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("credentials with a wrong token: %d, want 401", resp.StatusCode)
		}
		// Its output reaches the awslogs group, in ECS's stream name.
		stream := "listener/listener/" + task.ID
		deadline := time.Now().Add(10 * time.Second)
		for {
			ev, err := logs.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String("/ghrunner/listener"), LogStreamName: aws.String(stream)})
			if err == nil && len(ev.Events) > 0 && strings.Contains(aws.ToString(ev.Events[0].Message), "ecstask: started one") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("log stream %s: %v %v", stream, ev, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// The execution role pulled the image and wrote the logs, through IAM.
		for _, action := range []string{"ecr:GetAuthorizationToken", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "logs:CreateLogStream", "logs:PutLogEvents"} {
			if !slices.ContainsFunc(sb.IAMAllowed(), func(s string) bool { return strings.HasPrefix(s, "listener-execution "+action+" ") }) {
				t.Errorf("IAM allowed %v, want listener-execution %s", sb.IAMAllowed(), action)
			}
		}
	})

	t.Run("a task that dies is replaced", func(t *testing.T) {
		if !sb.KillECSTask("listener") {
			t.Fatal("KillECSTask: no task")
		}
		again := running("a replacement", func(ts []sandbox.ECSTask) bool { return len(ts) == 1 && ts[0].PID != task.PID })[0]
		if again.TaskDefinition != first || sb.ECSTaskStarts()["listener"] != 2 {
			t.Fatalf("replacement %+v, starts %v", again, sb.ECSTaskStarts())
		}
		report(again.PID)
		task = again
	})

	second := register("two", 1, "1", execRole.Role.Arn)
	t.Run("a new task definition stops the old task before it starts the new one", func(t *testing.T) {
		if _, err := tasks.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String("ghrunner"), Service: aws.String("listener"), TaskDefinition: aws.String(second)}); err != nil {
			t.Fatal(err)
		}
		now := running("the new task definition's task", func(ts []sandbox.ECSTask) bool { return len(ts) == 1 && ts[0].TaskDefinition == second })[0]
		report(now.PID)
		var oldExit, newStart int
		for i, e := range sb.ECSTaskEvents() {
			switch {
			case e.Kind == "exit" && e.TaskID == task.ID:
				oldExit = i
			case e.Kind == "start" && e.TaskID == now.ID:
				newStart = i
			}
		}
		if oldExit == 0 || newStart < oldExit {
			t.Fatalf("events %+v: want the old task's exit before the new one's start", sb.ECSTaskEvents())
		}
		raw, _ := os.ReadFile(filepath.Join(out, "events"))
		if want := fmt.Sprintf("term %d one\nstart %d two\n", task.PID, now.PID); !strings.HasSuffix(string(raw), want) {
			t.Fatalf("the processes' own events:\n%s\nwant them to end with\n%s", raw, want)
		}
		task = now
	})

	t.Run("desiredCount 0 stops the task, with SIGKILL after the container's stopTimeout", func(t *testing.T) {
		if _, err := tasks.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String("ghrunner"), Service: aws.String("listener"), DesiredCount: aws.Int32(0)}); err != nil {
			t.Fatal(err)
		}
		running("no task", func(ts []sandbox.ECSTask) bool { return len(ts) == 0 })
		if out, err := tasks.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String("ghrunner"), Services: []string{"listener"}}); err != nil || out.Services[0].RunningCount != 0 {
			t.Fatalf("DescribeServices: %v, %v: want runningCount 0", out, err)
		}
		var stop, kill time.Time
		for _, e := range sb.ECSTaskEvents() {
			if e.TaskID == task.ID && e.Kind == "stop" {
				stop = e.At
			}
			if e.TaskID == task.ID && e.Kind == "kill" {
				kill = e.At
			}
		}
		// This revision's process ignores SIGTERM (ECSTASK_IGNORE_TERM).
		if stop.IsZero() || kill.Sub(stop) < time.Second {
			t.Fatalf("events %+v: want a stop, then a kill a stopTimeout (1 s) later", sb.ECSTaskEvents())
		}
		time.Sleep(2 * sandbox.ECSTaskTick)
		if n := sb.ECSTaskStarts()["listener"]; n != 3 {
			t.Fatalf("starts = %d after desiredCount 0, want 3", n)
		}
	})

	t.Run("a desiredCount above 1 is refused: no task runs", func(t *testing.T) {
		if _, err := tasks.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String("ghrunner"), Service: aws.String("listener"), DesiredCount: aws.Int32(2)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * sandbox.ECSTaskTick)
		if ts := sb.ECSTasks(); len(ts) != 0 || sb.ECSTaskStarts()["listener"] != 3 {
			t.Fatalf("running %+v, starts %v: want none started", ts, sb.ECSTaskStarts())
		}
	})
	t.Run("a task whose execution role may not pull the image does not start", func(t *testing.T) {
		third := register("three", 1, "", loginOnly.Role.Arn)
		if _, err := tasks.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String("ghrunner"), Service: aws.String("listener"),
			TaskDefinition: aws.String(third), DesiredCount: aws.Int32(1)}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !slices.ContainsFunc(sb.Denials(), func(d sandbox.Denial) bool { return d.Action == "ecr:BatchGetImage" }) {
			if time.Now().After(deadline) {
				t.Fatalf("no ecr:BatchGetImage denial; denials %v", sb.Denials())
			}
			time.Sleep(100 * time.Millisecond)
		}
		if d := sb.TakeDenials(); !strings.Contains(d[0].Principal, "assumed-role/login-only/") || !strings.HasSuffix(d[0].Resource, ":repository/listener") {
			t.Fatalf("denials %v, want login-only's BatchGetImage on the repository", d)
		}
		if ts := sb.ECSTasks(); len(ts) != 0 || sb.ECSTaskStarts()["listener"] != 3 {
			t.Fatalf("running %+v, starts %v: want none started", ts, sb.ECSTaskStarts())
		}
		if _, err := tasks.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String("ghrunner"), Service: aws.String("listener"), DesiredCount: aws.Int32(0)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * sandbox.ECSTaskTick)
		sb.TakeDenials() // a retry may have been under way
	})
	if v := sb.ECSViolations(); len(v) > 0 {
		t.Fatalf("two tasks of a service at once: %v", v)
	}
}
