// Command ghrunner shows an operator what a deployment holds, from its
// state table: the pools, their instances, a run. It only reads, so a role
// with dynamodb:GetItem, Query and BatchGetItem on the table is enough.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

const usage = `usage: ghrunner [--table T] [--region R] [--profile P] [--endpoint URL] <command> [flags]

Shows what a ghrunner deployment holds, from its state table.

Commands:
  status               every pool: instances by state, the idle window active now
                       and its idle count, the oldest idle instance, runs in flight;
                       when refresh and scale-down last ran and what they did
  instances            live instances, by pool and state (--pool P, --state S)
  runs                 the runs in flight: their pool, status, label and instances by state
  run <runId>          a run and the records of the instances it was given
  tail <runId>         follow a run: its status, its instances' states and signals as they
                       change (--interval D), until it is released and its instances are
                       pooled or gone; one line per change, or one JSON object with --json
  retire <instanceId>  take an idle instance out of the pool (--reason R): its lease ends,
                       refresh terminates it; refused for an instance serving a run
  drain <pool>         the pool takes no new run, pools nothing and keeps nothing idle;
                       its idle instances are retired now, its runs finish (--off ends it)

retire and drain are the commands that write (dynamodb:UpdateItem on the table).

Every command takes --json. Global flags:
`

