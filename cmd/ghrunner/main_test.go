package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

// cli runs the command line against moto and returns its exit code and output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "testing")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	var out, errOut bytes.Buffer
	code := run(context.Background(), append([]string{"--region", awstest.Region, "--endpoint", env.URL}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// opsRole is pool linux's instance role id (records are keyed by it).
const opsRole = "AROACLITESTPOOL000001"

func seeded(t *testing.T) string {
	s := statetest.NewStore(t, env)
	if err := s.PutPoolConfig(context.Background(), state.PoolConfig{Name: "linux", Owner: "acme", QueueURL: "https://sqs/q", LaunchTemplateID: "lt-1",
		LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand",
		MaxInstances: 5, Registration: state.RegistrationJIT, InstanceRoleID: opsRole,
		Runner: state.RunnerSpec{Version: runnerrelease.Latest, Arch: "amd64"}}); err != nil {
		t.Fatal(err)
	}
	statetest.Pooled(t, s, statetest.Spec{ID: "i-idle-1", RoleID: opsRole, Pool: "linux", Owner: "acme", InstanceType: "c7i.large", UsageClass: "on-demand"})
	return s.Table()
}

func TestStatusAndInstancesShowTheTable(t *testing.T) {
	table := seeded(t)
	code, out, errOut := cli(t, "--table", table, "status")
	if code != 0 || !strings.Contains(out, "linux") || !strings.Contains(out, "none (keeps 0 idle)") || !strings.Contains(out, "have not run yet") {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	s := state.New(env.Config(t).DynamoDB(), table)
	if err := s.PutLastRun(context.Background(), state.LastRun{Handler: "refresh", Seconds: 0.8, Counts: map[string]int{"terminated": 2, "kept": 0}}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, "--table", table, "status")
	if code != 0 || !strings.Contains(out, "refresh") || !strings.Contains(out, "terminated 2") || strings.Contains(out, "kept 0") {
		t.Fatalf("status after a refresh: exit %d\n%s%s", code, out, errOut)
	}
	// Refresh learned a newer release for the pool following "latest";
	// the idle instance's agent still reports the one it booted with.
	if !regexp.MustCompile(`(?m)^linux\s+latest\s+-\s+unknown: 1$`).MatchString(out) {
		t.Fatalf("status before any release is known: want linux's runner_version latest, no target, its instance unknown\n%s", out)
	}
	if err := s.SetLatestTarget(context.Background(), "linux", runnerrelease.Target{Version: "2.337.0", URL: "https://github.com/actions/runner/releases/download/v2.337.0/actions-runner-linux-x64-2.337.0.tar.gz", SHA256: strings.Repeat("a", 64)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRunnerVersion(context.Background(), state.InstanceKey(opsRole, "i-idle-1"), "2.336.0"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = cli(t, "--table", table, "status")
	if code != 0 || !regexp.MustCompile(`(?m)^POOL\s+RUNNER VERSION\s+TARGET NOW\s+INSTANCES BY VERSION$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^linux\s+latest\s+2\.337\.0\s+2\.336\.0: 1$`).MatchString(out) {
		t.Fatalf("status after refresh learned 2.337.0: want linux's runner_version latest, target 2.337.0, its instance on 2.336.0\n%s%s", out, errOut)
	}
	code, out, errOut = cli(t, "--table", table, "status", "--json")
	var v ops.StatusView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.Pools) != 1 || len(v.Scheduled) != 1 || v.Scheduled[0].Counts["terminated"] != 2 {
		t.Fatalf("status --json: exit %d\n%s%s", code, out, errOut)
	}
	if p := v.Pools[0]; p.RunnerSpec != runnerrelease.Latest || p.RunnerTarget != "2.337.0" || len(p.RunnerVersions) != 1 || p.RunnerVersions["2.336.0"] != 1 {
		t.Fatalf("status --json: runner %q, target %q, instances by version %v; want latest, 2.337.0, 2.336.0: 1", p.RunnerSpec, p.RunnerTarget, p.RunnerVersions)
	}
	code, out, errOut = cli(t, "--table", table, "instances", "--state", "idle", "--json")
	var insts []ops.InstanceView
	if code != 0 || json.Unmarshal([]byte(out), &insts) != nil || len(insts) != 1 || insts[0].ID != "i-idle-1" || insts[0].State != state.Idle {
		t.Fatalf("instances --json: exit %d\n%s%s", code, out, errOut)
	}
}

// Bad input: exit 2, a message naming the flag and the rule, and nothing
// read or written beyond what it takes to say so.
func TestBadInputNamesTheFlag(t *testing.T) {
	table := seeded(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "--table: required"},
		{[]string{"--table", table, "launch"}, `unknown command "launch"`},
		{[]string{"--table", table, "instances", "--state", "sleeping"}, `--state: "sleeping" is not one of created, claimed, running, idle`},
		{[]string{"--table", table, "instances", "--pool", "gpu"}, `--pool: no pool "gpu" in this table (pools: linux)`},
		{[]string{"--table", table, "run", "r-404"}, `no run "r-404"`},
		{[]string{"--table", table, "run"}, "usage: ghrunner run <runId>"},
		{[]string{"--table", table, "run", "a", "b"}, "usage: ghrunner run <runId>"},
		{[]string{"--table", table, "run", "r-404", "--json"}, `no run "r-404"`},
		{[]string{"--table", table, "--endpoint", "ftp://x", "status"}, "endpoint"},
		{[]string{"--table", table, "retire"}, "usage: ghrunner retire <instanceId>"},
		{[]string{"--table", table, "retire", "i-404"}, "no record of i-404"},
		{[]string{"--table", table, "drain"}, "usage: ghrunner drain <pool>"},
		{[]string{"--table", table, "tail"}, "usage: ghrunner tail <runId>"},
		{[]string{"--table", table, "tail", "r-404"}, `no run "r-404"`},
		{[]string{"--table", table, "tail", "r-1", "--interval", "1ms"}, "--interval: must be at least 100ms"},
		{[]string{"--table", table, "drain", "gpu"}, `pool: no pool "gpu" in this table (pools: linux); nothing changed`},
	} {
		code, out, errOut := cli(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want 2 and %q", c.args, code, errOut, out, c.want)
		}
	}
}

func TestRetireTakesAnIdleInstanceOut(t *testing.T) {
	table := seeded(t)
	code, out, errOut := cli(t, "--table", table, "retire", "i-idle-1", "--reason", "bad disk")
	if code != 0 || !strings.Contains(out, "i-idle-1 retired (retired: bad disk)") {
		t.Fatalf("retire: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut = cli(t, "--table", table, "retire", "i-idle-1"); code != 0 {
		t.Fatalf("a second retire of the same instance: exit %d, %s (want 0: nothing left to do)", code, errOut)
	}
}

func TestDrainRetiresTheIdleAndShowsInStatusUntilOff(t *testing.T) {
	table := seeded(t)
	code, out, errOut := cli(t, "--table", table, "drain", "linux")
	if code != 0 || !strings.Contains(out, "pool linux is draining") || !strings.Contains(out, "i-idle-1") {
		t.Fatalf("drain: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ = cli(t, "--table", table, "status"); code != 0 || !strings.Contains(out, "draining (keeps 0 idle, takes no run)") {
		t.Fatalf("status while draining: exit %d\n%s", code, out)
	}
	code, out, errOut = cli(t, "--table", table, "drain", "linux", "--off", "--json")
	var v ops.DrainView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.Draining {
		t.Fatalf("drain --off: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, _ = cli(t, "--table", table, "status"); code != 0 || strings.Contains(out, "draining") {
		t.Fatalf("status after drain --off: exit %d\n%s", code, out)
	}
}

// Issue 40 item 5: an instance retire already retired is not one the drain
// retires: drain lists it apart and leaves its record (and the reason
// retire gave) alone.
func TestDrainDoesNotListAnInstanceRetireRetiredAsRetiredNow(t *testing.T) {
	table := seeded(t)
	if code, out, errOut := cli(t, "--table", table, "retire", "i-idle-1", "--reason", "bad disk"); code != 0 {
		t.Fatalf("retire: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := cli(t, "--table", table, "drain", "linux")
	if code != 0 || !regexp.MustCompile(`(?m)^retired now \(refresh terminates them\):\s+0\s*$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^retired before \(refresh terminates them\):\s+1\s+i-idle-1$`).MatchString(out) {
		t.Fatalf("drain after retire: exit %d; want none retired now and i-idle-1 retired before\n%s%s", code, out, errOut)
	}
	if code, out, errOut = cli(t, "--table", table, "drain", "linux", "--json"); code != 0 {
		t.Fatalf("drain --json: exit %d\n%s%s", code, out, errOut)
	}
	var v ops.DrainView
	if json.Unmarshal([]byte(out), &v) != nil || len(v.Retired) != 0 || len(v.AlreadyRetired) != 1 || v.AlreadyRetired[0] != "i-idle-1" {
		t.Fatalf("drain --json after retire: retired %v, already retired %v; want none and i-idle-1\n%s", v.Retired, v.AlreadyRetired, out)
	}
	code, out, errOut = cli(t, "--table", table, "instances", "--json")
	var insts []ops.InstanceView
	if code != 0 || json.Unmarshal([]byte(out), &insts) != nil || len(insts) != 1 || insts[0].Terminated != "retired: bad disk" {
		t.Fatalf("instances after drain: want i-idle-1 still retired for \"bad disk\"; exit %d\n%s%s", code, out, errOut)
	}
}

func TestHelpEverywhere(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"status", "--help"}, {"instances", "--help"}, {"run", "--help"}, {"retire", "--help"}, {"drain", "--help"}, {"runs", "--help"}, {"tail", "--help"}, {"help"}} {
		code, _, errOut := cli(t, args...)
		if code != 0 || !strings.Contains(errOut, "usage: ghrunner") {
			t.Errorf("%v: exit %d\n%s", args, code, errOut)
		}
	}
}

// TestRefusedJITRequestsAreShown: a just-in-time request the control
// plane refused by what it would cost (issue 36 item 1) shows in status
// (per pool, the instances and their counts) and in instances (the last
// refusal: its number, clause and why), and in instances --json.
func TestRefusedJITRequestsAreShown(t *testing.T) {
	table := seeded(t)
	s := state.New(env.Config(t).DynamoDB(), table)
	key := state.InstanceKey(opsRole, "i-idle-1")
	rec, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RefuseJIT(context.Background(), key, rec.Assignment, state.JITRefusal{Seq: 4, At: time.Now().Unix(), Clause: state.ClauseJITUnused,
		Why: "none of the assignment's configurations 1 to 3 was seen to take a job", Count: 17}, 0); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "--table", table, "status")
	if code != 0 || !strings.Contains(out, "pool linux: just-in-time requests refused (ghrunner instances says why): i-idle-1 17") {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "--table", table, "instances")
	if code != 0 || !strings.Contains(out, "i-idle-1: 17 just-in-time requests refused, the last (number 4)") || !strings.Contains(out, "(jitUnused): none of the assignment's") {
		t.Fatalf("instances: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "--table", table, "instances", "--json")
	var insts []ops.InstanceView
	if code != 0 || json.Unmarshal([]byte(out), &insts) != nil || len(insts) != 1 || insts[0].JITRefused == nil || insts[0].JITRefused.Count != 17 {
		t.Fatalf("instances --json: exit %d\n%s%s", code, out, errOut)
	}
}

// An open spot breaker shows in status: for how long, after how many
// interruptions, and what its pool launches meanwhile; --json says the same.
func TestAnOpenSpotBreakerShowsInStatus(t *testing.T) {
	table := seeded(t)
	s := state.New(env.Config(t).DynamoDB(), table)
	bg := context.Background()
	if err := s.PutPoolConfig(bg, state.PoolConfig{Name: "spotty", Owner: "acme", QueueURL: "https://sqs/q2", LaunchTemplateID: "lt-2",
		LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-1"}, UsageClass: state.UsageClassSpot, OnDemandFallback: true,
		MaxInstances: 5, InstanceRoleID: "AROACLITESTPOOL000002", Runner: state.RunnerSpec{Version: runnerrelease.Latest, Arch: "amd64"}}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "--table", table, "status")
	if code != 0 || strings.Contains(out, "spot breaker") {
		t.Fatalf("status before any interruption: exit %d, want no breaker line\n%s%s", code, out, errOut)
	}
	for _, id := range []string{"i-gone-1", "i-gone-2"} {
		if _, err := s.NoteSpotInterruption(bg, "spotty", id); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut = cli(t, "--table", table, "status")
	if code != 0 || !regexp.MustCompile(`(?m)^pool spotty: spot breaker open for (29m\d+s|30m0s) \(2 interruptions in 15m0s\): launches on-demand$`).MatchString(out) {
		t.Fatalf("status with the breaker open: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = cli(t, "--table", table, "status", "--json")
	var v ops.StatusView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("status --json: exit %d\n%s%s", code, out, errOut)
	}
	for _, p := range v.Pools {
		if want := p.Pool == "spotty"; (p.SpotBreaker != nil && p.SpotBreaker.Open && p.SpotBreaker.OnDemand && p.SpotBreaker.Interruptions == 2) != want {
			t.Fatalf("status --json, pool %s: spot breaker %+v", p.Pool, p.SpotBreaker)
		}
	}
}

// A run that lost an instance to spot says so in ghrunner run, with what
// refresh did about its job.
func TestARunsInstanceLostToSpotShowsInRun(t *testing.T) {
	table := seeded(t)
	s := state.New(env.Config(t).DynamoDB(), table)
	bg := context.Background()
	if _, _, err := s.StartRun(bg, state.Run{ID: "4242", Pool: "linux", InstanceCount: 1, Request: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NoteRunInterrupted(bg, "4242", "i-0lost", "its job is not re-run: re-run all its jobs"); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "--table", table, "run", "4242")
	if code != 0 || !regexp.MustCompile(`(?m)^lost to spot\s+i-0lost: its job is not re-run: re-run all its jobs$`).MatchString(out) {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
}
