package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/cost"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// The story's last step: the operator's cost report (`ghrunner cost`, the
// real command, with operator credentials, against the endpoint, which
// serves the Price List API: pricing.go) of the runs it played, checked
// against what the story itself saw of them.

// runSeen is what the story saw of a run it played: each instance was
// the run's from before boundBy (provision's answer says when, in seconds
// since it began, which was after the story asked and before it answered
// by the call's elapsed time) and no earlier than provision was asked,
// until release, asked at release and answered at released, made it
// idle.
type runSeen struct {
	provision, release, released time.Time
	boundBy                      []time.Time
}

func seenOf(out provision.Output, asked, answered, release, released time.Time) runSeen {
	began := answered.Add(-time.Duration(out.ElapsedSeconds * float64(time.Second))) // at the latest
	s := runSeen{provision: asked, release: release, released: released}
	for _, in := range out.Instances {
		s.boundBy = append(s.boundBy, began.Add(time.Duration(in.ClaimedSeconds*float64(time.Second))))
	}
	return s
}

func (st *Story) saw(runID string, s runSeen) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seen[runID] = s
}

// jobSeconds bounds the job seconds the ledger may hold for the run; a
// span's ends are whole seconds, so an instance's total may be a second
// off either way.
func (s runSeen) jobSeconds() (lo, hi int64) {
	for _, by := range s.boundBy {
		lo += max(0, int64(math.Floor(s.release.Sub(by).Seconds()))-1)
		hi += int64(math.Ceil(s.released.Sub(s.provision).Seconds())) + 1
	}
	return lo, hi
}

// buildCLI builds the ghrunner command in the background (while the story
// waits on a keep time or a schedule), so the last step only runs it.
func (st *Story) buildCLI() {
	go testbin.Build(testbin.Module + "/cmd/ghrunner")
}

// costReport runs `ghrunner cost --since 1h --by run`, prints its table in
// the progress and checks its JSON: every run the story played has a
// price and the job seconds the story saw it hold its instances (the
// stopped tier's first run's are shown).
func (st *Story) costReport(ctx context.Context) {
	const known = "run-2001" // the stopped tier's first workflow (storystopped.go)
	args := []string{"cost", "--since", "1h", "--by", "run"}
	st.check("ghrunner "+strings.Join(args, " ")+": the story's runs, priced",
		"every run played priced, its job seconds within what the story saw", func() (string, bool) {
			text, err := st.ghrunner(ctx, args...)
			if err != nil {
				return err.Error(), false
			}
			for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
				fmt.Fprintf(st.out, "         %s\n", line)
			}
			raw, err := st.ghrunner(ctx, append(args, "--json")...)
			if err != nil {
				return err.Error(), false
			}
			var r cost.Report
			if err := json.Unmarshal([]byte(raw), &r); err != nil {
				return fmt.Sprintf("ghrunner cost --json: %v", err), false
			}
			return st.judgeCost(&r, known)
		})
}

// judgeCost checks the report against the runs the story saw.
func (st *Story) judgeCost(r *cost.Report, known string) (string, bool) {
	st.mu.Lock()
	seen := maps.Clone(st.seen)
	st.mu.Unlock()
	rows := map[string]*cost.Row{}
	for _, row := range r.Rows {
		rows[row.Key] = row
	}
	var bad []string
	for _, id := range sortedKeysOf(seen) {
		row := rows[id]
		// A run that held its instances for under a second or two may
		// have none: spans end on whole seconds (a fresh-clone run's
		// run-1004 released 2 s after provision had 0).
		lo, hi := seen[id].jobSeconds()
		switch {
		case row == nil:
			bad = append(bad, id+" missing")
		case row.JobSeconds < lo || row.JobSeconds > hi:
			bad = append(bad, fmt.Sprintf("%s has %d job seconds, the story saw %d–%d", id, row.JobSeconds, lo, hi))
		case row.TotalUSD == nil || row.JobSeconds > 0 && *row.TotalUSD <= 0:
			bad = append(bad, fmt.Sprintf("%s has no price: %s", id, strings.Join(row.Unpriced, "; ")))
		}
	}
	got := fmt.Sprintf("%d rows, %d of the %d runs played priced", len(r.Rows), len(seen)-len(bad), len(seen))
	if r.Total != nil && r.Total.TotalUSD != nil {
		got += fmt.Sprintf(", $%.4f in all", *r.Total.TotalUSD)
	}
	s, played := seen[known]
	row := rows[known]
	if !played || row == nil {
		return got + "; " + known + " not played or not reported", false
	}
	lo, hi := s.jobSeconds()
	got += fmt.Sprintf("; %s: %d job seconds on %d instances, the story saw %d–%d", known, row.JobSeconds, len(s.boundBy), lo, hi)
	if len(bad) > 0 {
		got += "; " + strings.Join(bad, "; ")
	}
	return got, len(bad) == 0 && row.JobSeconds >= lo && row.JobSeconds <= hi
}

// ghrunner runs the ghrunner command against the endpoint, as an operator
// with the sandbox's credentials, and returns what it printed.
func (st *Story) ghrunner(ctx context.Context, args ...string) (string, error) {
	bin, err := testbin.Build(testbin.Module + "/cmd/ghrunner")
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--endpoint", st.sb.URL, "--region", Region, "--table", st.d.Table}, args...)...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=operator", "AWS_SECRET_ACCESS_KEY=operator")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ghrunner %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
