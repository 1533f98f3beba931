package sandbox

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
)

// ECS services as processes. moto stores clusters, task definitions and
// services but runs nothing; ecsTasks watches its services and runs each
// one's task as ECS on Fargate would, as a local process:
//
//   - the task definition's image is pulled from the sandbox's registry
//     (ecr.go) by the reference it names, its layers unpacked into a folder
//     of the task runner's, and the image's entrypoint and command (or the
//     container's, which override them) run from there;
//   - its environment is the image's, then the container's, then the
//     sandbox's AWS endpoint and region (as the functions get them);
//   - the task role's credentials come as ECS gives them to a container:
//     an endpoint the SDKs' container credential provider reads, named by
//     AWS_CONTAINER_CREDENTIALS_FULL_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN
//     as its Authorization header ("Task IAM role", Amazon ECS Developer
//     Guide: https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-iam-roles.html;
//     ECS itself sets AWS_CONTAINER_CREDENTIALS_RELATIVE_URI under
//     169.254.170.2, which a process on this machine cannot be given). The
//     endpoint serves credentials iam.issue made for the task role, so the
//     task's calls are authorized against that role's policies;
//   - a task that exits is replaced after a short backoff, as ECS replaces
//     a stopped task of a service;
//   - a service whose task definition changes, or whose desiredCount drops
//     to 0, has its task stopped first (SIGTERM, then SIGKILL after the
//     container's stopTimeout, 30 s when unset: ContainerDefinition
//     stopTimeout, Amazon ECS API Reference:
//     https://docs.aws.amazon.com/AmazonECS/latest/APIReference/API_ContainerDefinition.html)
//     and only then the new one started: minimumHealthyPercent 0 and
//     maximumPercent 100 allow no second task, and the runner holds to
//     that for every service (ECSViolations lists any breach).
//
// Only services of desiredCount 0 or 1 run; any other count is refused
// with a log line. The task's stdout and stderr go to the sandbox logs and,
// when the container's logConfiguration is awslogs, to its log group in
// moto.
//
// Here: the watch of moto's services. Each service's worker is in
// ecs_worker.go, a task's process in ecstask.go, what tests read of the
// tasks in ecs_observe.go.

// ECSTaskTick is how often the sandbox reads moto's ECS services.
const ECSTaskTick = 500 * time.Millisecond

// ecsDefaultStopTimeout is ECS's wait between SIGTERM and SIGKILL when the
// container names none.
const ecsDefaultStopTimeout = 30 * time.Second

// ECSTask is a running task of a service.
type ECSTask struct {
	ID             string // 32 hex digits, as ECS's
	Cluster        string // cluster name
	Service        string // service name
	TaskDefinition string // its ARN
	PID            int
	Started        time.Time
}

// ECSTaskEvent is one step of a task's life: "start" (its process
// started), "stop" (the runner sent SIGTERM), "kill" (SIGKILL after the
// stop timeout) or "exit" (its process ended, for whatever reason).
type ECSTaskEvent struct {
	Kind           string
	Service        string
	TaskID         string
	TaskDefinition string
	PID            int
	At             time.Time
}

type ecsTasks struct {
	ecs *ecs.Client
	// roleConfig talks to the front endpoint with a role's issued
	// credentials: the task execution role pulls the image and writes the
	// awslogs through it, so IAM authorizes both against its policies.
	roleConfig  func(ctx context.Context, akid, secret, token string) (awsconf.Config, error)
	registry    *registry
	env         map[string]string // the sandbox's AWS endpoint and region
	credURL     string            // the task credentials endpoint, ending in /
	credentials func(ctx context.Context, roleARN, session, instance string) (akid, secret, token string, err error)
	dir         string
	logs        io.Writer
	cancel      context.CancelFunc
	done        chan struct{}
	wg          sync.WaitGroup

	pullMu sync.Mutex // one pull at a time: the cache is by digest

	mu         sync.Mutex
	services   map[string]*ecsService // by service ARN
	creds      map[string]taskCredentials
	running    map[string]int // processes per service ARN: at most one
	starts     map[string]int // by service name
	events     []ECSTaskEvent
	violations []string
	warned     map[string]bool
}

type taskCredentials struct {
	token, akid, secret, session, roleARN string
	expires                               time.Time
}

type ecsService struct {
	arn, name, cluster string
	wake               chan struct{}

	// guarded by ecsTasks.mu
	count int    // desired tasks: 0 or 1
	def   string // desired task definition ARN
	task  *ecsTask
}

