package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/imdsstub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/proxytest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

var env *awstest.Moto

// TestMain runs the tests against moto. Each world is an instance of its
// own (a runner user of its own when it has one, its fake GitHub, IMDS stub
// and daemon) and its tests spend most of their time waiting on the agent's
// polls and leases, so four run at once instead of GOMAXPROCS (two on CI):
// the package was on make test's critical path. An explicit -parallel wins.
func TestMain(m *testing.M) {
	flag.Set("test.parallel", "4") // before m.Run parses the command line
	os.Exit(awstest.Main(m, &env))
}

var ctx = context.Background()

// world is one instance with a real agent process, against moto and the
// fake GitHub, with the test playing the control plane.
// testRoleID stands for the pool's instance role id (ghrunner_pool.instance_role_id).
const testRoleID = "AROAAGENTTESTROLE0001"

type world struct {
	t     testing.TB
	store *state.Store
	ec2   *ec2.Client
	fake  *fakegithub.Server
	gh    *github.Client
	id    string
	// key is the instance's record: keyed with a role id as in
	// production.
	key    state.Key
	dir    string
	agent  *exec.Cmd
	logs   *testbin.Buffer
	exited chan error
	imds   *imdsstub.Server
	// unblock removes the runner user's firewall rule (jobUser): a
	// firewall service reloading its rules, as far as the agent can tell.
	unblock func()
	// env is added to the agent's environment (stand-in tools on PATH).
	env []string
	// proxy, when set (viaProxy), is the pool's proxy, and the fake GitHub
	// is named in registrations by a name only it resolves.
	proxy  *proxytest.Proxy
	ghName string
}

// viaProxy gives the agent a proxy (the pool's proxy setting) and names
// the fake GitHub in registrations github.proxytest, which only the proxy
// resolves: a runner that registers came through it. Call before start.
func (w *world) viaProxy() *proxytest.Proxy {
	w.proxy = proxytest.Start()
	w.t.Cleanup(w.proxy.Close)
	w.ghName = w.proxy.Map("github.proxytest", strings.TrimPrefix(w.fake.URL(), "http://"))
	w.configure(func(c *config.Config) { c.Proxy = &config.Proxy{URL: w.proxy.URL()} })
	return w.proxy
}

// runnerURL is the URL config.sh registers with: through the proxy's name
// for the fake GitHub when there is one.
func (w *world) runnerURL() string {
	u := w.gh.RunnerURL("acme")
	if w.ghName != "" {
		u = strings.Replace(u, strings.TrimPrefix(w.fake.URL(), "http://"), w.ghName, 1)
	}
	return u
}

