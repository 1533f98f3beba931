package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The operator's commands, once: --help lists them from here, and the
// parser takes each command's flags and argument from here and runs what
// its flags function returns, so a command is named in one place.

// invocation is what a command runs with once its flags are parsed.
type invocation struct {
	store  *state.Store
	aws    awsconf.Config // for what is not in the table (cost's prices)
	arg    string         // the positional argument, when the command takes one
	asJSON bool
	stdout io.Writer
}

// action reads or writes the table and returns what to print: out for
// --json, render for the table. A nil render means it printed as it went.
type action func(ctx context.Context, in invocation) (out any, render func(*tabwriter.Writer), err error)

type command struct {
	name  string
	arg   string // the positional argument's name in the usage line ("" for none)
	extra string // the usage line's flags besides --json
	// help says what the command shows or does, in --help's list: lines
	// of at most 70 characters.
	help []string
	// flags defines the command's flags on fs and returns its action,
	// which reads them once they are parsed.
	flags func(fs *flag.FlagSet) action
}

const usageHead = `usage: ghrunner [--table T] [--region R] [--profile P] [--endpoint URL] <command> [flags]

Shows what a ghrunner deployment holds, from its state table.

Commands:
`

const usageTail = `
retire and drain are the commands that write (dynamodb:UpdateItem on the table).
cost also asks pricing:GetProducts and ec2:DescribeSpotPriceHistory.

Every command takes --json. Global flags:
`

// usage writes ghrunner --help's text before the global flags: the
// commands and their help, from the table.
func usage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	for _, c := range commands {
		name := c.name
		if c.arg != "" {
			name += " <" + c.arg + ">"
		}
		for i, line := range c.help {
			if i > 0 {
				name = ""
			}
			printf(w, "  %-20s %s\n", name, line)
		}
	}
	fmt.Fprint(w, usageTail)
}

func (c *command) usageLine() string {
	parts := []string{"ghrunner", c.name}
	if c.arg != "" {
		parts = append(parts, "<"+c.arg+">")
	}
	if c.extra != "" {
		parts = append(parts, c.extra)
	}
	return strings.Join(append(parts, "[--json]"), " ")
}

var commands = []command{
	{name: "status", help: []string{
		"every pool: instances by state, the idle window active now",
		"and its idle count, the oldest idle instance, runs in flight;",
		"when refresh and scale-down last ran and what they did; each",
		"scale set: its session's holder, last poll, jobs and last error"},
		flags: func(*flag.FlagSet) action {
			return func(ctx context.Context, in invocation) (any, func(*tabwriter.Writer), error) {
				pools, err := ops.Status(ctx, in.store, time.Now())
				if err != nil {
					return nil, nil, err
				}
				last, err := ops.Scheduled(ctx, in.store, bundle.HandlerRefresh, bundle.HandlerScaleDown)
				if err != nil {
					return nil, nil, err
				}
				sets, err := ops.ScaleSets(ctx, in.store)
				if err != nil {
					return nil, nil, err
				}
				v := ops.StatusView{Pools: pools, Scheduled: last, ScaleSets: sets}
				return v, func(w *tabwriter.Writer) { renderStatus(w, v, time.Now()) }, nil
			}
		}},
	{name: "instances", help: []string{"live instances, by pool and state (--pool P, --state S)"},
		extra: "[--pool P] [--state S]", flags: func(fs *flag.FlagSet) action {
			pool := fs.String("pool", "", "only this pool")
			st := fs.String("state", "", "only this state: "+strings.Join(stateNames(), ", "))
			return func(ctx context.Context, in invocation) (any, func(*tabwriter.Writer), error) {
				insts, err := ops.Instances(ctx, in.store, *pool, state.State(*st))
				if err != nil {
					return nil, nil, err
				}
				return insts, func(w *tabwriter.Writer) { renderInstances(w, insts, time.Now()) }, nil
			}
		}},
	{name: "runs", help: []string{"the runs in flight: their pool, status, label and instances by state"},
		flags: func(*flag.FlagSet) action {
			return func(ctx context.Context, in invocation) (any, func(*tabwriter.Writer), error) {
				v, err := ops.Runs(ctx, in.store)
				if err != nil {
					return nil, nil, err
				}
				return v, func(w *tabwriter.Writer) { renderRuns(w, v, time.Now()) }, nil
			}
		}},
	{name: "run", help: []string{"a run and the records of the instances it was given"},
		arg: "runId", flags: func(*flag.FlagSet) action {
			return func(ctx context.Context, in invocation) (any, func(*tabwriter.Writer), error) {
				v, err := ops.Run(ctx, in.store, in.arg)
				if err != nil {
					return nil, nil, err
				}
				return v, func(w *tabwriter.Writer) { renderRun(w, v, time.Now()) }, nil
			}
		}},
	{name: "tail", help: []string{
		"follow a run: its status, its instances' states and signals as they",
		"change (--interval D), until it is released and its instances are",
		"pooled or gone; one line per change, or one JSON object with --json"},
		arg: "runId", extra: "[--interval 1s]", flags: func(fs *flag.FlagSet) action {
			interval := fs.Duration("interval", time.Second, "how often to read the run (each read is a GetItem and a BatchGetItem)")
			return func(ctx context.Context, in invocation) (any, func(*tabwriter.Writer), error) {
				if *interval < 100*time.Millisecond {
					return nil, nil, ops.BadInput("--interval", "must be at least 100ms")
				}
				enc := json.NewEncoder(in.stdout)
				return nil, nil, ops.Tail(ctx, in.store, in.arg, *interval, func(e ops.Event) {
					if in.asJSON {
						enc.Encode(e)
						return
					}
					printf(in.stdout, "%s  %-20s %s\n", e.At.Format("15:04:05"), e.Instance, e.What)
				})
			}
		}},
	{name: "cost", help: []string{
		"instance time by state (job, warm, stopped), its price and EBS's,",
		"queue time and estimated hosted minutes per repo, pool or run",
		"(--since 7d, --by repo|pool|run); asks AWS's prices too"},
		extra: "[--since 7d] [--by repo|pool|run]", flags: costFlags},
	{name: "retire", help: []string{
		"take an idle instance out of the pool (--reason R): its lease ends,",
		"refresh terminates it; refused for an instance serving a run"},
		arg: "instanceId", extra: "[--reason R]", flags: func(fs *flag.FlagSet) action {
			reason := fs.String("reason", "", "why, kept in the record (terminatedReason)")
			return func(ctx context.Context, in invocation) (any, func(*tabwriter.Writer), error) {
				v, err := ops.Retire(ctx, in.store, in.arg, *reason)
				if err != nil {
					return nil, nil, err
				}
				return v, func(w *tabwriter.Writer) {
					printf(w, "%s retired (%s): its lease has ended, no provision claims it, refresh terminates it\n", v.ID, v.Terminated)
				}, nil
			}
		}},
	{name: "drain", help: []string{
		"the pool takes no new run, pools nothing and keeps nothing idle;",
		"its idle instances are retired now, its runs finish (--off ends it)"},
		arg: "pool", extra: "[--off]", flags: func(fs *flag.FlagSet) action {
			off := fs.Bool("off", false, "end the drain: the pool takes runs and pools instances again")
			return func(ctx context.Context, in invocation) (any, func(*tabwriter.Writer), error) {
				v, err := ops.Drain(ctx, in.store, in.arg, !*off)
				if err != nil {
					return nil, nil, err
				}
				return v, func(w *tabwriter.Writer) { renderDrain(w, v) }, nil
			}
		}},
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func commandNames() []string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return names
}
