package sandbox

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Deployment is what terraform created, from its outputs.
type Deployment struct {
	Functions map[string]string // handler -> function name
	Table     string
	Queues    map[string]string // pool -> URL
	// ListenerService is the scale-set listener's ECS service (name), ""
	// without a scale set (DeployOptions.ScaleSet).
	ListenerService string
}

// DeployOptions change what Deploy applies.
type DeployOptions struct {
	// IdleWindowCron is the pool's idle window (two idle instances kept);
	// "" is IdleWindowCron(now), twelve hours away: the pool keeps nobody
	// idle today, so the story's scale-down trims it to nothing.
	IdleWindowCron string
	// MaxRuntimeSeconds is the pools' running lease; 0 is the example's
	// 60 s, whose derived control-loop timings are short (1 s heartbeats).
	// 3600, the default, gives production's (15 s heartbeats).
	MaxRuntimeSeconds int
	// TokenPoolIdleWindowCron is the token pool's idle window; "" is
	// IdleWindowCron's.
	TokenPoolIdleWindowCron string
	// GitHubParameter is the SSM parameter the functions read the GitHub
	// App's credentials from; "" is GitHubParameter, which Start fills.
	// Another name starts empty: the caller writes it (the getting-started
	// guide's test runs the guide's own aws ssm put-parameter).
	GitHubParameter string
	// MaxProvisionsPerRepository and MaxQueuedPerRepository are both
	// pools' fair-share limits (0: unset, no limit).
	MaxProvisionsPerRepository, MaxQueuedPerRepository int
	// ScaleSet, when set, makes the linux pool serve a runner scale set of
	// that name: the module deploys the listener as an ECS service, which
	// the sandbox runs from the image the provider pushed.
	ScaleSet string
	// SpotPool adds the spot pool PoolSpot (max_instances 3, no idle
	// window), whose instances the chaos suite interrupts (chaosspot.go).
	SpotPool bool
	// StoppedPool adds the pool PoolStopped, with a stopped tier (two
	// kept 60 s) and no idle window, that the story plays
	// (storystopped.go).
	StoppedPool bool
	// LinuxStopped, when set, gives the linux pool a stopped tier.
	LinuxStopped *StoppedTier
}

// StoppedTier is a pool's `stopped` setting.
type StoppedTier struct {
	Max         int `json:"max"`
	KeepSeconds int `json:"keep_seconds"`
}

// StoryDeploy is how the story deploys: the JIT pool keeps nobody idle
// today and serves a scale set too (its listener an ECS service), the
// token pool keeps two idle all the time, so refresh pre-warms it before
// its first workflow; a third pool has a stopped tier (storystopped.go).
var StoryDeploy = DeployOptions{TokenPoolIdleWindowCron: "* * * * *", ScaleSet: StoryScaleSet, StoppedPool: true}

// ChaosDeploy is how the chaos suite deploys: an idle window active every
// minute, so that the scale-down it runs every few seconds both keeps idle
// instances (up to two) and terminates the others while workflows claim
// and release them; and fair-share limits the flooding repository runs
// into (chaosflood.go). They are above what the ordinary workflows hold:
// at most Concurrency plus a long job's provisions in flight, and the
// leases of their killed provisions, which last until the invocation's
// deadline (15 minutes), about 15 on the JIT pool in a 60-workflow run.
// The linux pool has a stopped tier (chaosstopped.go): the instances
// scale-down would terminate beyond the two idle are stopped, and
// workflows that find none warm start them.
var ChaosDeploy = DeployOptions{IdleWindowCron: "* * * * *", MaxProvisionsPerRepository: 32, MaxQueuedPerRepository: 16, ScaleSet: ChaosScaleSet, SpotPool: true,
	LinuxStopped: &ChaosStoppedTier}

// Deploy runs terraform init and apply of examples/sandbox (the runner-pool
// module) against the sandbox, with the provider `make install` put in
// mirror. The configuration is copied under Dir, so the repository stays clean.
func (s *Sandbox) Deploy(ctx context.Context, mirror string, progress io.Writer) (Deployment, error) {
	return s.DeployWith(ctx, mirror, progress, DeployOptions{})
}