func main() {
	// Ctrl-C ends a tail cleanly; the other commands finish their reads.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command line; it returns the exit code: 0 done, 1 the table
// could not be read, 2 bad input.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	global := flag.NewFlagSet("ghrunner", flag.ContinueOnError)
	global.SetOutput(stderr)
	table := global.String("table", os.Getenv("GHRUNNER_TABLE"), "the state table (the module's table_name output; env GHRUNNER_TABLE)")
	env := awsconf.FromEnv()
	region := global.String("region", env.Region, "AWS region (env AWS_REGION)")
	profile := global.String("profile", os.Getenv("AWS_PROFILE"), "shared config profile (env AWS_PROFILE)")
	endpoint := global.String("endpoint", env.Endpoint, "AWS endpoint, e.g. the sandbox's (env AWS_ENDPOINT_URL)")
	global.Usage = func() { fmt.Fprint(stderr, usage); global.PrintDefaults() }
	if err := global.Parse(args); err != nil {
		return exitUsage(err)
	}
	rest := global.Args()
	if len(rest) == 0 {
		global.Usage()
		return 2
	}
	cmd, rest := rest[0], rest[1:]
	fs := flag.NewFlagSet("ghrunner "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	var pool, st, reason *string
	var off *bool
	var interval *time.Duration
	switch cmd {
	case "status":
		fs.Usage = func() { fmt.Fprintln(stderr, "usage: ghrunner status [--json]"); fs.PrintDefaults() }
	case "instances":
		pool = fs.String("pool", "", "only this pool")
		st = fs.String("state", "", "only this state: "+strings.Join(stateNames(), ", "))
		fs.Usage = func() {
			fmt.Fprintln(stderr, "usage: ghrunner instances [--pool P] [--state S] [--json]")
			fs.PrintDefaults()
		}
	case "runs":
		fs.Usage = func() { fmt.Fprintln(stderr, "usage: ghrunner runs [--json]"); fs.PrintDefaults() }
	case "run":
		fs.Usage = func() { fmt.Fprintln(stderr, "usage: ghrunner run <runId> [--json]"); fs.PrintDefaults() }
	case "tail":
		interval = fs.Duration("interval", time.Second, "how often to read the run (each read is a GetItem and a BatchGetItem)")
		fs.Usage = func() {
			fmt.Fprintln(stderr, "usage: ghrunner tail <runId> [--interval 1s] [--json]")
			fs.PrintDefaults()
		}
	case "retire":
		reason = fs.String("reason", "", "why, kept in the record (terminatedReason)")
		fs.Usage = func() {
			fmt.Fprintln(stderr, "usage: ghrunner retire <instanceId> [--reason R] [--json]")
			fs.PrintDefaults()
		}
	case "drain":
		off = fs.Bool("off", false, "end the drain: the pool takes runs and pools instances again")
		fs.Usage = func() {
			fmt.Fprintln(stderr, "usage: ghrunner drain <pool> [--off] [--json]")
			fs.PrintDefaults()
		}
	case "help":
		global.Usage()
		return 0
	default:
		printf(stderr, "ghrunner: unknown command %q: one of status, instances, runs, run, tail, retire, drain (ghrunner --help)\n", cmd)
		return 2
	}
	// Flags may come before or after the arguments (run 42 --json).
	var positional []string
	for {
		if err := fs.Parse(rest); err != nil {
			return exitUsage(err)
		}
		if fs.NArg() == 0 {
			break
		}
		positional, rest = append(positional, fs.Arg(0)), fs.Args()[1:]
	}
	if wantsID := cmd == "run" || cmd == "tail" || cmd == "retire" || cmd == "drain"; wantsID && len(positional) != 1 || !wantsID && len(positional) != 0 {
		fs.Usage()
		return 2
	}
	if *table == "" {
		fmt.Fprintln(stderr, "ghrunner: --table: required (or GHRUNNER_TABLE): the state table, the module's table_name output")
		return 2
	}
	opts := env
	opts.Region, opts.Profile, opts.Endpoint = *region, *profile, *endpoint
	if err := opts.Validate(); err != nil {
		printf(stderr, "ghrunner: %s\n", err)
		return 2
	}
	cfg, err := awsconf.Load(ctx, opts)
	if err != nil {
		printf(stderr, "ghrunner: %s\n", err)
		return 2
	}
	store := state.New(cfg.DynamoDB(), *table)
	if cmd == "tail" {
		if *interval < 100*time.Millisecond {
			fmt.Fprintln(stderr, "ghrunner: --interval: must be at least 100ms")
			return 2
		}
		enc := json.NewEncoder(stdout)
		err := ops.Tail(ctx, store, positional[0], *interval, func(e ops.Event) {
			if *asJSON {
				enc.Encode(e)
				return
			}
			printf(stdout, "%s  %-20s %s\n", e.At.Format("15:04:05"), e.Instance, e.What)
		})
		if err != nil {
			return fail(stderr, err)
		}
		return 0
	}

	var out any
	var render func(w *tabwriter.Writer)
	switch cmd {
	case "status":
		pools, err := ops.Status(ctx, store, time.Now())
		if err != nil {
			return fail(stderr, err)
		}
		last, err := ops.Scheduled(ctx, store, bundle.HandlerRefresh, bundle.HandlerScaleDown)
		if err != nil {
			return fail(stderr, err)
		}
		v := ops.StatusView{Pools: pools, Scheduled: last}
		out, render = v, func(w *tabwriter.Writer) { renderStatus(w, v, time.Now()) }
	case "instances":
		insts, err := ops.Instances(ctx, store, *pool, state.State(*st))
		if err != nil {
			return fail(stderr, err)
		}
		out, render = insts, func(w *tabwriter.Writer) { renderInstances(w, insts, time.Now()) }
	case "runs":
		v, err := ops.Runs(ctx, store)
		if err != nil {
			return fail(stderr, err)
		}
		out, render = v, func(w *tabwriter.Writer) { renderRuns(w, v, time.Now()) }
	case "run":
		v, err := ops.Run(ctx, store, positional[0])
		if err != nil {
			return fail(stderr, err)
		}
		out, render = v, func(w *tabwriter.Writer) { renderRun(w, v, time.Now()) }
	case "retire":
		v, err := ops.Retire(ctx, store, positional[0], *reason)
		if err != nil {
			return fail(stderr, err)
		}
		out, render = v, func(w *tabwriter.Writer) {
			printf(w, "%s retired (%s): its lease has ended, no provision claims it, refresh terminates it\n", v.ID, v.Terminated)
		}
	case "drain":
		v, err := ops.Drain(ctx, store, positional[0], !*off)
		if err != nil {
			return fail(stderr, err)
		}
		out, render = v, func(w *tabwriter.Writer) { renderDrain(w, v) }
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return fail(stderr, err)
		}
		return 0
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	render(w)
	w.Flush()
	return 0
}

func exitUsage(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func fail(stderr io.Writer, err error) int {
	// An error may quote a record (a retire refused names its run).
	printf(stderr, "ghrunner: %s\n", err)
	if ops.IsBadInput(err) {
		return 2
	}
	return 1
}

func stateNames() []string {
	var s []string
	for _, st := range ops.LiveStates {
		s = append(s, string(st))
	}
	return s
}
