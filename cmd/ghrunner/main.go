// Command ghrunner shows an operator what a deployment holds, from its
// state table: the pools, their instances, a run. It only reads, so a role
// with dynamodb:GetItem, Query and BatchGetItem on the table is enough
// (cost also asks pricing:GetProducts and ec2:DescribeSpotPriceHistory;
// retire and drain write).
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

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

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
	global.Usage = func() { usage(stderr); global.PrintDefaults() }
	if err := global.Parse(args); err != nil {
		return exitUsage(err)
	}
	rest := global.Args()
	if len(rest) == 0 {
		global.Usage()
		return 2
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		global.Usage()
		return 0
	}
	cmd := lookup(name)
	if cmd == nil {
		printf(stderr, "ghrunner: unknown command %q: one of %s (ghrunner --help)\n", name, strings.Join(commandNames(), ", "))
		return 2
	}
	fs := flag.NewFlagSet("ghrunner "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	action := cmd.flags(fs)
	fs.Usage = func() { printf(stderr, "usage: %s\n", cmd.usageLine()); fs.PrintDefaults() }
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
	if wantsArg := cmd.arg != ""; wantsArg && len(positional) != 1 || !wantsArg && len(positional) != 0 {
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
	arg := ""
	if len(positional) == 1 {
		arg = positional[0]
	}
	out, render, err := action(ctx, invocation{store: state.New(cfg.DynamoDB(), *table), aws: cfg, arg: arg, asJSON: *asJSON, stdout: stdout})
	if err != nil {
		return fail(stderr, err)
	}
	if render == nil {
		return 0 // the command printed as it went (tail)
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