func buildAgent(t testing.TB) string {
	bin, err := testbin.Build(testbin.Module + "/agent")
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// fakeSessionRetry: a runner the tests kill is restarted by the agent, and
// the new listener retries its session every half second, not every 30 s
// as the real one does; the fake scales the rest from it (fakegithub
// session.go): the listener gives up after 4 s with exit 5, before the dead
// listener's session lapses (5 s), and the agent starts it again.
const fakeSessionRetry = 500 * time.Millisecond

func newWorld(t testing.TB, preRunner string) *world {
	w := &world{t: t, store: statetest.NewStore(t, env), ec2: env.Config(t).EC2(), fake: fakegithub.NewServer(fakegithub.Options{Orgs: []string{"acme"}, SessionRetry: fakeSessionRetry}), logs: &testbin.Buffer{}, exited: make(chan error, 1)}
	t.Cleanup(w.fake.Close)
	var err error
	w.gh, err = github.New(github.Config{BaseURL: w.fake.URL(), AppID: w.fake.AppID, PrivateKeyPEM: w.fake.PrivateKeyPEM})
	must(t, err)
	run, err := w.ec2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(env.Network(t).AMI), MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: ec2types.InstanceTypeC7iLarge})
	must(t, err)
	w.id = aws.ToString(run.Instances[0].InstanceId)
	w.key = state.InstanceKey(testRoleID, w.id)
	w.dir = t.TempDir()
	bin, err := fakegithub.BuildRunner()
	must(t, err)
	must(t, fakegithub.InstallRunner(filepath.Join(w.dir, "runner"), bin))
	imds := imdsstub.Start(w.id, awstest.Region, "c7i.large", nil)
	t.Cleanup(imds.Close)
	w.imds = imds

	cfg := config.Defaults()
	cfg.Table, cfg.RoleID, cfg.Endpoint, cfg.IMDSEndpoint = w.store.Table(), testRoleID, env.URL, imds.URL()
	cfg.RunnerDir, cfg.RunDir, cfg.WorkDir, cfg.StateDir = filepath.Join(w.dir, "runner"), filepath.Join(w.dir, "run"), filepath.Join(w.dir, "work"), filepath.Join(w.dir, "state")
	cfg.FirewallFailureFile = filepath.Join(w.dir, "firewall-failed")
	cfg.HeartbeatInterval = config.Duration{Duration: time.Second}
	cfg.IdlePoll = config.Duration{Duration: 200 * time.Millisecond}
	cfg.AssignedPoll = config.Duration{Duration: 300 * time.Millisecond}
	cfg.RecordWait = config.Duration{Duration: 20 * time.Second}
	cfg.ClockSkew = config.Duration{Duration: time.Second}
	cfg.StopTimeout = config.Duration{Duration: 10 * time.Second}
	if preRunner != "" {
		path := filepath.Join(w.dir, "pre-runner.sh")
		must(t, os.WriteFile(path, []byte(preRunner), 0o755))
		cfg.PreRunnerScript = path
	}
	raw, _ := json.Marshal(cfg)
	must(t, os.WriteFile(filepath.Join(w.dir, "agent.json"), raw, 0o600))
	return w
}

// configure changes the agent's configuration file; call it before start.
func (w *world) configure(change func(*config.Config)) {
	w.t.Helper()
	path := filepath.Join(w.dir, "agent.json")
	raw, err := os.ReadFile(path)
	must(w.t, err)
	var cfg config.Config
	must(w.t, json.Unmarshal(raw, &cfg))
	change(&cfg)
	raw, _ = json.Marshal(cfg)
	must(w.t, os.WriteFile(path, raw, 0o600))
}

// kill kills the agent at once, with the commands it is running (config.sh
// runs in its process group; run.sh has a group of its own and survives, as
// under systemd with KillMode=process).
func (w *world) kill() {
	w.t.Helper()
	syscall.Kill(-w.agent.Process.Pid, syscall.SIGKILL)
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
		w.t.Fatal("killed agent did not exit")
	}
}