type ecsTask struct {
	ECSTask
	cmd         *exec.Cmd
	done        chan struct{}
	stopTimeout time.Duration
	flush       func()
}

func startECSTasks(t *ecsTasks) *ecsTasks {
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	t.services, t.creds, t.running, t.starts, t.warned = map[string]*ecsService{}, map[string]taskCredentials{}, map[string]int{}, map[string]int{}, map[string]bool{}
	go t.loop(ctx)
	return t
}

// stop stops every task (SIGTERM, SIGKILL after at most 5 s) and the
// watcher.
func (t *ecsTasks) stop() {
	t.cancel()
	<-t.done
	t.wg.Wait()
}

func (t *ecsTasks) loop(ctx context.Context) {
	defer close(t.done)
	tick := time.NewTicker(ECSTaskTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := t.tick(ctx); err != nil && ctx.Err() == nil {
				t.warnOnce("tick "+err.Error(), "sandbox: ecs: reading services: %v", err)
			}
		}
	}
}

func (t *ecsTasks) warnOnce(key, format string, args ...any) {
	t.mu.Lock()
	seen := t.warned[key]
	t.warned[key] = true
	t.mu.Unlock()
	if !seen {
		fmt.Fprintf(t.logs, format+"\n", args...)
	}
}

// tick reads every service from moto and tells each its desired task. With
// no cluster it costs one ListClusters.
func (t *ecsTasks) tick(ctx context.Context) error {
	seen := map[string]bool{}
	clusters := ecs.NewListClustersPaginator(t.ecs, &ecs.ListClustersInput{})
	for clusters.HasMorePages() {
		page, err := clusters.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, cluster := range page.ClusterArns {
			var arns []string
			services := ecs.NewListServicesPaginator(t.ecs, &ecs.ListServicesInput{Cluster: aws.String(cluster)})
			for services.HasMorePages() {
				p, err := services.NextPage(ctx)
				if err != nil {
					return err
				}
				arns = append(arns, p.ServiceArns...)
			}
			for len(arns) > 0 {
				n := min(len(arns), 10) // DescribeServices takes ten at a time
				out, err := t.ecs.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(cluster), Services: arns[:n]})
				if err != nil {
					return err
				}
				arns = arns[n:]
				for _, sv := range out.Services {
					seen[aws.ToString(sv.ServiceArn)] = true
					t.want(ctx, lastSegment(cluster), sv)
				}
			}
		}
	}
	t.mu.Lock()
	for arn, sv := range t.services {
		if !seen[arn] && sv.count != 0 {
			sv.count = 0 // deleted
			poke(sv.wake)
		}
	}
	t.mu.Unlock()
	return nil
}

// want records what moto says the service should run and wakes its
// worker when that changed.
func (t *ecsTasks) want(ctx context.Context, cluster string, sv ecstypes.Service) {
	arn, name := aws.ToString(sv.ServiceArn), aws.ToString(sv.ServiceName)
	count, def := int(sv.DesiredCount), aws.ToString(sv.TaskDefinition)
	if st := aws.ToString(sv.Status); st != "" && st != "ACTIVE" {
		count = 0
	}
	if count > 1 {
		t.warnOnce(fmt.Sprintf("count %s %d", arn, count), "sandbox: ecs: service %s/%s: desiredCount %d refused: the sandbox runs 0 or 1 task per service; running none", cluster, name, count)
		count = 0
	}
	if sv.LaunchType != "" && sv.LaunchType != ecstypes.LaunchTypeFargate {
		t.warnOnce("launch "+arn, "sandbox: ecs: service %s/%s: launch type %s: the sandbox runs its task as FARGATE would", cluster, name, sv.LaunchType)
	}
	if dc := sv.DeploymentConfiguration; dc != nil && (aws.ToInt32(dc.MinimumHealthyPercent) != 0 || aws.ToInt32(dc.MaximumPercent) != 100) {
		t.warnOnce("deploy "+arn, "sandbox: ecs: service %s/%s: deployment %d%%/%d%%: the sandbox deploys as 0%%/100%% (stop the old task, then start the new)",
			cluster, name, aws.ToInt32(dc.MinimumHealthyPercent), aws.ToInt32(dc.MaximumPercent))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.services[arn]
	if s == nil {
		s = &ecsService{arn: arn, name: name, cluster: cluster, wake: make(chan struct{}, 1)}
		t.services[arn] = s
		t.wg.Add(1)
		go t.serve(ctx, s)
	}
	if s.count != count || s.def != def {
		s.count, s.def = count, def
		poke(s.wake)
	}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
