// Package sandbox runs the whole system on one machine with nothing from AWS
// or GitHub: moto for AWS, the fake GitHub, one front endpoint that serves
// Lambda Invoke by running the functions terraform deployed (and sends every
// other AWS call to moto, and serves ECR's registry API), one real agent
// process per EC2 instance the functions launch, a ticker that fires the
// deployed schedules, and one that runs each ECS service's task as a
// process (ecs.go).
package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/ec2capacity"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/iamsim"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/imdsstub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/instancehost"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/lambdart"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

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

// Faults are what the chaos suite injects at the front endpoint, where every
// AWS call of the functions and agents passes.
type Faults struct {
	// AfterCreateFleet is called once a CreateFleet answer has gone back to
	// the function that asked: killing that invocation now leaves instances
	// running that no record describes yet.
	AfterCreateFleet func()
	// DuplicateMessage says whether an SQS SendMessage (a pool message) is
	// sent to moto a second time, and after how long: duplicated and
	// reordered pool messages.
	DuplicateMessage func() (bool, time.Duration)
	// ClockOffset shifts the clock of a new instance's agent.
	ClockOffset func(instanceID string) time.Duration
	// DynamoDB says, per DynamoDB request, whether it is throttled or
	// fails with a 500 (before or after moto applied it); see dynamo.go.
	DynamoDB func(DynamoRequest) DynamoAnswer
	// IndexLag says how old a view of a global secondary index a Query
	// naming an IndexName is answered from (0: the current one); see
	// indexlag.go.
	IndexLag func() time.Duration
	// Logs says, per CloudWatch Logs write of an agent (CreateLogStream,
	// PutLogEvents), whether it is throttled, fails or hangs; see
	// logsfaults.go.
	Logs func(op string) LogsAnswer
	// Note hears of faults the endpoint injected on its own account (an
	// index answer that differs from the current one), by name.
	Note func(fault string)
	// InvokeIdleReset, when set, resets the connection of a synchronous
	// Invoke that carried no byte for that long, as a NAT gateway drops an
	// idle connection; the invocation runs on (invokeidle.go).
	InvokeIdleReset time.Duration
}

// SetFaults replaces the injected faults; the zero Faults injects none.
func (s *Sandbox) SetFaults(f Faults) {
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
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
		EC2: s.AWS.EC2(), Region: Region, Environment: Environment, AgentBinary: agent, Root: filepath.Join(o.Dir, "instances"),
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

// InstanceCredentials are credentials of the session the metadata service
// gives instance id (its instance profile's role, session name the instance
// id, as EC2's), and the role's name: a test holding them acts as a stolen
// instance credential.
func (s *Sandbox) InstanceCredentials(id string) (role string, creds imdsstub.Credentials, err error) {
	return s.instanceRole(id)
}

// instanceRole gives an instance the credentials of its instance profile's
// role, as EC2 does through the metadata service.
func (s *Sandbox) instanceRole(id string) (string, imdsstub.Credentials, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := s.AWS.EC2().DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return "", imdsstub.Credentials{}, err
	}
	var profile, pool string
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if i.IamInstanceProfile != nil {
				profile = aws.ToString(i.IamInstanceProfile.Arn)
			}
			for _, t := range i.Tags {
				if aws.ToString(t.Key) == fleet.TagPool {
					pool = aws.ToString(t.Value)
				}
			}
		}
	}
	if profile == "" && pool != "" {
		// moto does not copy a launch template's instance profile onto the
		// instances of a fleet; EC2 does: read it from the pool's template.
		if profile, err = s.templateProfile(ctx, pool); err != nil {
			return "", imdsstub.Credentials{}, err
		}
	}
	if profile == "" {
		return "", imdsstub.Credentials{}, fmt.Errorf("instance %s has no instance profile", id)
	}
	role, err := s.profileRole(ctx, profile, "")
	if err != nil {
		return "", imdsstub.Credentials{}, err
	}
	akid, secret, token, err := s.iam.issue(ctx, role, id, id)
	if err != nil {
		return "", imdsstub.Credentials{}, err
	}
	return lastSegment(role), imdsstub.Credentials{AccessKeyID: akid, SecretAccessKey: secret, Token: token, Expiration: time.Now().Add(6 * time.Hour)}, nil
}

func (s *Sandbox) putGitHubCredentials(ctx context.Context) error {
	creds, err := json.Marshal(map[string]any{"appId": s.GitHub.AppID, "privateKey": string(s.GitHub.PrivateKeyPEM), "baseUrl": s.GitHub.URL()})
	if err != nil {
		return err
	}
	_, err = s.AWS.SSM().PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(GitHubParameter), Type: ssmtypes.ParameterTypeSecureString,
		Value: aws.String(string(creds)), Overwrite: aws.Bool(true)})
	return err
}

