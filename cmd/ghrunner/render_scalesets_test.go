package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// withScaleSet gives the seeded pool linux the scale set linux-large and
// the status a listener wrote of it: a holder's name and GitHub's error
// text carrying what a terminal acts on.
func withScaleSet(t *testing.T, table string, now time.Time, st *state.ScaleSetStatus) {
	t.Helper()
	s := state.New(env.Config(t).DynamoDB(), table)
	ctx := context.Background()
	p, err := s.GetPoolConfig(ctx, "linux")
	must(t, err)
	p.ScaleSet = &state.ScaleSetConfig{Name: "linux-large", MaxRunners: 3}
	must(t, s.PutPoolConfig(ctx, *p))
	if st != nil {
		s.Now = func() time.Time { return now }
		must(t, s.PutScaleSetStatus(ctx, *st))
	}
}

func TestStatusShowsEachScaleSetAsItsListenerLastSawIt(t *testing.T) {
	table := seeded(t)
	now := time.Now()
	withScaleSet(t, table, now, nil)
	code, out, errOut := cli(t, "--table", table, "status")
	if code != 0 || !regexp.MustCompile(`(?m)^linux-large\s+linux\s+no listener has served it\s+-`).MatchString(out) {
		t.Fatalf("status of a scale set no listener served: exit %d\n%s%s", code, out, errOut)
	}
	withScaleSet(t, table, now, &state.ScaleSetStatus{Pool: "linux", ScaleSet: "linux-large", ScaleSetID: 7, Holder: "task-1" + osc52 + forged,
		SessionAt: now.Add(-time.Hour).Unix(), PolledAt: now.Add(-20 * time.Second).Unix(),
		Statistics: state.ScaleSetStatistics{Assigned: 3, Running: 2, Registered: 3, Busy: 2, Idle: 1}, LiveRuns: 3,
		Error: "failed to get message: " + csi + forged + others, ErrorAt: now.Add(-5 * time.Minute).Unix()})
	code, out, errOut = cli(t, "--table", table, "status")
	if code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
	}
	if !regexp.MustCompile(`(?m)^SCALE SET\s+POOL\s+SESSION HELD BY\s+LAST POLL\s+ASSIGNED\s+RUNNING\s+IDLE\s+LIVE RUNS\s+LAST ERROR$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^linux-large\s+linux\s+task-1\\x1b]52;c;.*\s+2\ds ago\s+3\s+2\s+1\s+3\s+5m\d*s ago: failed to get message: \\x1b\[1A`).MatchString(out) {
		t.Errorf("status: want the scale set's row with its holder, last poll, assigned/running/idle, live runs and error\n%s", out)
	}
	if found := raw(out + errOut); len(found) > 0 {
		t.Errorf("status: %d raw control characters, the first after %q", len(found), found[0])
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " \r"), "i-0forged") {
			t.Errorf("status: a forged line %q", line)
		}
	}
	code, out, errOut = cli(t, "--table", table, "status", "--json")
	var v ops.StatusView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.ScaleSets) != 1 {
		t.Fatalf("status --json: exit %d\n%s%s", code, out, errOut)
	}
	if s := v.ScaleSets[0]; s.Pool != "linux" || s.ScaleSet != "linux-large" || s.Listener == nil || s.Listener.ScaleSetID != 7 ||
		s.Listener.Holder != "task-1"+osc52+forged || s.Listener.Statistics.Busy != 2 || s.Listener.LiveRuns != 3 || !strings.HasSuffix(s.Listener.Error, others) {
		t.Errorf("status --json: scale set %+v listener %+v; want what the listener wrote, whole", s, s.Listener)
	}
	// Its reader is a program: encoding/json escapes the C0 controls
	// (the escape and the newline among them), as every --json does.
	if strings.ContainsAny(out, "\x1b\r\x07") || strings.Contains(out, "\ni-0forged") {
		t.Errorf("status --json: a raw C0 control character in %q", out)
	}
}

// A scale set whose session nobody holds says since when; the row keeps
// the table's columns whatever the names hold.
func TestAScaleSetNobodyHoldsSaysSinceWhenAndItsNameIsShownEscaped(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	v := ops.StatusView{ScaleSets: []ops.ScaleSetView{{Pool: "linux", ScaleSet: "big\tset" + osc52,
		Listener: &state.ScaleSetStatus{SessionAt: now.Add(-90 * time.Second).Unix(), PolledAt: now.Add(-2 * time.Minute).Unix()}}}}
	var out bytes.Buffer
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	renderStatus(w, v, now)
	w.Flush()
	if !regexp.MustCompile(`(?m)^big\\tset\\x1b]52;c;\S+\s+linux\s+nobody \(since 1m30s ago\)\s+2m0s ago\s+0\s+0\s+0\s+0\s+-$`).MatchString(out.String()) {
		t.Errorf("want the scale set's row, its name escaped, nobody holding since 1m30s\n%s", out.String())
	}
	if found := raw(out.String()); len(found) > 0 {
		t.Errorf("%d raw control characters, the first after %q", len(found), found[0])
	}
}
