package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

func renderStatus(w *tabwriter.Writer, v ops.StatusView, now time.Time) {
	pools := v.Pools
	printf(w, "POOL\tOWNER\tREGISTRATION\tCREATED\tCLAIMED\tRUNNING\tIDLE\tMAX\tIDLE WINDOW NOW\tOLDEST IDLE\tRUNS IN FLIGHT\n")
	for _, p := range pools {
		window := "none (keeps 0 idle)"
		switch {
		case p.Draining:
			window = "draining (keeps 0 idle, takes no run)"
		case p.IdleWindow != nil:
			window = fmt.Sprintf("%s %s (keeps %d)", p.IdleWindow.Cron, p.IdleWindow.TimeZone, p.IdleWindow.IdleCount)
		}
		oldest := "-"
		if p.Counts[state.Idle] > 0 {
			oldest = (time.Duration(p.OldestIdleSeconds) * time.Second).String()
		}
		runs := "-"
		if len(p.RunsInFlight) > 0 {
			runs = fmt.Sprintf("%d: %s", len(p.RunsInFlight), strings.Join(p.RunsInFlight, ", "))
		}
		printf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", p.Pool, p.Owner, p.Registration,
			p.Counts[state.Created], p.Counts[state.Claimed], p.Counts[state.Running], p.Counts[state.Idle], p.MaxInstances, window, oldest, runs)
	}
	if len(pools) == 0 {
		printf(w, "(no pools in this table)\n")
	}
	for _, p := range pools {
		var refused []string
		for _, id := range slices.Sorted(maps.Keys(p.JITRefused)) {
			refused = append(refused, fmt.Sprintf("%s %d", id, p.JITRefused[id]))
		}
		if len(refused) > 0 {
			printf(w, "pool %s: just-in-time requests refused (ghrunner instances says why): %s\n", p.Pool, strings.Join(refused, ", "))
		}
		if b := p.SpotBreaker; b != nil && b.Open {
			launches := "launches on-demand"
			if !b.OnDemand {
				launches = "launches spot all the same (the pool has no on_demand_fallback)"
			}
			printf(w, "pool %s: spot breaker open for %s (%d interruptions in %s): %s\n", p.Pool, until(b.OpenUntil, now), b.Interruptions, state.SpotBreakerWindow, launches)
		}
	}
	printf(w, "\n")
	// The runner release each pool is to run, and what its instances run.
	printf(w, "POOL	RUNNER VERSION	TARGET NOW	INSTANCES BY VERSION\n")
	for _, p := range pools {
		var versions []string
		for v, n := range p.RunnerVersions {
			versions = append(versions, fmt.Sprintf("%s: %d", v, n))
		}
		sort.Strings(versions)
		printf(w, "%s\t%s\t%s\t%s\n", p.Pool, cmp.Or(p.RunnerSpec, "-"), cmp.Or(p.RunnerTarget, "-"), cmp.Or(strings.Join(versions, ", "), "-"))
	}
	printf(w, "\n")
	if len(v.ScaleSets) > 0 {
		renderScaleSets(w, v.ScaleSets, now)
		printf(w, "\n")
	}
	printf(w, "SCHEDULED\tLAST RUN\tTOOK\tRESULT\tWHAT IT DID\n")
	for _, r := range v.Scheduled {
		result := "ok"
		if r.Error != "" {
			result = "failed: " + r.Error
		}
		var did []string
		for _, k := range slices.Sorted(maps.Keys(r.Counts)) {
			if r.Counts[k] > 0 {
				did = append(did, fmt.Sprintf("%s %d", k, r.Counts[k]))
			}
		}
		ago := now.Sub(time.Unix(r.At, 0)).Truncate(time.Second)
		printf(w, "%s\t%s ago\t%.1fs\t%s\t%s\n", r.Handler, ago, r.Seconds, result, dash(strings.Join(did, ", ")))
	}
	if len(v.Scheduled) == 0 {
		printf(w, "(refresh and scale-down have not run yet)\n")
	}
}

func renderInstances(w *tabwriter.Writer, insts []ops.InstanceView, now time.Time) {
	printf(w, "INSTANCE\tPOOL\tSTATE\tRUN\tUSES\tTYPE\tLEASE LEFT\tLAST BEAT\tRUNNER\n")
	for _, in := range insts {
		printf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", in.ID, in.Pool, in.State, dash(in.RunID), in.Uses, in.InstanceType,
			until(in.LeaseUntil, now), ago(in.HeartbeatAt, now), dash(in.RunnerName))
	}
	if len(insts) == 0 {
		printf(w, "(none)\n")
	}
	// Requests an instance made beyond what the control plane lets one
	// cost: an honest agent seldom has any (issue 36 item 1).
	for _, in := range insts {
		if r := in.JITRefused; r != nil && r.Assignment == in.Assignment {
			printf(w, "%s: %d just-in-time requests refused, the last (number %d) %s (%s): %s\n", in.ID, r.Count, r.Seq, ago(r.At, now), r.Clause, r.Why)
		}
	}
}