// agentConfig is what a real instance would read from its user data: the
// launch template of the instance's pool, as the provider rendered it. Only
// the polling is faster, so the story does not wait on one-second polls.
func (s *Sandbox) agentConfig(id string, tags map[string]string) config.Config {
	cfg, err := s.userDataConfig(context.Background(), tags["ghr:pool"])
	if err != nil {
		fmt.Fprintf(s.opts.Logs, "sandbox: instance %s: %v\n", id, err)
		return config.Config{} // the agent refuses to start and says why
	}
	cfg.IdlePoll = config.Duration{Duration: 200 * time.Millisecond}
	cfg.AssignedPoll = config.Duration{Duration: 300 * time.Millisecond}
	cfg.StopTimeout = config.Duration{Duration: 10 * time.Second}
	// The fake GitHub stands in for github.com: the release's own path, but
	// the fake runner's bytes, so their checksum instead of the pinned one.
	if path, ok := strings.CutPrefix(cfg.RunnerTarballURL, "https://github.com/"); ok {
		cfg.RunnerTarballURL, cfg.RunnerTarballSHA256 = s.GitHub.URL()+"/"+path, s.runnerSHA
	}
	s.mu.Lock()
	skew := s.faults.ClockOffset
	s.mu.Unlock()
	if skew != nil {
		cfg.ClockOffset = config.Duration{Duration: skew(id)}
	}
	return cfg
}

func (s *Sandbox) userDataConfig(ctx context.Context, pool string) (config.Config, error) {
	data, err := s.poolTemplate(ctx, pool)
	if err != nil {
		return config.Config{}, err
	}
	raw, err := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	if err != nil {
		return config.Config{}, err
	}
	u, err := templates.Parse(raw)
	if err != nil {
		return config.Config{}, err
	}
	return u.Agent, nil
}

// templateProfile is the instance profile the pool's launch template gives
// its instances.
func (s *Sandbox) templateProfile(ctx context.Context, pool string) (string, error) {
	data, err := s.poolTemplate(ctx, pool)
	if err != nil || data.IamInstanceProfile == nil {
		return "", err
	}
	return aws.ToString(data.IamInstanceProfile.Arn), nil
}

// poolTemplate reads the launch template version the pool's config names.
func (s *Sandbox) poolTemplate(ctx context.Context, pool string) (*ec2types.ResponseLaunchTemplateData, error) {
	table := s.Table()
	if table == "" {
		return nil, errors.New("no deployment yet")
	}
	p, err := state.New(s.AWS.DynamoDB(), table).GetPoolConfig(ctx, pool)
	if err != nil || p == nil {
		return nil, fmt.Errorf("pool %q: %v", pool, err)
	}
	out, err := s.AWS.EC2().DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateId: aws.String(p.LaunchTemplateID), Versions: []string{p.LaunchTemplateVersion}})
	if err != nil || len(out.LaunchTemplateVersions) != 1 {
		return nil, fmt.Errorf("launch template %s: %v", p.LaunchTemplateID, err)
	}
	return out.LaunchTemplateVersions[0].LaunchTemplateData, nil
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
	api := s.iam.handler(s.withIAMLag(s.withInstanceStates(s.Capacity.Front(s.withFaults(s.registry.withECR(s.ecsTasks.withECS(moto)))))))
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isRegistryRequest(r) {
			s.registry.ServeHTTP(w, r) // ECR's registry API (ecr.go)
			return
		}
		api.ServeHTTP(w, r)
	}))
	return mux
}

// withFaults passes AWS calls to moto and injects the configured faults.
func (s *Sandbox) withFaults(moto http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		f := s.faults
		s.mu.Unlock()
		target := r.Header.Get("X-Amz-Target")
		dynamo := strings.HasPrefix(target, dynamoTarget) && (f.DynamoDB != nil || f.IndexLag != nil)
		logs := f.Logs != nil && strings.HasPrefix(target, logsTarget) && faultedLogOps[strings.TrimPrefix(target, logsTarget)]
		if (f.AfterCreateFleet == nil && f.DuplicateMessage == nil && !dynamo && !logs) || r.Method != http.MethodPost {
			moto.ServeHTTP(w, r)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		switch {
		case dynamo:
			s.serveDynamo(w, r, body, f, moto)
			return
		case logs:
			serveLogs(w, r, body, f, moto)
			return
		}
		moto.ServeHTTP(w, r)
		switch {
		case f.AfterCreateFleet != nil && bytes.Contains(body, []byte("Action=CreateFleet")):
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
			f.AfterCreateFleet()
		case f.DuplicateMessage != nil && r.Header.Get("X-Amz-Target") == "AmazonSQS.SendMessage":
			if again, after := f.DuplicateMessage(); again {
				go s.resend(r.Header.Clone(), body, after)
			}
		}
	})
}

