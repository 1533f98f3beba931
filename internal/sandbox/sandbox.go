// Package sandbox runs the whole system on one machine with nothing from AWS
// or GitHub: moto for AWS, the fake GitHub, one front endpoint that serves
// Lambda Invoke by running the functions terraform deployed (and sends every
// other AWS call to moto, and serves ECR's registry API), one real agent
// process per EC2 instance the functions launch, a ticker that fires the
// deployed schedules, and one that runs each ECS service's task as a
// process (ecs.go).
package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/ec2capacity"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/iamsim"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/instancehost"
)

// This file: the Sandbox, Start and Stop, its accessors and the front
// endpoint's routes. The front's fault injection is in faults.go,
// Lambda's Invoke API in invoke.go, the job API in jobapi.go, and what an
// instance gets from the sandbox in instanceconfig.go.

const (
	// Environment is the provider's environment in the sandbox deployment.
	Environment = "sandbox"
	// Region of everything in the sandbox.
	Region = awstest.Region
	// GitHubParameter holds the fake GitHub App's credentials.
	GitHubParameter = "/ghrunner/sandbox/github"
	// Org is the GitHub organization the fake GitHub App is installed on.
	Org = "acme"
)

// Options configure a sandbox.
type Options struct {
	Dir  string    // working folder (instances, bootstraps, terraform), e.g. .sandbox
	Repo string    // repository root: provider/assets, examples/sandbox, modules/
	Logs io.Writer // functions' and agents' logs; default discarded
	// LambdaConcurrency is the account's concurrent executions
	// (concurrency.go); 0: DefaultLambdaConcurrency.
	LambdaConcurrency int
}

// Sandbox is a running sandbox.
type Sandbox struct {
	URL    string // the front endpoint: AWS_ENDPOINT_URL for SDKs, terraform and the aws CLI
	Moto   *awstest.Moto
	GitHub *fakegithub.Server
	AWS    awsconf.Config // talks to moto directly
	// Capacity is EC2's capacity per instance type and AZ and the
	// account's vCPU quotas (internal/testenv/ec2capacity): unlimited
	// until a test or the operator's sandbox sets a limit.
	Capacity *ec2capacity.Model

	opts      Options
	front     *http.Server
	functions *functions
	instances *instancehost.Host
	schedules *schedules
	streams   *streams
	registry  *registry      // ECR's registry API (ecr.go)
	ecsTasks  *ecsTasks      // ECS services' tasks as processes (ecs.go)
	states    instanceStates // instances stopping or booting (ec2states.go)
	images    sync.Map       // image id -> types.Image, read once (ec2volumes.go)
	iam       *iamGate
	evaluator *iamsim.Evaluator
	runnerSHA string // of the fake runner's tarball the fake github.com serves
	runnerBin string // the fake runner's program, packed as each release (releases.go)

	mu     sync.Mutex
	table  string // the state table, known once deployed
	faults Faults
	dynamo dynamoState // what the DynamoDB faults remember
	// invokeResets counts Invoke connections reset (invokeidle.go).
	invokeResets int

	profiles lag // instance profiles EC2 does not know yet (iamlag.go)
	roles    lag // roles Lambda and Scheduler cannot assume yet (iamlag.go)
	grants   lag // role policies Lambda does not see yet (iamgrants.go)
}

// KillAgent kills an instance's agent process abruptly; the instance host
// restarts it a second later, as systemd would.
func (s *Sandbox) KillAgent(instanceID string) bool { return s.instances.Kill(instanceID) }

