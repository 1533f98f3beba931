// Command agent is the ghrunner instance agent: started by user data on
// every runner instance, it registers the GitHub runner for the run its
// record names, cleans up after each run and keeps the instance honest
// (heartbeat, self-termination). See docs/design.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/agent/imds"
	"github.com/ghrunner/terraform-provider-ghrunner/agent/lifecycle"
	"github.com/ghrunner/terraform-provider-ghrunner/agent/logship"
	"github.com/ghrunner/terraform-provider-ghrunner/agent/runner"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/cwlogs"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The main goroutine keeps the main thread to itself, so no other
// goroutine ever runs there: a goroutine that locks a thread and changes
// it (a runner's own session keyring, agent/runner/keyrings.go) ends that
// thread afterwards, and Go cannot end the main thread — it would keep the
// change for the whole process. No thread of the agent changes its uid:
// that work runs in a helper process (agent/runner/keyhelper.go).
func init() { runtime.LockOSThread() }

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ghrunner-agent:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("ghrunner-agent", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: ghrunner-agent [-config FILE] [-check] [-SETTING VALUE ...]

The ghrunner instance agent. Reads its configuration from FILE (default %s),
then GHRUNNER_* environment variables, then the flags below, each later one
winning; the instance id and region come from the instance metadata service
(IMDSv2). Every setting of the file is settable all three ways, by the same
name, except %s:
test fixtures and fault injection, which only the file sets.

`, config.DefaultPath, strings.Join(config.FileOnly, ", "))
		fs.PrintDefaults()
	}
	path := fs.String("config", config.DefaultPath, "configuration file written by user data")
	check := fs.Bool("check", false, "validate the configuration and exit")
	showVersion := fs.Bool("version", false, "print the version and exit")
	overrides := config.Flags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *showVersion {
		fmt.Println(version)
		return nil
	}
	cfg, err := config.Load(*path, isFlagSet(fs, "config"))
	if err != nil {
		return err
	}
	if err := cfg.Apply(overrides); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	// The record is keyed <role id>:<instance id>: without the role the
	// agent would read a key no record has and wait for one forever. The
	// configuration of a template (templates, the user_data data source)
	// may leave it out; an agent that runs may not.
	if cfg.RoleID == "" {
		return errors.New("config: roleId: required: the pool's instance role id (ghrunner_pool.instance_role_id), the first half of the agent's record key")
	}
	if *check {
		fmt.Println("configuration is valid")
		return nil
	}
	// The pool's proxy, set on the agent itself before its first request
	// (net/http reads the variables once): its AWS and GitHub calls go
	// through it, and so do the runner's (agent/runner/env.go passes the
	// variables on) and the package manager's, which inherit them.
	for _, kv := range cfg.ProxyEnv() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	// With a log group the agent's log also goes to CloudWatch; the
	// stream buffers from the first line and sends once the instance id
	// names it (shipLogs).
	var out io.Writer = os.Stdout
	var agentLog *logship.Stream
	if cfg.LogGroup != "" {
		agentLog = &logship.Stream{Group: cfg.LogGroup}
		out = io.MultiWriter(os.Stdout, agentLog)
	}
	log := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level(cfg.LogLevel)})).With("component", "agent", "version", version)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	meta := imds.New(cfg.IMDSEndpoint)
	id, err := meta.Identity(ctx)
	if err != nil {
		return err
	}
	region := cfg.Region
	if region == "" {
		region = id.Region
	}
	aws, err := awsconf.Load(ctx, awsconf.Options{Region: region, Endpoint: cfg.Endpoint, Endpoints: cfg.Endpoints})
	if err != nil {
		return err
	}
	if agentLog != nil {
		done := shipLogs(ctx, cfg, aws, id.InstanceID, agentLog, log)
		defer done()
	}
	run := &runner.Runner{Install: cfg.RunnerDir, Dir: cfg.RunDir, WorkDir: cfg.WorkDir, User: cfg.RunnerUser, StateDir: cfg.StateDir}
	now := func() time.Time { return time.Now().Add(cfg.ClockOffset.Duration) }
	store := state.New(aws.DynamoDB(), cfg.Table)
	store.Now = now
	agent := &lifecycle.Agent{
		Config:     cfg,
		InstanceID: id.InstanceID,
		Key:        state.InstanceKey(cfg.RoleID, id.InstanceID),
		Now:        now,
		Store:      store,
		EC2:        aws.EC2(),
		Spot:       meta,
		Runner:     run,
		Log:        log,
		Prepare: func(ctx context.Context) error {
			var target *runnerrelease.Target
			if !runner.Installed(cfg.RunnerDir) {
				target = bootTarget(ctx, store, state.InstanceKey(cfg.RoleID, id.InstanceID), log)
			}
			return install(ctx, cfg, run, target, log)
		},
	}
	// The pid tells an agent's restarts apart in its log stream.
	log.Info("agent starting", "pid", os.Getpid(), "instanceId", id.InstanceID, "record", agent.Key, "region", region, "table", cfg.Table)
	err = agent.Run(ctx)
	if errors.Is(err, lifecycle.ErrTerminated) || errors.Is(err, context.Canceled) {
		log.Info("agent stopped", "reason", err.Error())
		return nil
	}
	return err
}

// install makes the runner ready to run: an install preinstalled in the
// image is taken as it is (the image's builder installed its libraries);
// otherwise the libraries the runner needs come first, from the
// distribution's package manager, then the tarball. The install is sealed
// either way. A failure is the agent's to report (lifecycle's prepare).
func install(ctx context.Context, cfg config.Config, run *runner.Runner, target *runnerrelease.Target, log *slog.Logger) error {
	run.RecoverSwap()
	url, sum := cfg.RunnerTarballURL, cfg.RunnerTarballSHA256
	if target != nil {
		// The pool's target when the instance was recorded: a new instance
		// starts on it, not on what its launch template named.
		url, sum = target.URL, target.SHA256
	}
	if !runner.Installed(cfg.RunnerDir) && url != "" {
		if err := runner.InstallDependencies(ctx, cfg.OSRelease, log.Info); err != nil {
			return err
		}
	}
	if err := runner.Install(ctx, cfg.RunnerDir, url, sum); err != nil {
		return err
	}
	if err := run.Seal(); err != nil {
		return fmt.Errorf("runnerDir: %w", err)
	}
	return nil
}

// bootTarget reads the runner target the control plane wrote into the
// instance's record (provision writes the record right after the launch;
// a record not there within bootTargetWait is not waited for: the user
// data's tarball is installed and the idle upgrade catches up). Only when
// no runner is installed yet.
func bootTarget(ctx context.Context, store *state.Store, key state.Key, log *slog.Logger) *runnerrelease.Target {
	deadline := time.Now().Add(bootTargetWait)
	for {
		rec, err := store.Get(ctx, key)
		if err == nil {
			return rec.RunnerTarget
		}
		if !state.IsNotFound(err) {
			log.Warn("read the record for the runner target", "err", err)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// bootTargetWait bounds bootTarget's wait for the record.
const bootTargetWait = 20 * time.Second

// shipLogs sends the agent's log and the user data's output to the pool's
// log group until the returned func is called (the agent's last lines are
// sent then, within a few seconds).
func shipLogs(ctx context.Context, cfg config.Config, aws awsconf.Config, instanceID string, agentLog *logship.Stream, log *slog.Logger) (done func()) {
	api := cwlogs.Client(aws)
	os.MkdirAll(cfg.StateDir, 0o700) // the user data log's offset lives there
	// Lines CloudWatch rejects for their time are lost: said once per
	// stream, on standard output (the journal) as well.
	warn := func(stream string) func(int, string) {
		return func(lines int, why string) {
			log.Warn("CloudWatch Logs rejected log lines for their time", "stream", stream, "lines", lines, "why", why)
		}
	}
	agentLog.API, agentLog.Name, agentLog.Warn = api, instanceID+"/agent", warn(instanceID+"/agent")
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); agentLog.Run(sctx, cfg.LogFlush.Duration) }()
	if cfg.UserDataLog != "" {
		userData := &logship.Stream{API: api, Group: cfg.LogGroup, Name: instanceID + "/user-data", Warn: warn(instanceID + "/user-data")}
		wg.Add(1)
		go func() {
			defer wg.Done()
			logship.Follow(sctx, userData, cfg.UserDataLog, filepath.Join(cfg.StateDir, "user-data-log.offset"), cfg.LogFlush.Duration)
		}()
	}
	return func() { cancel(); wg.Wait() }
}

func isFlagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func level(s string) slog.Level {
	var l slog.Level
	l.UnmarshalText([]byte(s))
	return l
}
