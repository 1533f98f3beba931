package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/instancehost"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/lambdart"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

var ctx = context.Background()

// deployment is one ghrunner deployment on moto: table, queue, network and
// launch template, a pool, the fake GitHub with the App credentials in SSM,
// the bundle run through the Lambda runtime API for each handler, and an
// instance host running a real agent per EC2 instance.
type deployment struct {
	t     testing.TB
	name  string
	aws   awsconf.Config
	store *state.Store
	fleet *fleet.Fleet
	fake  *fakegithub.Server
	pool  state.PoolConfig
	fns   map[string]*lambdart.Host
	specs map[string]lambdart.Function // what each host runs, for a fresh environment
	host  *instancehost.Host
	logs  *testbin.Buffer
}

var builds struct{ bootstrap, agent, runner string }

func build(t testing.TB) {
	var err error
	if builds.bootstrap, err = testbin.Build(testbin.Module + "/lambdas"); err != nil {
		t.Fatal(err)
	}
	if builds.agent, err = testbin.Build(testbin.Module + "/agent"); err != nil {
		t.Fatal(err)
	}
	if builds.runner, err = fakegithub.BuildRunner(); err != nil {
		t.Fatal(err)
	}
}

func deploy(t *testing.T, tune func(*state.PoolConfig)) *deployment { return deployTB(t, tune) }

// deployB is deploy for benchmarks.
func deployB(b *testing.B) *deployment { return deployTB(b, nil) }

