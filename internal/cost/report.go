// Package cost reports what runs cost and how long their jobs queued, from
// the usage ledger the control plane writes (state/usage.go) and AWS's
// prices (issue 41, item 2). docs/operations.md explains the figures.
//
// Decisions, and why:
//   - Time comes from the control plane only: a span is the time a record
//     spent in one state between two transitions, both stamped with the
//     control plane's clock. Nothing the instance role can write feeds a
//     figure (the agent's heartbeat, signals or its record's state are
//     not read). An instance EC2 runs with no record, or before its record
//     is written, is not counted: the report is a lower bound of EC2's bill.
//   - Which transitions reach the ledger: all of them (created, claimed,
//     running, idle, stopped, terminated; state/usage.go says how). An
//     expired lease is no state: its time counts in the record's state
//     until the termination. Lost span writes are counted
//     (Store.UsageCounts; the functions' and the listener's
//     UsageSpansRecorded and UsageSpansLost metrics).
//   - States count as: job (created, claimed, running: bound to a run,
//     from its boot or claim until its release), warm (idle) and stopped.
//     An instance costs its hourly price in job and warm time; its root
//     volume costs in all three (EC2 bills a stopped instance's volume,
//     not its compute). Per-second, without EC2's one-minute minimum.
//   - Prices: on-demand from the Price List API (Linux, shared tenancy),
//     spot as the mean of the window's spot price history over every zone
//     (the record keeps no zone), EBS per GB-month of the pool's root
//     volume type (730 hours a month, as AWS's pricing pages count).
//     A price that cannot be had leaves its rows without a figure and
//     says why; it is never taken as zero.
//   - Queue time of a run, provision mode: from its run item's creation
//     (provision was asked) until its first runner was online (the span
//     that ended in running). GitHub's own queue before that call is not
//     seen. Scale-set mode: the job's JobStarted message, from its
//     QueueTime to its RunnerAssignTime (GitHub's clock; the listener
//     keeps them in the run's job): a standing run's item and runner
//     come before its job, so they say nothing of its wait. A run whose
//     message lacked a stamp has no queue time.
//   - GitHub-hosted minutes (provision mode, an estimate): the provision
//     job waits for the runners, so whole minutes of its queue time, plus
//     one minute for the release job (GitHub rounds each job up to a
//     minute). Scale-set runs have no invoking jobs.
package cost

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// By names how rows are grouped.
type By string

const (
	ByRepo By = "repo"
	ByPool By = "pool"
	ByRun  By = "run"
)

// Bys lists the groupings.
var Bys = []By{ByRepo, ByPool, ByRun}

// secondsPerMonth is AWS's month of 730 hours, in which EBS's GB-month is priced.
const secondsPerMonth = 730 * 3600

// PriceBook answers prices (Prices, or a test's).
type PriceBook interface {
	Hourly(ctx context.Context, instanceType, usageClass string) (float64, error)
	VolumeMonthly(ctx context.Context, volumeType string) (float64, error)
}

// Row is one group's figures. A nil USD figure has no price: Unpriced says why.
type Row struct {
	Key            string   `json:"key"`
	Runs           int      `json:"runs"`
	JobSeconds     int64    `json:"jobSeconds"`
	WarmSeconds    int64    `json:"warmSeconds"`
	StoppedSeconds int64    `json:"stoppedSeconds"`
	InstanceUSD    *float64 `json:"instanceUsd"`
	VolumeUSD      *float64 `json:"volumeUsd"`
	TotalUSD       *float64 `json:"totalUsd"`
	Unpriced       []string `json:"unpriced,omitempty"`
	// Queue is over the group's runs whose queue time is known.
	QueuedRuns       int     `json:"queuedRuns"`
	QueueMeanSeconds float64 `json:"queueMeanSeconds"`
	QueueMaxSeconds  int64   `json:"queueMaxSeconds"`
	HostedMinutesEst int     `json:"hostedMinutesEstimate"`
	unpriced         map[string]bool
	instUSD, volUSD  float64
	instOK, volOK    bool
	runs             map[string]bool
	queueSum, queueN int64
}

// Report is the figures of a window.
type Report struct {
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	By     By        `json:"by"`
	Rows   []*Row    `json:"rows"`
	Total  *Row      `json:"total"`
	Spans  int       `json:"spans"`
	Open   int       `json:"openSpans"`
	Limits []string  `json:"limits,omitempty"`
}

// RunInfo is what a run item tells the report; nil when it is gone (runs
// are kept 7 days).
type RunInfo struct {
	Repository string
	CreatedAt  int64
	ScaleSet   bool
	// JobQueue is a scale-set job's queue time from its messages (the
	// run's job's QueueSeconds), when they had both stamps.
	JobQueue   int64
	JobQueueOK bool
}

