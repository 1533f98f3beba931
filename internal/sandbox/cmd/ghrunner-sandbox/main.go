// Command ghrunner-sandbox runs ghrunner on this machine with nothing from
// AWS or GitHub; see `ghrunner-sandbox -h`.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

const usage = `usage: ghrunner-sandbox [flags] <command>

Runs ghrunner on this machine: moto for AWS, a fake GitHub, the functions as
terraform deployed them (served on one AWS endpoint), one agent process per
EC2 instance, and the schedules.

commands:
  play    start, deploy examples/sandbox with terraform, play the story, print
          the summary and stop (make sandbox); exit status 0 only if every step passed
  up      start and deploy, write .sandbox/env, and keep running until stopped
          (make sandbox-up runs it in the background)
  chaos   start and deploy, play -workflows workflows with random faults (seeded
          by -seed), check the invariants and print the figures (make chaos);
          exit status 0 only if there is no violation
  down    stop a sandbox started with up (make sandbox-down)
  job     queue a job for a provisioned run's runners (runs-on: the label
          provision returned) in the fake GitHub and wait for it:
          ghrunner-sandbox job <runId> [script]
  invoke  call a function through the endpoint, as aws lambda invoke does
          (for machines without the AWS CLI; reads .sandbox/env's variables);
          a provision or release payload gets the idToken of a job of the
          sandbox repository's workflow run its runId names:
          ghrunner-sandbox invoke provision '{"runId":"42","pool":"linux","instanceCount":2}'

flags:
`

func main() {
	dir := flag.String("dir", ".sandbox", "working folder (logs, instances, terraform state, env, pid)")
	mirror := flag.String("mirror", ".terraform-mirror", "provider mirror written by make install")
	workflows := flag.Int("workflows", 60, "chaos: how many workflows")
	seed := flag.Int64("seed", 1, "chaos: the seed of the fault choices")
	var off []string
	flag.Func("off", "chaos: a group of faults not to inject, repeatable or comma-separated: "+strings.Join(faultGroups(), ", "), func(v string) error {
		off = append(off, strings.Split(v, ",")...)
		return nil
	})
	flag.Usage = func() { fmt.Fprint(os.Stderr, usage); flag.PrintDefaults() }
	flag.Parse()
	var err error
	switch flag.Arg(0) {
	case "play", "":
		err = play(*dir, *mirror)
	case "up":
		err = up(*dir, *mirror)
	case "chaos":
		err = chaos(*dir, *mirror, *workflows, *seed, off)
	case "down":
		err = down(*dir)
	case "job":
		err = job(*dir, flag.Arg(1), flag.Arg(2))
	case "invoke":
		err = invoke(*dir, flag.Arg(1), flag.Arg(2))
	default:
		flag.Usage()
		os.Exit(2)
	}
	testbin.Remove() // the agent and fake runner it built for its instances
	if err != nil {
		fmt.Fprintln(os.Stderr, "ghrunner-sandbox:", err)
		os.Exit(1)
	}
}