// Start brings up moto, the fake GitHub, the front endpoint, the instance
// host, the schedule ticker and the ECS task runner.
func Start(ctx context.Context, o Options) (s *Sandbox, err error) {
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	s = &Sandbox{opts: o}
	s.grants.fromFirstUse = true // iamgrants.go
	// Every error return below sets s to nil: stop what was started
	// through a copy, and let the error through.
	started := s
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	if s.Moto, err = awstest.Start(); err != nil {
		return nil, err
	}
	if s.AWS, err = awsconf.Load(ctx, s.Moto.Options()); err != nil {
		return nil, err
	}
	s.Capacity = ec2capacity.New(s.AWS.EC2())
	// A listener restarted after its predecessor was killed retries its
	// session every half second rather than every 30 s, and the fake
	// scales the rest from it (fakegithub session.go): the listener gives
	// up after 4 s, the old session lapses after 5 s, and the story's
	// timings stay those of the runner starting.
	// A killed scale-set listener's session ends after 5 s nobody polls
	// it (GitHub's own time is undocumented): its successor takes over.
	s.GitHub = fakegithub.NewServer(fakegithub.Options{Orgs: []string{Org}, SessionRetry: 500 * time.Millisecond,
		ScaleSet: fakegithub.ScaleSetOptions{SessionIdleExpiry: 5 * time.Second}})
	if s.evaluator, err = iamsim.Start(filepath.Join(o.Repo, "tools", "iamsim")); err != nil {
		return nil, err
	}
	id, err := admin.STS(s.AWS).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return nil, fmt.Errorf("moto's account: %w", err)
	}
	s.iam = newIAMGate(s.iamChecks, s.evaluator, admin.IAM(s.AWS), aws.ToString(id.Account))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.URL = "http://" + ln.Addr().String()
	awsEnv := map[string]string{"AWS_ENDPOINT_URL": s.URL, "AWS_ACCESS_KEY_ID": "sandbox", "AWS_SECRET_ACCESS_KEY": "sandbox", "AWS_REGION": Region}
	s.functions = newFunctions(admin.Lambda(s.AWS), filepath.Join(o.Repo, "provider", "assets"), filepath.Join(o.Dir, "bootstraps"), functionEnv(awsEnv), o.Logs, o.LambdaConcurrency)
	s.functions.credentials = s.iam.issue
	s.streams = startStreams(s.functions, s.Moto, o.Logs)
	s.registry = newRegistry(ln.Addr().String(), s.AWS, s.iam, o.Logs)
	taskEnv := functionEnv(awsEnv)
	delete(taskEnv, "AWS_ACCESS_KEY_ID") // a task's credentials come from its task role
	delete(taskEnv, "AWS_SECRET_ACCESS_KEY")
	// Absolute: a task runs in a folder of its own, and the command's
	// default -dir (.sandbox) is relative (make chaos's listener task
	// failed with "…/bootstrap: not found" before).
	ecsDir, err := filepath.Abs(filepath.Join(o.Dir, "ecs"))
	if err != nil {
		return nil, err
	}
	s.ecsTasks = startECSTasks(&ecsTasks{ecs: ecs.NewFromConfig(s.AWS.AWS, func(eo *ecs.Options) { eo.BaseEndpoint = s.AWS.Endpoint("ecs") }),
		roleConfig: func(ctx context.Context, akid, secret, token string) (awsconf.Config, error) {
			return awsconf.Load(ctx, awsconf.Options{Region: Region, Endpoint: s.URL, AccessKeyID: akid, SecretAccessKey: secret, SessionToken: token})
		},
		registry: s.registry, env: taskEnv, credURL: s.URL + "/_sandbox/ecs/credentials/",
		credentials: s.iam.issue, dir: ecsDir, logs: o.Logs})
	s.front = &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	go s.front.Serve(ln)

	if err := s.putGitHubCredentials(ctx); err != nil {
		return nil, err
	}
	runner, err := fakegithub.BuildRunner()
	if err != nil {
		return nil, err
	}
	s.runnerBin = runner
	// Instances start from a stock image: the agent downloads the runner
	// release its pool names, from the fake github.com.
	tarball, err := fakegithub.RunnerTarball(runner)
	if err != nil {
		return nil, err
	}
	for _, v := range runnerrelease.Versions() {
		s.GitHub.ServeRunnerRelease(v, tarball) // one checksum for all (agentConfig)
	}
	// The default release is GitHub's latest until a test publishes
	// another (PublishRunnerRelease): pools following "latest" learn it.
	s.GitHub.PublishRunnerRelease(runnerrelease.Default, tarball, time.Now().Add(-24*time.Hour))
	sum := sha256.Sum256(tarball)
	s.runnerSHA = hex.EncodeToString(sum[:])
	agent := filepath.Join(o.Repo, "provider", "assets", bundle.Agent(runtime.GOARCH))
	if _, err := os.Stat(agent); err != nil {
		return nil, fmt.Errorf("agent %s missing: run make build", agent)
	}
	var env []string
	for k, v := range awsEnv {
		if !strings.HasPrefix(k, "AWS_ACCESS_KEY_ID") && !strings.HasPrefix(k, "AWS_SECRET_ACCESS_KEY") {
			env = append(env, k+"="+v) // an agent's credentials come from its instance profile
		}
	}
	s.instances, err = instancehost.Start(context.Background(), instancehost.Options{
		EC2: hostEC2{moto: s.AWS.EC2(), states: &s.states}, Region: Region, Environment: Environment, AgentBinary: agent, Root: filepath.Join(o.Dir, "instances"),
		Config: s.agentConfig, Env: env, Output: o.Logs, Role: s.instanceRole,
		// As on EC2, jobs run as an unprivileged user of their instance's
		// own, when the sandbox may create users.
		RunnerUsers: os.Getuid() == 0,
	})
	if err != nil {
		return nil, err
	}
	s.schedules = startSchedules(admin.Scheduler(s.AWS), s.functions, o.Logs)
	return s, nil
}

