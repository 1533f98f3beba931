package sandbox

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Print writes the report as a table.
func (r ChaosReport) Print(w io.Writer) {
	fmt.Fprintf(w, "\nchaos (seed %d): %d workflows (%d with every step ok, %d failed by the faults), %d jobs, %.0fs\n",
		r.Seed, r.Workflows, r.Succeeded, r.Failed, r.Jobs, r.Elapsed.Seconds())
	names := make([]string, 0, len(r.Faults))
	total := 0
	for name, n := range r.Faults {
		names = append(names, name)
		total += n
	}
	sort.Strings(names)
	fmt.Fprintf(w, "  %-72s %5s\n", "fault injected", "times")
	for _, name := range names {
		fmt.Fprintf(w, "  %-72s %5d\n", name, r.Faults[name])
	}
	fmt.Fprintf(w, "  %-72s %5d\n", "total", total)
	a := r.Activity
	if a != nil {
		fmt.Fprintf(w, "  meanwhile: refresh ran %d× (%d failed, %d with errors): %d terminated, %d expired, %d pre-warmed (%d joined the pool);\n",
			a["refresh runs"], a["refresh runs failed"], a["refresh runs with errors"], a["refresh terminated"], a["refresh expired"],
			a["refresh pre-warmed"], a["refresh joined"])
		fmt.Fprintf(w, "             scale-down ran %d× (%d failed, %d with errors): %d terminated, %d stopped, %d kept;\n",
			a["scale-down runs"], a["scale-down runs failed"], a["scale-down runs with errors"], a["scale-down terminated"], a["scale-down stopped"], a["scale-down kept"])
		fmt.Fprintf(w, "             stopped tier: %d instances started for a run, %d starts EC2 refused (a launch instead);\n",
			a["instances started from the stopped tier"], a["starts EC2 refused (a launch instead)"])
		fmt.Fprintf(w, "             at most %d instances of a pool live at once (max_instances %d); %d workflows on the token pool\n",
			a["peak live instances"], a["max_instances"], a["token-pool workflows"])
		if a["release published at s"] > 0 {
			fmt.Fprintf(w, "             a runner release published at +%ds, the pool pointed at it at +%ds: %d jobs of just-in-time runs claimed since ran on it; %d update messages to listeners with no job waiting\n",
				a["release published at s"], a["release learned at s"], a["jobs on the new release"], a["update messages with no job waiting"])
		}
	}
	if a != nil && a["scale-set workflows"] > 0 {
		fmt.Fprintf(w, "  scale set %s: %d workflows, %d jobs (none with an invoking job); the listener's task started %d times\n",
			ChaosScaleSet, a["scale-set workflows"], a["scale-set jobs"], a["listener task starts"])
	}
	if f := r.Flood; f != nil {
		fmt.Fprintf(w, "  flood by %s (max_provisions_per_repository %d, max_queued_per_repository %d): %d provisions asked: %d answered ready (released),\n",
			Flooder, f["max_provisions_per_repository"], f["max_queued_per_repository"], f["attempts"], f["ready"])
		fmt.Fprintf(w, "             %d crashed (killed once the share showed one more lease), %d refused by max_provisions_per_repository, %d by max_queued_per_repository;\n",
			f["crashed"], f["refused max_provisions_per_repository"], f["refused max_queued_per_repository"])
		fmt.Fprintf(w, "             at most %d leases and %d queue places held at once (%s: %d and %d); %d of %s's provisions after its first refusal, %d ready\n",
			f["peak leases"], f["peak places"], Repo, f["ordinary peak leases"], f["ordinary peak places"], f["ordinary after refusal"], Repo, f["ordinary ready after refusal"])
		for _, k := range sortedKeysOf(f) {
			if why, ok := strings.CutPrefix(k, "failed: "); ok {
				fmt.Fprintf(w, "    %3d  flood provision failed otherwise: %s\n", f[k], why)
			}
		}
	}
	if len(r.Failures) > 0 {
		reasons := make([]string, 0, len(r.Failures))
		for why := range r.Failures {
			reasons = append(reasons, why)
		}
		sort.Strings(reasons)
		fmt.Fprintln(w, "  failed workflows, by first failed step [the fault the workflow drew]:")
		for _, why := range reasons {
			fmt.Fprintf(w, "    %3d  %s\n", r.Failures[why], why)
		}
	}
	if len(r.Explained) > 0 {
		fmt.Fprintf(w, "  explained by an injected kill of the instance's agent (not violations): %d\n", len(r.Explained))
		for _, e := range r.Explained {
			fmt.Fprintln(w, "    "+strings.TrimSpace(e))
		}
	}
	fmt.Fprintf(w, "  violations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintln(w, "    "+strings.TrimSpace(v))
	}
}