// start brings the sandbox up and deploys; ctx ends on Ctrl-C or SIGTERM.
func start(ctx context.Context, dir, mirror string, o sandbox.DeployOptions) (*sandbox.Sandbox, sandbox.Deployment, error) {
	repo, err := os.Getwd()
	if err != nil {
		return nil, sandbox.Deployment{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, sandbox.Deployment{}, err
	}
	logPath := filepath.Join(dir, "sandbox.log")
	logs, err := os.Create(logPath)
	if err != nil {
		return nil, sandbox.Deployment{}, err
	}
	t := time.Now()
	fmt.Printf("starting the sandbox (moto, fake GitHub, endpoint, instance host, schedules; logs in %s) ...\n", logPath)
	sb, err := sandbox.Start(ctx, sandbox.Options{Dir: dir, Repo: repo, Logs: logs, LambdaConcurrency: sandbox.NewAccountLambdaConcurrency})
	if err != nil {
		return nil, sandbox.Deployment{}, err
	}
	fmt.Printf("  endpoint %s, fake GitHub %s — up in %.1fs\n", sb.URL, sb.GitHub.URL(), time.Since(t).Seconds())
	fmt.Println("deploying examples/sandbox (modules/runner-pool) with terraform ...")
	d, err := sb.DeployWith(ctx, mirror, os.Stdout, o)
	if err != nil {
		sb.Stop()
		return nil, d, err
	}
	names := make([]string, 0, len(d.Functions))
	for _, n := range d.Functions {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("  table %s, functions %s\n", d.Table, strings.Join(names, ", "))
	return sb, d, nil
}

func play(dir, mirror string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	begin := time.Now()
	sb, d, err := start(ctx, dir, mirror, sandbox.StoryDeploy)
	if err != nil {
		return err
	}
	defer sb.Stop()
	fmt.Println("playing the story (every function call goes through the endpoint's Invoke API) ...")
	story, err := sandbox.NewStory(ctx, sb, d, os.Stdout)
	if err != nil {
		return err
	}
	ok := story.Play(ctx)
	story.Summary(os.Stdout)
	fmt.Printf("make sandbox: %.1fs in all\n", time.Since(begin).Seconds())
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	if !ok {
		return fmt.Errorf("a step did not do what it should (logs: %s)", filepath.Join(dir, "sandbox.log"))
	}
	return nil
}

func faultGroups() []string {
	var out []string
	for g := range sandbox.FaultGroups {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

func chaos(dir, mirror string, workflows int, seed int64, off []string) error {
	if workflows < 1 {
		return fmt.Errorf("-workflows: %d must be at least 1", workflows)
	}
	for _, g := range off {
		if _, ok := sandbox.FaultGroups[g]; !ok {
			return fmt.Errorf("-off %s: no such group of faults; one of %s", g, strings.Join(faultGroups(), ", "))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, d, err := start(ctx, dir, mirror, sandbox.ChaosDeploy)
	if err != nil {
		return err
	}
	defer sb.Stop()
	fmt.Printf("chaos: %d workflows, seed %d (every function call through the endpoint) ...\n", workflows, seed)
	if len(off) > 0 {
		fmt.Printf("  faults left out: %s\n", strings.Join(off, ", "))
	}
	rep, err := sb.Chaos(ctx, d, sandbox.ChaosOptions{Workflows: workflows, Seed: seed, Out: os.Stdout, Off: off})
	rep.Print(os.Stdout)
	if err != nil {
		return err
	}
	if len(rep.Violations) > 0 {
		return fmt.Errorf("%d invariant violations (logs: %s)", len(rep.Violations), filepath.Join(dir, "sandbox.log"))
	}
	return nil
}

func up(dir, mirror string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, d, err := start(ctx, dir, mirror, sandbox.DeployOptions{})
	if err != nil {
		return err
	}
	defer sb.Stop()
	envFile := filepath.Join(dir, "env")
	var b strings.Builder
	for _, kv := range [][2]string{
		{"AWS_ENDPOINT_URL", sb.URL}, {"AWS_REGION", sandbox.Region}, {"AWS_DEFAULT_REGION", sandbox.Region},
		{"AWS_ACCESS_KEY_ID", "sandbox"}, {"AWS_SECRET_ACCESS_KEY", "sandbox"}, {"AWS_MAX_ATTEMPTS", "1"},
		{"GHRUNNER_SANDBOX_URL", sb.URL}, {"GHRUNNER_FAKE_GITHUB_URL", sb.GitHub.URL()}, {"GHRUNNER_TABLE", d.Table},
		{"GHRUNNER_PROVISION_FUNCTION", d.Functions[bundle.HandlerProvision]}, {"GHRUNNER_RELEASE_FUNCTION", d.Functions[bundle.HandlerRelease]},
		{"GHRUNNER_REFRESH_FUNCTION", d.Functions[bundle.HandlerRefresh]}, {"GHRUNNER_SCALE_DOWN_FUNCTION", d.Functions[bundle.HandlerScaleDown]},
	} {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], strconv.Quote(kv[1]))
	}
	if err := os.WriteFile(envFile, []byte(b.String()), 0o644); err != nil {
		return err
	}
	// fileb:// passes the payload as raw bytes in both AWS CLI v1 and v2.
	// The payload needs a job's token (idToken): invoke adds one.
	fmt.Printf("sandbox is up: . %s, then e.g.\n"+
		"  %s invoke provision '{\"runId\":\"42\",\"pool\":\"linux\",\"instanceCount\":1}'\n"+
		"  %s job 42 'echo built on $(hostname)'\n"+
		"  (with the AWS CLI, the payload's idToken comes from POST $GHRUNNER_SANDBOX_URL/_sandbox/idtoken {\"runId\":\"42\"}: README.md)\n",
		envFile, "go run ./internal/sandbox/cmd/ghrunner-sandbox", "go run ./internal/sandbox/cmd/ghrunner-sandbox")
	<-ctx.Done()
	os.Remove(envFile)
	fmt.Println("sandbox stopping")
	return nil
}

func down(dir string) error {
	raw, err := os.ReadFile(filepath.Join(dir, "pid"))
	if errors.Is(err, os.ErrNotExist) {
		fmt.Println("no sandbox running")
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("%s/pid: %v", dir, err)
	}
	defer os.Remove(filepath.Join(dir, "pid"))
	defer os.Remove(filepath.Join(dir, "env"))
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		fmt.Println("sandbox was not running")
		return nil
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			fmt.Println("sandbox stopped")
			return nil
		}
	}
	syscall.Kill(-pid, syscall.SIGKILL)
	syscall.Kill(pid, syscall.SIGKILL)
	return errors.New("sandbox did not stop within 30 s: killed")
}

// job queues a job for a provisioned run's runners through the sandbox's
// job API and waits for it.
func job(dir, runID, script string) error {
	if runID == "" {
		return errors.New("usage: ghrunner-sandbox job <runId> [script]")
	}
	base := os.Getenv("GHRUNNER_SANDBOX_URL")
	if base == "" {
		return fmt.Errorf("GHRUNNER_SANDBOX_URL is not set: run make sandbox-up and . %s/env", dir)
	}
	body, _ := json.Marshal(map[string]string{"runId": runID, "script": script})
	resp, err := http.Post(base+"/_sandbox/jobs", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return fmt.Errorf("queue the job: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	var queued struct {
		ID    int64
		Label string
	}
	err = json.NewDecoder(resp.Body).Decode(&queued)
	resp.Body.Close()
	if err != nil {
		return err
	}
	fmt.Printf("job %d queued for run %s (runs-on: %s); waiting ...\n", queued.ID, runID, queued.Label)
	resp, err = http.Get(fmt.Sprintf("%s/_sandbox/jobs/%d?wait=120s", base, queued.ID))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var j map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		return err
	}
	out, _ := json.MarshalIndent(j, "", "  ")
	fmt.Println(string(out))
	if j["result"] != "succeeded" {
		return fmt.Errorf("job %d did not succeed", queued.ID)
	}
	return nil
}

// invoke calls provision, release, refresh or scale-down (or any function
// name) through the sandbox's Invoke API and prints the answer; a
// FunctionError is printed and makes the exit status 1.
func invoke(dir, function, payload string) error {
	base := os.Getenv("AWS_ENDPOINT_URL")
	if base == "" || function == "" {
		return fmt.Errorf("usage: . %s/env; ghrunner-sandbox invoke <provision|release|refresh|scale-down|function name> [payload]", dir)
	}
	if name := os.Getenv("GHRUNNER_" + strings.ToUpper(strings.ReplaceAll(function, "-", "_")) + "_FUNCTION"); name != "" {
		function = name
	}
	if payload == "" {
		payload = "{}"
	}
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx, awsconf.Options{Region: os.Getenv("AWS_REGION"), Endpoint: base,
		AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY"), MaxAttempts: 1})
	if err != nil {
		return err
	}
	// A provision or release payload without idToken gets the token of a
	// job of the sandbox repository's workflow run its runId names, as a
	// workflow's invoking job would send.
	signed, err := sandbox.Sign(ctx, base, []byte(payload))
	if err != nil {
		return err
	}
	res, err := admin.Lambda(cfg).Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(function), Payload: signed})
	if err != nil {
		return err
	}
	fmt.Println(string(res.Payload))
	if res.FunctionError != nil {
		return fmt.Errorf("%s: %s", function, aws.ToString(res.FunctionError))
	}
	return nil
}