func deployTB(t testing.TB, tune func(*state.PoolConfig)) *deployment {
	build(t)
	d := &deployment{t: t, name: awstest.Name(t, "ghr"), aws: env.Config(t), fake: fakegithub.NewServer(fakegithub.Options{Orgs: []string{"acme"}, SessionRetry: 500 * time.Millisecond,
		// A killed listener's session ends as in the sandbox: its successor
		// waits seconds, not the fake's default two minutes.
		ScaleSet: fakegithub.ScaleSetOptions{SessionIdleExpiry: 5 * time.Second}}), fns: map[string]*lambdart.Host{}, specs: map[string]lambdart.Function{}, logs: &testbin.Buffer{}}
	t.Cleanup(d.fake.Close)
	db := d.aws.DynamoDB()
	must(t, state.CreateTable(ctx, db, d.name, state.TableOptions{}))
	d.store = state.New(db, d.name)
	q, err := d.aws.SQS().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(d.name)})
	must(t, err)

	ec := d.aws.EC2()
	d.fleet = fleet.New(ec, d.name)
	vpc, err := ec.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.1.0.0/16")})
	must(t, err)
	sn, err := ec.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String("10.1.1.0/24"), AvailabilityZone: aws.String("us-east-1a")})
	must(t, err)
	lt, err := ec.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(d.name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(env.Network(t).AMI)}})
	must(t, err)

	d.pool = state.PoolConfig{
		Name: "linux", Owner: "acme", QueueURL: aws.ToString(q.QueueUrl), LaunchTemplateID: aws.ToString(lt.LaunchTemplate.LaunchTemplateId),
		LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large", "m7i.large"}, SubnetIDs: []string{aws.ToString(sn.Subnet.SubnetId)},
		UsageClass: "on-demand", MaxInstances: 20, Tags: map[string]string{"cost-center": "ci"},
		// Records are keyed <role id>:<instance id> as in production: a
		// function or test reading by the bare id finds nothing.
		InstanceRoleID: "AROALAMBDASTESTPOOL01",
		Timings:        state.Timings{CreatedTTL: 60, ClaimTTL: 30, MaxRuntime: 600, IdleTTL: 300, BootTime: 30, HeartbeatInterval: 1, StaleAfter: 10, ReleaseWait: 20},
	}
	if tune != nil {
		tune(&d.pool)
	}
	must(t, d.store.PutPoolConfig(ctx, d.pool))

	creds, _ := json.Marshal(map[string]any{"appId": d.fake.AppID, "privateKey": string(d.fake.PrivateKeyPEM), "baseUrl": d.fake.URL()})
	param := "/" + d.name + "/github"
	_, err = d.aws.SSM().PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(param), Type: ssmtypes.ParameterTypeSecureString, Value: aws.String(string(creds))})
	must(t, err)

	awsEnv := []string{"AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "AWS_REGION=" + awstest.Region, "AWS_ENDPOINT_URL=" + env.URL}
	for _, h := range bundle.Handlers {
		fnEnv := map[string]string{"GHRUNNER_HANDLER": h, "GHRUNNER_TABLE": d.name, "GHRUNNER_ENVIRONMENT": d.name, "GHRUNNER_GITHUB_PARAMETER": param,
			"GHRUNNER_OIDC_ISSUER": d.fake.Issuer(), "GHRUNNER_OIDC_AUDIENCE": audience}
		for _, kv := range awsEnv {
			k, v, _ := strings.Cut(kv, "=")
			fnEnv[k] = v
		}
		spec := lambdart.Function{Name: d.name + "-" + h, Bootstrap: builds.bootstrap, Env: fnEnv, Timeout: 120 * time.Second, Region: awstest.Region, Output: d.logs}
		host, err := lambdart.New(spec)
		must(t, err)
		d.specs[h] = spec
		t.Cleanup(host.Close)
		d.fns[h] = host
	}

	d.host, err = instancehost.Start(ctx, instancehost.Options{
		EC2: ec, Region: awstest.Region, Environment: d.name, AgentBinary: builds.agent, Root: t.TempDir(), Output: d.logs, Env: awsEnv,
		RunnerUsers: true, // jobs run as an unprivileged user, as on EC2 (the tests run as root)
		Config: func(string, map[string]string) config.Config {
			c := config.Defaults()
			c.Table, c.Endpoint, c.RoleID = d.name, env.URL, d.pool.InstanceRoleID
			// The agents beat at the pool's interval, as the user data sets it.
			c.HeartbeatInterval = config.Duration{Duration: state.D(d.pool.Timings.HeartbeatInterval)}
			c.IdlePoll = config.Duration{Duration: 200 * time.Millisecond}
			c.AssignedPoll = config.Duration{Duration: 300 * time.Millisecond}
			if d.pool.Timings.HeartbeatInterval >= 5 {
				// Production timings (benchmarks): production polling too, so
				// that fifty agents do not flood moto.
				c.IdlePoll, c.AssignedPoll = config.Defaults().IdlePoll, config.Defaults().AssignedPoll
			}
			c.RecordWait = config.Duration{Duration: 5 * time.Minute}
			c.StopTimeout = config.Duration{Duration: 10 * time.Second}
			return c
		},
		PrepareRunner: func(dir string) error { return fakegithub.InstallRunner(dir, builds.runner) },
	})
	must(t, err)
	t.Cleanup(func() {
		d.host.Stop()
		if t.Failed() {
			t.Logf("logs:\n%s", d.logs.String())
		}
	})
	return d
}

// fnSpec is how a handler's function is run, to start another host of it.
func (d *deployment) fnSpec(handler string) lambdart.Function { return d.specs[handler] }

// audience is the one the deployment's functions want in a job's token.
const audience = "ghrunner"

// ownRepo is the repository whose workflows the tests play, unless a test
// plays another's.
const ownRepo = "acme/app"

// invoke runs a handler with a payload, as `aws lambda invoke` would. A
// provision or release payload given as a map gets the OIDC token of a job
// of ownRepo's workflow run named by its runId, as the workflow's invoking
// job would send it (unless the map has an idToken already); raw bytes go
// as they are.
func (d *deployment) invoke(handler string, payload any) lambdart.Result {
	d.t.Helper()
	if m, ok := payload.(map[string]any); ok && (handler == bundle.HandlerProvision || handler == bundle.HandlerRelease) {
		payload = d.signed(ownRepo, m)
	}
	raw, ok := payload.([]byte)
	if !ok {
		raw, _ = json.Marshal(payload)
	}
	res, err := d.fns[handler].Invoke(ctx, raw)
	must(d.t, err)
	return res
}

