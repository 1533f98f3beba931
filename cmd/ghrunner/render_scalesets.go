package main

import (
	"text/tabwriter"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
)

// renderScaleSets is status's table of the pools' scale sets: who holds
// each one's session and how long ago a poll of it answered (a listener
// killed leaves its last status, whose poll then grows old), GitHub's
// counts, the standing runs held and the last error. The listener's error
// is GitHub's text, so it goes through printf like every value.
func renderScaleSets(w *tabwriter.Writer, sets []ops.ScaleSetView, now time.Time) {
	printf(w, "SCALE SET\tPOOL\tSESSION HELD BY\tLAST POLL\tASSIGNED\tRUNNING\tIDLE\tLIVE RUNS\tLAST ERROR\n")
	for _, s := range sets {
		l := s.Listener
		if l == nil {
			printf(w, "%s\t%s\t%s\t-\t-\t-\t-\t-\t-\n", s.ScaleSet, s.Pool, "no listener has served it")
			continue
		}
		holder := l.Holder
		if holder == "" {
			holder = "nobody (since " + ago(l.SessionAt, now) + ")"
		}
		lastErr := "-"
		if l.Error != "" {
			lastErr = ago(l.ErrorAt, now) + ": " + l.Error
		}
		st := l.Statistics
		printf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", s.ScaleSet, s.Pool, holder, ago(l.PolledAt, now),
			st.Assigned, st.Running, st.Idle, l.LiveRuns, lastErr)
	}
}
