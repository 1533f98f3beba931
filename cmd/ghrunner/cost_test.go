package main

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/cost"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakepricing"
)

// costTable holds one run of acme/api: queued 40 s (run item to runner
// online), 600 s running, then 300 s warm until now; its pool has a 30 GiB
// gp3 root volume.
func costTable(t *testing.T) string {
	ctx := context.Background()
	s := statetest.NewStore(t, env)
	start := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	at := start
	s.Now = func() time.Time { return at }
	if err := s.PutPoolConfig(ctx, state.PoolConfig{Name: "linux", Owner: "acme", QueueURL: "https://sqs/q", LaunchTemplateID: "lt-1",
		LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand",
		MaxInstances: 5, InstanceRoleID: opsRole, RootVolume: &state.RootVolume{GiB: 30, Type: "gp3"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.StartRun(ctx, state.Run{ID: "run-1", Pool: "linux", InstanceCount: 1, Request: "{}", Repository: "acme/api"}); err != nil {
		t.Fatal(err)
	}
	inst, err := s.Create(ctx, state.NewInstance{ID: "i-cost-1", RoleID: opsRole, Pool: "linux", Owner: "acme", RunID: "run-1",
		Assignment: state.NewAssignment(), InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalRegOK, ""); err != nil {
		t.Fatal(err)
	}
	at = at.Add(40 * time.Second)
	running, err := s.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	at = at.Add(600 * time.Second)
	if _, err := s.Release(ctx, running.Ref(), "run-1", time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	return s.Table()
}

func TestCostReportsARunsSecondsPricesAndQueueAsTextAndJSON(t *testing.T) {
	table := costTable(t)
	fake := fakepricing.New(fakepricing.Linux(awstest.Region, "c7i.large", "0.0893"), fakepricing.Volume(awstest.Region, "gp3", "0.08"))
	defer fake.Close()
	t.Setenv("AWS_ENDPOINT_URL_PRICING", fake.URL)
	code, out, errOut := cli(t, "--table", table, "cost", "--since", "1d", "--by", "repo", "--json")
	if code != 0 {
		t.Fatalf("cost --json: exit %d\n%s%s", code, out, errOut)
	}
	var r cost.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("cost --json is not a report: %v\n%s", err, out)
	}
	var api *cost.Row
	for _, row := range r.Rows {
		if row.Key == "acme/api" {
			api = row
		}
	}
	if api == nil || api.JobSeconds != 640 || api.Runs != 1 || api.QueuedRuns != 1 || api.QueueMaxSeconds != 40 || api.HostedMinutesEst != 2 {
		t.Fatalf("acme/api row = %+v, want 640 job seconds, one run queued 40 s, 2 hosted minutes\n%s", api, out)
	}
	if want := 0.0893 * 640 / 3600; api.InstanceUSD == nil || math.Abs(*api.InstanceUSD-want) > 1e-5 {
		t.Fatalf("acme/api instance cost = %v, want %.6f", api.InstanceUSD, want)
	}
	// The warm time since the release is the pool's, open until now.
	if r.Total.WarmSeconds < 3600 || r.Open != 1 {
		t.Fatalf("total = %+v, open spans %d: want over an hour warm, one open span", r.Total, r.Open)
	}
	code, out, errOut = cli(t, "--table", table, "cost", "--since", "1d")
	if code != 0 || !regexp.MustCompile(`(?m)^acme/api\s+1\s+10m40s\s+0s\s+0s\s+0\.0159\s+0\.0006\s+0\.0165\s+40s/40s\s+2$`).MatchString(out) {
		t.Fatalf("cost (text): exit %d, want acme/api's row: one run, 640 s of c7i.large and 30 GiB gp3, queued 40 s\n%s%s", code, out, errOut)
	}
	// No price list: the row says so, never 0.
	fake.Fail("AccessDeniedException")
	code, out, errOut = cli(t, "--table", table, "cost", "--by", "run")
	if code != 0 || !strings.Contains(out, "no price") || !strings.Contains(out, "AccessDeniedException") {
		t.Fatalf("cost without a price list: exit %d, want no price and why\n%s%s", code, out, errOut)
	}
}

func TestCostRefusesABadFlagNamingIt(t *testing.T) {
	table := seeded(t)
	for _, c := range []struct {
		args       []string
		flag, rule string
	}{
		{[]string{"--by", "colour"}, "--by", "repo, pool, run"},
		{[]string{"--since", "soon"}, "--since", "duration"},
		{[]string{"--since", "40d"}, "--since", "35d"},
		{[]string{"--since", "-1h"}, "--since", "positive"},
	} {
		code, out, errOut := cli(t, append([]string{"--table", table, "cost"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.flag) || !strings.Contains(errOut, c.rule) || out != "" {
			t.Errorf("cost %v: exit %d, stderr %q; want exit 2 naming %s and %q", c.args, code, errOut, c.flag, c.rule)
		}
	}
}

func TestCostShowsInstanceTimeInHoursFromAnHourUpAndInMinutesAndSecondsBelow(t *testing.T) {
	for secs, want := range map[int64]string{0: "0s", 6: "6s", 640: "10m40s", 3599: "59m59s", 3600: "1.00h", 5400: "1.50h", 90000: "25.00h"} {
		if got := hours(secs); got != want {
			t.Errorf("hours(%d) = %q, want %q", secs, got, want)
		}
	}
}
