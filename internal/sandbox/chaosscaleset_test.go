package sandbox

import (
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// TestInvariant14FlagsTwoJobsOnOneInstanceAtOnce: the check of invariant
// 14 finds two jobs whose spans on one instance overlap, and nothing in
// jobs one after the other, on other instances or that never ended. No
// product control lets one instance carry two runners to disable in a
// chaos run (an instance's agent runs one runner at a time), so this is
// how the check is shown to catch its violation.
func TestInvariant14FlagsTwoJobsOnOneInstanceAtOnce(t *testing.T) {
	t0 := time.Now()
	at := func(d int) time.Time { return t0.Add(time.Duration(d) * time.Second) }
	on := func(id int64, inst string, from, to int) fakegithub.Job {
		j := fakegithub.Job{ID: id, Runner: state.JITRunnerName(1, 1, inst), Started: at(from)}
		if to >= 0 {
			j.Finished = at(to)
		}
		return j
	}
	rel := func(t time.Time) string { return t.Sub(t0).String() }
	clean := []fakegithub.Job{on(1, "i-0a", 0, 5), on(2, "i-0a", 5, 9), on(3, "i-0b", 1, 8), on(4, "i-0a", 6, -1), {ID: 5}}
	if v := jobsAtOnce(clean, rel); len(v) != 0 {
		t.Errorf("jobs one after the other, on other instances or never ended: %v", v)
	}
	v := jobsAtOnce(append(clean, on(6, "i-0b", 7, 12)), rel)
	if len(v) != 1 || !strings.Contains(v[0], "[14] instance i-0b ran jobs 3 and 6 at once") {
		t.Errorf("jobs 3 and 6 overlap on i-0b: %v", v)
	}
}