// signed is payload with the token of a job of repo's workflow run named
// by its runId, unless it carries an idToken (or no runId) already.
func (d *deployment) signed(repo string, payload map[string]any) map[string]any {
	runID, ok := payload["runId"].(string)
	if _, has := payload["idToken"]; has || !ok {
		return payload
	}
	out := maps.Clone(payload)
	out["idToken"] = d.fake.IDToken(fakegithub.Workflow{Repository: repo, RunID: runID}, audience)
	return out
}

// call invokes and decodes a successful result into out.
func (d *deployment) call(handler string, payload any, out any) {
	d.t.Helper()
	res := d.invoke(handler, payload)
	if res.FunctionError != "" {
		d.t.Fatalf("%s failed: %s", handler, res.Payload)
	}
	if err := json.Unmarshal(res.Payload, out); err != nil {
		d.t.Fatalf("%s output %s: %v", handler, res.Payload, err)
	}
}

func (d *deployment) job(label, script string) fakegithub.Job {
	d.t.Helper()
	id := d.fake.EnqueueJob(label, script)
	job, err := d.fake.WaitJob(id, 30*time.Second)
	if err != nil {
		d.t.Fatalf("job for %s: %v", label, err)
	}
	return job
}

// live lists the deployment's EC2 instances that are not terminated.
func (d *deployment) live() []fleet.Instance {
	d.t.Helper()
	insts, err := d.fleet.List(ctx, fleet.Filter{})
	must(d.t, err)
	return insts
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// provisionOut is what provision answers.
type provisionOut = provision.Output

type releaseOut struct {
	Released []string `json:"released"`
	Expired  []string `json:"expired"`
	Note     string   `json:"note"`
}

func launchRequest(d *deployment) fleet.LaunchRequest {
	return fleet.LaunchRequest{LaunchTemplateID: d.pool.LaunchTemplateID, LaunchTemplateVersion: d.pool.LaunchTemplateVersion,
		InstanceTypes: d.pool.InstanceTypes, SubnetIDs: d.pool.SubnetIDs, Count: 1, UsageClass: "on-demand",
		Pool: d.pool.Name, Owner: d.pool.Owner, Assignment: state.NewAssignment()}
}

// key is the key of the record of the pool's instance id.
func (d *deployment) key(id string) state.Key { return d.pool.RecordKey(id) }

// roles answers state.Store.ByInstanceID: every instance of the test's
// pools has the pool's role.
func (d *deployment) roles(string) []string { return []string{d.pool.InstanceRoleID} }

// drain retires every pooled instance (expire, then refresh terminates).
func (d *deployment) drain() {
	idle, err := d.store.ByPoolState(ctx, d.pool.Name, state.Idle, time.Time{})
	must(d.t, err)
	for _, inst := range idle {
		rec, err := d.store.Get(ctx, inst.Key)
		must(d.t, err)
		_, err = d.store.Expire(ctx, rec.Ref(), "drain")
		must(d.t, err)
	}
	var ref struct{}
	d.call("refresh", nil, &ref)
}

// seedPool puts n clean idle instances into the pool: a provision and its
// release, as a first workflow would.
func (d *deployment) seedPool(n int) {
	d.t.Helper()
	var out provisionOut
	d.call("provision", map[string]any{"runId": "seed", "pool": "linux", "instanceCount": n}, &out)
	var rel releaseOut
	d.call("release", map[string]any{"runId": "seed"}, &rel)
	if len(rel.Released) != n {
		d.t.Fatalf("seeding the pool: %+v", rel)
	}
}