// resend sends a copy of an AWS request to moto (which does not check
// signatures) after a while.
func (s *Sandbox) resend(h http.Header, body []byte, after time.Duration) {
	time.Sleep(after)
	req, err := http.NewRequest(http.MethodPost, s.Moto.URL+"/", bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header = h
	if resp, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// serveInvoke answers as Lambda's Invoke API does: 200 with the function's
// payload and X-Amz-Function-Error when it failed; 202 for Event.
func (s *Sandbox) serveInvoke(w http.ResponseWriter, r *http.Request) {
	name := functionName(r.PathValue("name"))
	payload, err := io.ReadAll(r.Body)
	if err != nil {
		lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
		return
	}
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	switch r.Header.Get("X-Amz-Invocation-Type") {
	case "DryRun":
		if _, _, err := s.functions.host(r.Context(), name); err != nil {
			s.invokeFailed(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	case "Event":
		if _, _, err := s.functions.host(r.Context(), name); err != nil {
			s.invokeFailed(w, err)
			return
		}
		go s.functions.invoke(context.Background(), name, payload, true)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	s.mu.Lock()
	idle := s.faults.InvokeIdleReset
	s.mu.Unlock()
	if idle > 0 {
		s.serveInvokeIdle(w, r, name, payload, idle)
		return
	}
	res, err := s.functions.invoke(r.Context(), name, payload, false)
	s.answerInvoke(w, res, err)
}

// answerInvoke writes a synchronous invocation's answer.
func (s *Sandbox) answerInvoke(w http.ResponseWriter, res lambdart.Result, err error) {
	if err != nil {
		s.invokeFailed(w, err)
		return
	}
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	w.Header().Set("X-Amzn-Requestid", res.RequestID)
	if res.FunctionError != "" {
		w.Header().Set("X-Amz-Function-Error", res.FunctionError)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(res.Payload)
}

func (s *Sandbox) invokeFailed(w http.ResponseWriter, err error) {
	var throttled *errThrottled
	if errors.As(err, &throttled) {
		w.Header().Set("X-Amzn-Errortype", "TooManyRequestsException")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": throttled.msg, "Reason": throttled.reason})
		return
	}
	if errors.Is(err, errNoFunction) {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+err.Error())
		return
	}
	lambdaError(w, http.StatusInternalServerError, "ServiceException", err.Error())
}

func lambdaError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-Errortype", typ)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"Type": "User", "Message": msg, "message": msg})
}

// functionName accepts a name, a partial or a full ARN, with a qualifier.
func functionName(s string) string {
	if i := strings.Index(s, ":function:"); i >= 0 {
		s = s[i+len(":function:"):]
	} else if strings.HasPrefix(s, "function:") {
		s = strings.TrimPrefix(s, "function:")
	}
	name, _, _ := strings.Cut(s, ":")
	return name
}

// The job API stands in for a workflow's jobs: POST {"runId","script"}
// queues a job for the runners of a provisioned run (under the label
// provision returned for it, as a workflow's runs-on names it), or
// {"label","script"} for runners with that label; GET
// /_sandbox/jobs/{id}?wait=60s waits for it to finish.
func (s *Sandbox) serveEnqueue(w http.ResponseWriter, r *http.Request) {
	var req struct{ RunID, Label, Script string }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || (req.Label == "") == (req.RunID == "") {
		http.Error(w, `body: want {"runId":"<runId>","script":"echo hi"} or {"label":"<label>","script":"echo hi"}`, http.StatusBadRequest)
		return
	}
	if req.RunID != "" {
		run, err := state.New(s.AWS.DynamoDB(), s.Table()).GetRun(r.Context(), req.RunID)
		if err != nil || run.Label == "" {
			http.Error(w, fmt.Sprintf("runId: no provisioned run %q (%v): provision it first", req.RunID, err), http.StatusNotFound)
			return
		}
		req.Label = run.Label
	}
	if req.Script == "" {
		req.Script = "echo hello from $(hostname)"
	}
	id := s.GitHub.EnqueueJob(req.Label, req.Script)
	json.NewEncoder(w).Encode(map[string]any{"id": id, "label": req.Label})
}

func (s *Sandbox) serveJob(w http.ResponseWriter, r *http.Request) {
	var id int64
	if _, err := fmt.Sscan(r.PathValue("id"), &id); err != nil {
		http.Error(w, "id: not a number", http.StatusBadRequest)
		return
	}
	job, ok := s.GitHub.Job(id)
	if !ok {
		http.Error(w, "no such job", http.StatusNotFound)
		return
	}
	if wait, err := time.ParseDuration(r.URL.Query().Get("wait")); err == nil && wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		if done, err := s.GitHub.WaitJobContext(ctx, id); err == nil {
			job = done
		}
	}
	json.NewEncoder(w).Encode(map[string]any{"id": job.ID, "label": job.Label, "state": job.State, "result": job.Result, "runner": job.Runner, "output": job.Output})
}
