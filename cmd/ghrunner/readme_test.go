package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// readmeStatusSample is the README's sample of `ghrunner status`: the first
// text block after the block that runs bin/ghrunner status.
func readmeStatusSample(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i := strings.Index(text, "\nbin/ghrunner status ")
	if i < 0 {
		t.Fatal("README.md no longer runs bin/ghrunner status")
	}
	j := strings.Index(text[i:], "```text\n")
	if j < 0 {
		t.Fatal("README.md has no text block after bin/ghrunner status")
	}
	sample, _, _ := strings.Cut(text[i+j+len("```text\n"):], "```")
	return sample
}

// Issue 40 item 5: the README's status sample is what status prints for
// the deployment it describes (the sandbox's two pools, run 42 on two
// runners of linux, refresh and scale-down run a little while ago), table
// by table, the runner versions' included.
func TestTheREADMEsStatusSampleIsWhatStatusPrints(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := ops.StatusView{
		Pools: []ops.PoolStatus{
			{Pool: "linux", Owner: "acme", Registration: "jit", MaxInstances: 10, Counts: map[state.State]int{state.Running: 2},
				RunsInFlight: []string{"42"}, RunnerSpec: "latest", RunnerTarget: "2.337.0", RunnerVersions: map[string]int{"2.337.0": 2}},
			{Pool: "linux-token", Owner: "acme", Registration: "token", MaxInstances: 10, Counts: map[state.State]int{},
				RunnerSpec: "latest", RunnerTarget: "2.337.0", RunnerVersions: map[string]int{}},
		},
		Scheduled: []state.LastRun{
			{Handler: "refresh", At: now.Add(-24 * time.Second).Unix(), Seconds: 0.2},
			{Handler: "scale-down", At: now.Add(-41 * time.Second).Unix(), Seconds: 0.3},
		},
	}
	var out bytes.Buffer
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0) // as run prints
	renderStatus(w, v, now)
	w.Flush()
	trim := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRight(l, " ")
		}
		return strings.Join(lines, "\n")
	}
	if got, want := trim(readmeStatusSample(t)), trim(out.String()); got != want {
		t.Errorf("README.md's status sample is not what status prints; status prints:\n%s\n\nREADME.md has:\n%s", want, got)
	}
}