func renderRun(w *tabwriter.Writer, v *ops.RunView, now time.Time) {
	printf(w, "run\t%s\n", v.ID)
	printf(w, "pool\t%s\n", v.Pool)
	printf(w, "label\t%s\n", dash(v.Label))
	if v.RepositoryID != "" {
		printf(w, "provisioned by\t%s (repository id %s), workflow run %s attempt %s\n", v.Repository, v.RepositoryID, v.WorkflowRun, v.RunAttempt)
	}
	printf(w, "status\t%s%s\n", v.Status, map[bool]string{true: " (" + v.Detail + ")", false: ""}[v.Detail != ""])
	printf(w, "instances asked\t%d\n", v.InstanceCount)
	if len(v.Interrupted) > 0 {
		printf(w, "lost to spot\t%s: %s\n", strings.Join(v.Interrupted, ", "), dash(v.Rerun))
	}
	printf(w, "started\t%s\n", time.Unix(v.CreatedAt, 0).UTC().Format(time.RFC3339))
	printf(w, "updated\t%s\n\n", time.Unix(v.UpdatedAt, 0).UTC().Format(time.RFC3339))
	printf(w, "INSTANCE\tSTATE\tNOW SERVES\tRUNNER\tSIGNALS (this assignment)\n")
	for _, in := range v.Instances {
		serves := dash(in.RunID)
		if in.RunID != v.ID {
			serves += " (moved on)"
		}
		var sigs []string
		for name, s := range in.Signals {
			if s.Assignment == in.Assignment {
				sigs = append(sigs, name+" "+ago(s.At, now)+map[bool]string{true: ": " + s.Detail, false: ""}[s.Detail != ""])
			}
		}
		sort.Strings(sigs)
		printf(w, "%s\t%s\t%s\t%s\t%s\n", in.ID, in.State, serves, dash(in.RunnerName), dash(strings.Join(sigs, "; ")))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func until(unix int64, now time.Time) string {
	if unix == 0 {
		return "-"
	}
	return time.Unix(unix, 0).Sub(now).Truncate(time.Second).String()
}

func ago(unix int64, now time.Time) string {
	if unix == 0 {
		return "-"
	}
	return now.Sub(time.Unix(unix, 0)).Truncate(time.Second).String() + " ago"
}

func renderDrain(w *tabwriter.Writer, v *ops.DrainView) {
	if !v.Draining {
		printf(w, "pool %s no longer drains: it takes runs and pools instances again\n", v.Pool)
		return
	}
	printf(w, "pool %s is draining: it takes no new run, pools nothing and keeps nothing idle\n", v.Pool)
	printf(w, "retired now (refresh terminates them):\t%d\t%s\n", len(v.Retired), strings.Join(v.Retired, ", "))
	if len(v.AlreadyRetired) > 0 {
		printf(w, "retired before (refresh terminates them):\t%d\t%s\n", len(v.AlreadyRetired), strings.Join(v.AlreadyRetired, ", "))
	}
	for id, why := range v.Left {
		printf(w, "left:\t%s\t%s\n", id, why)
	}
	runs := "none"
	if len(v.RunsInFlight) > 0 {
		runs = strings.Join(v.RunsInFlight, ", ")
	}
	printf(w, "runs in flight (they finish; release retires their instances):\t%d\t%s\n", len(v.RunsInFlight), runs)
}

func renderRuns(w *tabwriter.Writer, runs []ops.RunSummary, now time.Time) {
	printf(w, "RUN\tPOOL\tSTATUS\tLABEL\tAGE\tCREATED\tCLAIMED\tRUNNING\n")
	for _, r := range runs {
		age := "-"
		if r.CreatedAt > 0 {
			age = now.Sub(time.Unix(r.CreatedAt, 0)).Truncate(time.Second).String()
		}
		printf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", r.ID, r.Pool, dash(string(r.Status)), dash(r.Label), age,
			r.Instances[state.Created], r.Instances[state.Claimed], r.Instances[state.Running])
	}
	if len(runs) == 0 {
		printf(w, "(no run holds an instance now)\n")
	}
}
