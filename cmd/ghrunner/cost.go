package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/cost"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// ghrunner cost: the cost report of a window up to now (internal/cost).
// Besides the table's reads it asks pricing:GetProducts (the Price List
// API, in us-east-1) and ec2:DescribeSpotPriceHistory with the caller's
// credentials; a price it cannot have is shown as "no price", never 0.

func costFlags(fs *flag.FlagSet) action {
	since := fs.String("since", "7d", "the window: from this long ago until now (e.g. 36h, 7d; at most the ledger's 35d)")
	by := fs.String("by", string(cost.ByRepo), "group by repo, pool or run")
	return func(ctx context.Context, in invocation) (any, func(*tabwriter.Writer), error) {
		window, err := parseSince(*since)
		if err != nil {
			return nil, nil, err
		}
		if !slices.Contains(cost.Bys, cost.By(*by)) {
			return nil, nil, ops.BadInput("--by", fmt.Sprintf("%q is not one of repo, pool, run", *by))
		}
		now := time.Now()
		prices := &cost.Prices{Region: in.aws.AWS.Region, Pricing: in.aws.Pricing(), EC2: in.aws.EC2(), From: now.Add(-window), To: now}
		r, err := cost.Read(ctx, in.store, prices, now.Add(-window), now, cost.By(*by), now)
		if err != nil {
			return nil, nil, err
		}
		return r, func(w *tabwriter.Writer) { renderCost(w, r) }, nil
	}
}

// parseSince reads a window: a Go duration (36h) or a number of days (7d).
func parseSince(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	switch {
	case err != nil:
		return 0, ops.BadInput("--since", fmt.Sprintf("%q is not a duration such as 36h or 7d", s))
	case d <= 0:
		return 0, ops.BadInput("--since", fmt.Sprintf("%q must be positive", s))
	case d > state.UsageKeep:
		return 0, ops.BadInput("--since", fmt.Sprintf("%q is longer than the %dd the usage ledger keeps", s, int(state.UsageKeep.Hours()/24)))
	}
	return d, nil
}

func renderCost(w *tabwriter.Writer, r *cost.Report) {
	printf(w, "cost from %s to %s, by %s (%d spans, %d still open)\n\n", r.From.UTC().Format(time.RFC3339), r.To.UTC().Format(time.RFC3339), r.By, r.Spans, r.Open)
	printf(w, "%s\tRUNS\tJOB\tWARM\tSTOPPED\tINSTANCE $\tEBS $\tTOTAL $\tQUEUE MEAN/MAX\tHOSTED MIN (EST.)\n", strings.ToUpper(string(r.By)))
	var notes []string
	for _, row := range append(slices.Clone(r.Rows), r.Total) {
		queue := "-"
		if row.QueuedRuns > 0 {
			queue = fmt.Sprintf("%.0fs/%ds", row.QueueMeanSeconds, row.QueueMaxSeconds)
		}
		printf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", row.Key, row.Runs, hours(row.JobSeconds), hours(row.WarmSeconds),
			hours(row.StoppedSeconds), usd(row.InstanceUSD), usd(row.VolumeUSD), usd(row.TotalUSD), queue, row.HostedMinutesEst)
		if row != r.Total {
			for _, why := range row.Unpriced {
				notes = append(notes, row.Key+": "+why)
			}
		}
	}
	for _, n := range notes {
		printf(w, "no price: %s\n", n)
	}
	for _, l := range r.Limits {
		printf(w, "note: %s\n", l)
	}
}

// hours writes instance time for a person to read: hours to two decimals
// from an hour up, below that minutes and seconds, so a short run reads
// 10m40s rather than 0.18h and a run of seconds never reads 0.00h.
func hours(secs int64) string {
	if secs >= 3600 {
		return fmt.Sprintf("%.2fh", float64(secs)/3600)
	}
	return (time.Duration(secs) * time.Second).String()
}

func usd(v *float64) string {
	if v == nil {
		return "no price"
	}
	return fmt.Sprintf("%.4f", *v)
}