// DeployWith is Deploy with options.
func (s *Sandbox) DeployWith(ctx context.Context, mirror string, progress io.Writer, o DeployOptions) (Deployment, error) {
	var d Deployment
	if o.IdleWindowCron == "" {
		o.IdleWindowCron = IdleWindowCron(time.Now())
	}
	root := filepath.Join(s.opts.Dir, "terraform")
	// Every sandbox starts with an empty moto: state, lock file and plugins
	// of an earlier one (and its provider build) would only be in the way.
	if err := os.RemoveAll(root); err != nil {
		return d, err
	}
	for _, dir := range []string{"examples/sandbox", "modules/runner-pool"} {
		if err := CopyTerraform(filepath.Join(s.opts.Repo, dir), filepath.Join(root, dir)); err != nil {
			return d, err
		}
	}
	work := filepath.Join(root, "examples/sandbox")
	n, err := s.Moto.NetworkContext(ctx)
	if err != nil {
		return d, err
	}
	vars := map[string]any{"endpoint": s.URL, "architecture": runtime.GOARCH, "image_id": n.AMI, "subnet_id": n.Subnet,
		"github_parameter": cmp.Or(o.GitHubParameter, GitHubParameter), "idle_window_cron": o.IdleWindowCron, "token_pool_idle_window_cron": o.TokenPoolIdleWindowCron,
		// The functions verify the invoking jobs' tokens against the fake
		// GitHub's issuer.
		"oidc_issuer": s.GitHub.Issuer()}
	if o.MaxProvisionsPerRepository > 0 {
		vars["max_provisions_per_repository"] = strconv.Itoa(o.MaxProvisionsPerRepository)
	}
	if o.MaxQueuedPerRepository > 0 {
		vars["max_queued_per_repository"] = strconv.Itoa(o.MaxQueuedPerRepository)
	}
	if o.MaxRuntimeSeconds > 0 {
		vars["max_runtime_seconds"] = strconv.Itoa(o.MaxRuntimeSeconds)
	}
	if o.ScaleSet != "" {
		vars["scale_set"], vars["security_group_id"] = o.ScaleSet, n.SecurityGroup
	}
	if o.SpotPool {
		vars["spot_pool"] = PoolSpot
	}
	if o.StoppedPool {
		vars["stopped_pool"] = PoolStopped
	}
	if o.LinuxStopped != nil {
		vars["linux_stopped"] = o.LinuxStopped
	}
	raw, _ := json.MarshalIndent(vars, "", "  ")
	if err := os.WriteFile(filepath.Join(work, "terraform.tfvars.json"), raw, 0o644); err != nil {
		return d, err
	}
	mirror, err = filepath.Abs(mirror) // terraform runs in another folder
	if err != nil {
		return d, err
	}
	cliConfig := filepath.Join(mirror, "terraformrc")
	if _, err := os.Stat(cliConfig); err != nil {
		return d, fmt.Errorf("no provider mirror at %s: run make install", mirror)
	}
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "terraform", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+cliConfig, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
			"AWS_ACCESS_KEY_ID=sandbox", "AWS_SECRET_ACCESS_KEY=sandbox")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	for _, step := range [][]string{{"init", "-input=false", "-no-color"}, {"apply", "-input=false", "-no-color", "-auto-approve"}} {
		start := time.Now()
		fmt.Fprintf(progress, "  terraform %s ...", step[0])
		out, err := run(step...)
		if err != nil {
			fmt.Fprintln(progress)
			return d, err
		}
		summary := ""
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "Apply complete!") {
				summary = " " + strings.TrimSpace(line)
			}
		}
		fmt.Fprintf(progress, " done in %.1fs%s\n", time.Since(start).Seconds(), summary)
	}
	out, err := run("output", "-json")
	if err != nil {
		return d, err
	}
	var outputs struct {
		Functions struct{ Value map[string]string } `json:"functions"`
		Table     struct{ Value string }            `json:"table"`
		Queues    struct{ Value map[string]string } `json:"queues"`
		Listener  struct{ Value *string }           `json:"listener_service_arn"`
	}
	if err := json.Unmarshal([]byte(out), &outputs); err != nil {
		return d, err
	}
	d = Deployment{Functions: outputs.Functions.Value, Table: outputs.Table.Value, Queues: outputs.Queues.Value}
	if arn := outputs.Listener.Value; arn != nil {
		d.ListenerService = (*arn)[strings.LastIndex(*arn, "/")+1:]
	}
	s.SetTable(d.Table)
	return d, nil
}

// IdleWindowCron is a one-hour idle window twelve hours away from now (UTC).
func IdleWindowCron(now time.Time) string {
	return fmt.Sprintf("* %d * * *", (now.UTC().Hour()+12)%24)
}

// CopyTerraform copies the .tf files of one folder into another, so that a
// configuration can be planned without writing into the repository.
func CopyTerraform(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".tf") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