func (w *world) start() {
	w.agent = exec.Command(buildAgent(w.t), "-config", filepath.Join(w.dir, "agent.json"))
	// An operator's variable for the agent alone: no job may see it
	// (testdata/hostile-run-a.sh).
	w.agent.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing", "AWS_REGION="+awstest.Region, fakegithub.AllowRoot, operatorSecret)
	w.agent.Env = append(w.agent.Env, w.env...)
	// A pipe of our own, not exec's: run.sh inherits the agent's output,
	// and exec's Wait would wait for every writer to close it, not for the
	// agent to exit.
	out, in, err := os.Pipe()
	must(w.t, err)
	go func() { io.Copy(w.logs, out); out.Close() }()
	w.agent.Stdout, w.agent.Stderr = in, in
	w.agent.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = startWithSessionKey(w.agent)
	in.Close()
	must(w.t, err)
	go func() { w.exited <- w.agent.Wait() }()
	w.t.Cleanup(func() {
		syscall.Kill(-w.agent.Process.Pid, syscall.SIGKILL)
		if pid := w.runnerPID(); pid > 0 {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
		runner.RemoveCgroup(filepath.Join(w.dir, "run"))
		if w.t.Failed() {
			w.t.Logf("agent log:\n%s", w.logs.String())
		}
	})
}

// create writes the created record of the instance for runID, with its
// registration material, as provision does right after launch.
func (w *world) create(runID, usageClass string) *state.Instance {
	w.t.Helper()
	return w.createFor(runID, usageClass, 10*time.Minute)
}

// createFor is create with a created lease of ttl.
func (w *world) createFor(runID, usageClass string, ttl time.Duration) *state.Instance {
	w.t.Helper()
	inst, err := w.store.Create(ctx, state.NewInstance{ID: w.id, RoleID: testRoleID, Pool: "linux", Owner: "acme", RunID: runID, Assignment: state.NewAssignment(),
		InstanceType: "c7i.large", UsageClass: usageClass, TTL: ttl, Registration: w.registration()})
	must(w.t, err)
	return inst
}

func (w *world) registration() *state.Registration {
	tok, exp, err := w.gh.RegistrationToken(ctx, "acme")
	must(w.t, err)
	return &state.Registration{Purpose: state.PurposeRegister, URL: w.runnerURL(), Token: tok, ExpiresAt: exp.Unix()}
}

func (w *world) removal() *state.Registration {
	tok, exp, err := w.gh.RemoveToken(ctx, "acme")
	must(w.t, err)
	return &state.Registration{Purpose: state.PurposeRemove, URL: w.runnerURL(), Token: tok, ExpiresAt: exp.Unix()}
}

func (w *world) wait(inst *state.Instance, ok, failed string) *state.Instance {
	w.t.Helper()
	// 60 s: on two loaded cores (make test runs three packages at once)
	// the cleanup between just-in-time jobs and the release after it
	// took over 20 s once; alone they take well under 10.
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	got, err := w.store.WaitSignal(c, inst.Key, inst.Assignment, ok, failed, 100*time.Millisecond)
	if err != nil {
		w.t.Fatalf("waiting for %s: %v\nagent log:\n%s", ok, err, w.logs.String())
	}
	return got
}

func (w *world) runnerPID() int {
	raw, err := os.ReadFile(filepath.Join(w.dir, "state", runner.PIDFile))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	return pid
}

func (w *world) job(label, script string) fakegithub.Job {
	w.t.Helper()
	id := w.fake.EnqueueJob(label, script)
	job, err := w.fake.WaitJob(id, 60*time.Second) // generous: make test loads both cores
	if err != nil {
		w.t.Fatalf("job %q: %v\nagent log:\n%s", script, err, w.logs.String())
	}
	return job
}

// markRunning waits until the instance's runner is registered (failing the
// test with the record's signals when it is not) and moves the record to
// running, as provision does.
func (w *world) markRunning(inst *state.Instance) *state.Instance {
	w.t.Helper()
	got := w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
	if _, ok := got.SignalFor(state.SignalRegOK); !ok {
		w.t.Fatalf("%s's runner not registered: %v", got.RunID, got.Signals)
	}
	running, err := w.store.MarkRunning(ctx, got.Ref(), time.Hour, time.Hour)
	must(w.t, err)
	return running
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestAgentThroughThreeAssignments drives the real agent binary through
// three runs on one instance, playing the control plane's side. The pool
// has a proxy (issue 40 item 6): the runner reaches the fake GitHub only
// through it, by a name only the proxy resolves.
func TestAgentThroughThreeAssignments(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w := newWorld(t, "#!/bin/sh\necho warming caches\n")
	proxy := w.viaProxy()
	inst := w.create("run-1", "on-demand")
	var err error
	w.start()
	foreign := w.fake.EnqueueJob("run-elsewhere", "echo this must never run here")

	for run := 1; run <= 3; run++ {
		runID := fmt.Sprintf("run-%d", run)
		got := w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
		if run == 1 {
			if _, ok := got.SignalFor(state.SignalOK); !ok {
				t.Fatal("no UD_OK after the pre-runner script")
			}
		}
		if got.GithubRunnerID == 0 || got.RunnerName != fmt.Sprintf("ghr-%d-%s", run, w.id) || got.Registration != nil {
			t.Fatalf("run %d: runner id %d name %q registration kept=%v", run, got.GithubRunnerID, got.RunnerName, got.Registration != nil)
		}
		inst, err = w.store.MarkRunning(ctx, got.Ref(), time.Hour, time.Hour)
		must(t, err)
		// Configured never to replace itself (issue 16: a self-update swaps
		// the checksummed runner between runs).
		if file, ok, err := (&runner.Runner{Dir: filepath.Join(w.dir, "run")}).Configured(); err != nil || !ok || !file.DisableUpdate {
			t.Fatalf("run %d: .runner %+v (configured %v, %v): want disableUpdate", run, file, ok, err)
		}

		job := w.job(runID, "test ! -e ../../leftover || { echo dirty; exit 3; }; echo from-"+runID+" > ../../leftover; echo ok")
		if job.ExitCode != 0 || job.Runner != got.RunnerName {
			t.Fatalf("run %d: job ran on %q with exit %d: %s", run, job.Runner, job.ExitCode, job.Output)
		}
		if run == 2 {
			// A runner that dies while assigned is restarted.
			old := w.runnerPID()
			syscall.Kill(-old, syscall.SIGKILL)
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) && (w.runnerPID() == old || w.runnerPID() == 0) {
				time.Sleep(100 * time.Millisecond)
			}
			if w.runnerPID() == old {
				t.Fatal("killed runner not restarted")
			}
			if again := w.job(runID, "echo after restart"); again.ExitCode != 0 {
				t.Fatalf("job after restart: %+v", again)
			}
		}

		idle, err := w.store.Release(ctx, inst.Ref(), runID, 15*time.Minute, w.removal())
		must(t, err)
		clean := w.wait(idle, state.SignalRemoveRegOK, state.SignalRemoveRegFailed)
		if len(w.fake.Runners()) != 0 {
			t.Fatalf("run %d: runner still on GitHub after UD_REMOVE_REG_OK: %+v", run, w.fake.Runners())
		}
		if entries, _ := os.ReadDir(filepath.Join(w.dir, "work")); len(entries) != 0 {
			t.Fatalf("run %d: work folder not wiped: %v", run, entries)
		}
		if clean.GithubRunnerID != 0 {
			t.Fatalf("runner id kept after deregistration")
		}
		if run < 3 {
			req := state.ClaimRequest{RunID: fmt.Sprintf("run-%d", run+1), Pool: "linux", Owner: "acme", ClaimTTL: 5 * time.Minute, Registration: w.registration()}
			inst, err = w.store.Claim(ctx, idle.Key, req)
			must(t, err)
		}
	}
	if j, _ := w.fake.Job(foreign); j.State != "queued" {
		t.Fatalf("a job for another runId ran on this instance: %+v", j)
	}
	// Registrations, sessions and jobs went through the proxy, and nothing
	// else did: IMDS and the AWS endpoint the pool lists stay direct (here
	// both are on loopback, which Go never proxies: agent/config's
	// TestTheProxyCarriesGitHubAndNeverIMDSOrTheListedEndpoints shows the
	// rule for the real addresses).
	if hosts := proxy.Hosts(); hosts["github.proxytest"] == 0 || len(hosts) != 1 {
		t.Fatalf("the proxy was asked for %v, want github.proxytest alone", hosts)
	}
	rec, err := w.store.Get(ctx, w.key)
	must(t, err)
	if age := time.Since(time.Unix(rec.HeartbeatAt, 0)); age > 3*time.Second {
		t.Fatalf("heartbeat is %s old", age)
	}

	// The lease passes: the agent terminates its own instance.
	_, err = w.store.Expire(ctx, rec.Ref(), "test")
	must(t, err)
	select {
	case err := <-w.exited:
		if err != nil {
			t.Fatalf("agent exit after self-termination: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("agent did not terminate its instance\n%s", w.logs.String())
	}
	out, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{w.id}})
	must(t, err)
	if st := out.Reservations[0].Instances[0].State.Name; st != ec2types.InstanceStateNameTerminated && st != ec2types.InstanceStateNameShuttingDown {
		t.Fatalf("instance state %s after self-termination", st)
	}
}

func TestFailingPreRunnerScript(t *testing.T) {
	w := newWorld(t, "#!/bin/sh\necho 'apt-get: package not found' >&2\nexit 7\n")
	inst := w.create("run-x", "on-demand")
	w.start()
	c, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err := w.store.WaitSignal(c, inst.Key, inst.Assignment, state.SignalOK, state.SignalFailed, 100*time.Millisecond)
	var failed *state.SignalFailedError
	if !asSignalFailed(err, &failed) || !strings.Contains(failed.Detail, "package not found") || !strings.Contains(failed.Detail, "exit status 7") {
		t.Fatalf("pre-runner failure: %v", err)
	}
	// The waiting provision learns at once: no registration, UD_REG_FAILED.
	_, err = w.store.WaitSignal(c, inst.Key, inst.Assignment, state.SignalRegOK, state.SignalRegFailed, 100*time.Millisecond)
	if !asSignalFailed(err, &failed) || !strings.Contains(failed.Detail, "pre-runner") {
		t.Fatalf("registration after failed pre-runner: %v", err)
	}
	if len(w.fake.Runners()) != 0 {
		t.Fatal("a runner registered on an instance whose pre-runner script failed")
	}
}

func TestAgentWithoutRecordTerminatesItself(t *testing.T) {
	w := newWorld(t, "")
	w.configure(func(c *config.Config) { c.RecordWait = config.Duration{Duration: 2 * time.Second} })
	w.start()
	select {
	case err := <-w.exited:
		if err != nil {
			t.Fatalf("agent exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("agent without a record did not terminate its instance\n%s", w.logs.String())
	}
	out, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{w.id}})
	must(t, err)
	if st := out.Reservations[0].Instances[0].State.Name; st != ec2types.InstanceStateNameTerminated {
		t.Fatalf("state %s", st)
	}
	if !strings.Contains(w.logs.String(), "no record appeared") {
		t.Fatalf("log does not say why:\n%s", w.logs.String())
	}
}

func asSignalFailed(err error, target **state.SignalFailedError) bool {
	sf, ok := err.(*state.SignalFailedError)
	if ok {
		*target = sf
	}
	return ok
}

// TestSpotInterruption: on a spot notice the agent says UD_INTERRUPTED for
// the current assignment and stops its runner.
func TestSpotInterruption(t *testing.T) {
	t.Parallel() // its own world: instance, users, fake GitHub, daemon
	w := newWorld(t, "")
	inst := w.create("run-spot", "spot")
	w.start()
	w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
	pid := w.runnerPID()
	w.imds.InterruptSpot("terminate", time.Now().Add(2*time.Minute))
	w.wait(inst, state.SignalInterrupted, "")
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil {
		time.Sleep(100 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatal("runner still running after the spot notice")
	}
	time.Sleep(2 * time.Second)
	if now := w.runnerPID(); now != pid && now != 0 && syscall.Kill(now, 0) == nil {
		t.Fatalf("runner restarted (pid %d) on an interrupted instance", now)
	}
}

// An agent that starts while a spot notice stands and cannot read its
// record yet (DynamoDB failing) still says the notice once it can: the
// notice is heard at start, not five seconds later, and it waits for the
// record to bind it to the assignment instead of being dropped. (With the
// old loop, which looked after five seconds and wrote nothing without a
// record read: "waiting for UD_INTERRUPTED: … deadline exceeded".)
func TestAnAgentStartingUnderASpotNoticeWithoutItsRecordStillSaysIt(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "")
	inst := w.create("run-spot-late", "spot")
	dynamo := w.dynamoDBOutage()
	w.imds.InterruptSpot("terminate", time.Now().Add(2*time.Minute))
	dynamo.down.Store(true)
	w.start()
	time.Sleep(8 * time.Second) // past the old loop's first look, the record never read
	dynamo.down.Store(false)
	w.wait(inst, state.SignalInterrupted, "")
}