// Build groups spans (clipped to [from, to)) by by and prices them.
func Build(ctx context.Context, spans []state.Span, runs map[string]*RunInfo, volumes map[string]state.RootVolume,
	prices PriceBook, from, to time.Time, by By) *Report {
	r := &Report{From: from, To: to, By: by}
	rows := map[string]*Row{}
	r.Total = newRow("total")
	online := map[string]int64{} // run → when its first runner was online
	for _, sp := range spans {
		if sp.Next == state.Running && sp.RunID != "" && (online[sp.RunID] == 0 || sp.To < online[sp.RunID]) {
			online[sp.RunID] = sp.To
		}
	}
	for _, sp := range spans {
		sp.From, sp.To = max(sp.From, from.Unix()), min(sp.To, to.Unix())
		if sp.To <= sp.From && !(sp.Next == state.Running && sp.RunID != "") {
			continue
		}
		r.Spans++
		if sp.Open {
			r.Open++
		}
		key := keyOf(sp, runs, by)
		row := rows[key]
		if row == nil {
			row = newRow(key)
			rows[key] = row
		}
		for _, target := range []*Row{row, r.Total} {
			target.add(ctx, sp, volumes, prices)
			if sp.RunID != "" && !target.runs[sp.RunID] {
				target.runs[sp.RunID] = true
				target.addRun(runs[sp.RunID], online[sp.RunID])
			}
		}
	}
	for _, row := range rows {
		row.finish()
		r.Rows = append(r.Rows, row)
	}
	r.Total.finish()
	sort.Slice(r.Rows, func(i, j int) bool { return r.Rows[i].Key < r.Rows[j].Key })
	return r
}

func newRow(key string) *Row {
	return &Row{Key: key, unpriced: map[string]bool{}, runs: map[string]bool{}, instOK: true, volOK: true}
}

func keyOf(sp state.Span, runs map[string]*RunInfo, by By) string {
	switch {
	case by == ByPool:
		return sp.Pool
	case sp.RunID == "":
		return "(no run: " + sp.Pool + " " + string(sp.State) + ")"
	case by == ByRun:
		return sp.RunID
	case runs[sp.RunID] == nil || runs[sp.RunID].Repository == "":
		return "(run item gone: " + sp.Pool + ")"
	}
	return runs[sp.RunID].Repository
}

func (row *Row) add(ctx context.Context, sp state.Span, volumes map[string]state.RootVolume, prices PriceBook) {
	secs := float64(sp.Seconds())
	switch sp.State {
	case state.Idle:
		row.WarmSeconds += sp.Seconds()
	case state.Stopped:
		row.StoppedSeconds += sp.Seconds()
	default:
		row.JobSeconds += sp.Seconds()
	}
	if sp.State != state.Stopped && secs > 0 {
		if h, err := prices.Hourly(ctx, sp.InstanceType, sp.UsageClass); err != nil {
			row.instOK = false
			row.unpriced[fmt.Sprintf("%s %s: %v", sp.UsageClass, sp.InstanceType, err)] = true
		} else {
			row.instUSD += h * secs / 3600
		}
	}
	if secs == 0 {
		return
	}
	vol, ok := volumes[sp.Pool]
	if !ok || vol.GiB <= 0 {
		row.volOK = false
		row.unpriced[fmt.Sprintf("pool %s: root volume unknown (its pool config is gone or predates the report)", sp.Pool)] = true
		return
	}
	if m, err := prices.VolumeMonthly(ctx, vol.Type); err != nil {
		row.volOK = false
		row.unpriced[fmt.Sprintf("ebs %s: %v", vol.Type, err)] = true
	} else {
		row.volUSD += m * float64(vol.GiB) * secs / secondsPerMonth
	}
}

func (row *Row) addRun(info *RunInfo, online int64) {
	row.Runs++
	var q int64
	switch {
	case info == nil:
		return
	case info.ScaleSet:
		// A standing run's item and runner precede its job: only the
		// messages' stamps say how long the job queued.
		if !info.JobQueueOK {
			return
		}
		q = info.JobQueue
	case info.CreatedAt == 0 || online == 0:
		return
	default:
		q = max(0, online-info.CreatedAt)
	}
	row.queueSum += q
	row.queueN++
	row.QueueMaxSeconds = max(row.QueueMaxSeconds, q)
	if !info.ScaleSet {
		row.HostedMinutesEst += int(math.Ceil(float64(q)/60)) + 1
	}
}

func (row *Row) finish() {
	if row.instOK {
		row.InstanceUSD = ptr(round(row.instUSD))
	}
	if row.volOK {
		row.VolumeUSD = ptr(round(row.volUSD))
	}
	if row.instOK && row.volOK {
		row.TotalUSD = ptr(round(row.instUSD + row.volUSD))
	}
	for why := range row.unpriced {
		row.Unpriced = append(row.Unpriced, why)
	}
	sort.Strings(row.Unpriced)
	row.QueuedRuns = int(row.queueN)
	if row.queueN > 0 {
		row.QueueMeanSeconds = math.Round(float64(row.queueSum)/float64(row.queueN)*10) / 10
	}
}

// round rounds to a millionth of a dollar: exact enough to sum, without
// float noise in JSON.
func round(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func ptr(v float64) *float64 { return &v }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