// Stop ends everything it started: ECS tasks, agents and their runners,
// functions, the tickers, the endpoint, the fake GitHub and moto.
func (s *Sandbox) Stop() {
	if s.ecsTasks != nil {
		s.ecsTasks.stop()
	}
	if s.streams != nil {
		s.streams.stop()
	}
	if s.schedules != nil {
		s.schedules.stop()
	}
	if s.instances != nil {
		s.instances.Stop()
	}
	if s.functions != nil {
		s.functions.close()
	}
	if s.front != nil {
		s.front.Close()
	}
	if s.GitHub != nil {
		s.GitHub.Close()
	}
	if s.Moto != nil {
		s.Moto.Stop()
	}
	if s.evaluator != nil {
		s.evaluator.Close()
	}
}

// Denials lists the AWS requests of functions and agents that IAM refused.
// A correct deployment has none: every test that plays a story checks it.
func (s *Sandbox) Denials() []Denial { return s.iam.Denials() }

// IAMAllowed lists, per role, the actions IAM allowed it so far and how
// often ("role action count").
func (s *Sandbox) IAMAllowed() []string { return s.iam.Allowed() }

// TakeDenials returns the denials so far and forgets them: a test that
// provokes denials on purpose takes and checks its own.
func (s *Sandbox) TakeDenials() []Denial { return s.iam.take() }

func (s *Sandbox) putGitHubCredentials(ctx context.Context) error {
	creds, err := json.Marshal(map[string]any{"appId": s.GitHub.AppID, "privateKey": string(s.GitHub.PrivateKeyPEM), "baseUrl": s.GitHub.URL()})
	if err != nil {
		return err
	}
	_, err = s.AWS.SSM().PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(GitHubParameter), Type: ssmtypes.ParameterTypeSecureString,
		Value: aws.String(string(creds)), Overwrite: aws.Bool(true)})
	return err
}

// SetTable tells the instance host which table the deployment uses.
func (s *Sandbox) SetTable(table string) {
	s.mu.Lock()
	s.table = table
	s.mu.Unlock()
}

// Table is the deployment's state table ("" before Deploy).
func (s *Sandbox) Table() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table
}

// Invocations counts the invocations of each function so far.
func (s *Sandbox) Invocations() map[string]int { return s.functions.counts() }

// ScheduleFires counts the schedule firings so far, by schedule name.
func (s *Sandbox) ScheduleFires() map[string]int { return s.schedules.counts() }

// ScheduleResults returns the outcome of every finished run of a schedule
// (nil: the function succeeded).
func (s *Sandbox) ScheduleResults(name string) []error { return s.schedules.finished(name) }

// Agent is the agent process of an instance (its folder, its runner user,
// its pid), nil when the instance has none.
func (s *Sandbox) Agent(instanceID string) *instancehost.Agent { return s.instances.Agent(instanceID) }

// AgentErrors reports what went wrong starting agents.
func (s *Sandbox) AgentErrors() []error { return s.instances.Errors() }

// routes: Lambda Invoke and the sandbox's job API here, the rest to moto.
func (s *Sandbox) routes() http.Handler {
	target, _ := url.Parse(s.Moto.URL)
	moto := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		// A caller that gave up (a killed invocation) is routine here.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			fmt.Fprintf(s.opts.Logs, "sandbox: proxy to moto: %s %s: %v\n", r.Method, r.URL.Path, err)
			w.WriteHeader(http.StatusBadGateway)
		}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2015-03-31/functions/{name}/invocations", s.serveInvoke)
	mux.HandleFunc("POST /_sandbox/jobs", s.serveEnqueue)
	mux.HandleFunc("GET /_sandbox/jobs/{id}", s.serveJob)
	mux.HandleFunc("POST /_sandbox/idtoken", s.serveIDToken)
	mux.HandleFunc("GET /_sandbox/ecs/credentials/{task}", s.ecsTasks.serveCredentials)
	// The capacity model comes after EC2's other rules (withIAMLag): a
	// request EC2 refuses for its configuration never reaches capacity.
	// It makes one CreateFleet to moto per override it fills, so with
	// limits set Faults.AfterCreateFleet hears each of them.
	// The Price List API, which moto lacks, is answered before moto
	// (pricing.go).
	api := s.iam.handler(s.withIAMLag(s.withInstanceStates(s.Capacity.Front(s.withFaults(withPricing(s.registry.withECR(s.ecsTasks.withECS(moto))))))))
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isRegistryRequest(r) {
			s.registry.ServeHTTP(w, r) // ECR's registry API (ecr.go)
			return
		}
		api.ServeHTTP(w, r)
	}))
	return mux
}
