package docscheck

import (
	"regexp"
	"testing"
)

var (
	makeChaosTime   = regexp.MustCompile(`# bounded: about (\d+) minutes for (\d+) workflows`)
	makeChaosCount  = regexp.MustCompile(`(?m)^CHAOS_WORKFLOWS \?= (\d+)$`)
	readmeChaosTime = regexp.MustCompile("(?m)^\\| `make chaos`, (\\d+) workflows, IAM enforced \\| about (\\d+) min ")
)

// Issue 40 item 5: how long the default make chaos takes is said twice,
// in the GNUmakefile beside the target and in the README's measured
// table; both name the target's default number of workflows and the same
// time.
func TestTheMakefileAndTheREADMEGiveMakeChaosTheSameTime(t *testing.T) {
	mk, readme := read(t, "GNUmakefile"), read(t, "README.md")
	m, c, r := makeChaosTime.FindStringSubmatch(mk), makeChaosCount.FindStringSubmatch(mk), readmeChaosTime.FindStringSubmatch(readme)
	if m == nil || c == nil || r == nil {
		t.Fatalf("GNUmakefile's chaos time %q or default %q, or the README's measured row %q, is no longer where this test reads it", m, c, r)
	}
	if m[2] != c[1] || r[1] != c[1] {
		t.Errorf("make chaos runs %s workflows by default; the GNUmakefile times %s, the README %s", c[1], m[2], r[1])
	}
	if m[1] != r[2] {
		t.Errorf("make chaos takes about %s minutes in the GNUmakefile and about %s in the README", m[1], r[2])
	}
}
