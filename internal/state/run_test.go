package state

import (
	"strings"
	"testing"
	"time"
)

func TestRunItem(t *testing.T) {
	s, _ := newStore(t)
	req := Run{ID: "12345", Pool: testPool, InstanceCount: 3, Request: `{"instanceCount":3,"pool":"linux-large","runId":"12345"}`}
	r, created, err := s.StartRun(ctx, req)
	must(t, err)
	if !created || r.Status != RunProvisioning {
		t.Fatalf("first start: created=%v run=%+v", created, r)
	}
	again, created, err := s.StartRun(ctx, req)
	must(t, err)
	if created || again.CreatedAt != r.CreatedAt {
		t.Fatalf("retry created a new run: %+v", again)
	}
	other := req
	other.InstanceCount, other.Request = 5, `{"instanceCount":5,"pool":"linux-large","runId":"12345"}`
	_, _, err = s.StartRun(ctx, other)
	wantClause(t, err, ClausePayload)

	_, err = s.AddRunInstances(ctx, "12345", "i-1", "i-2")
	must(t, err)
	withIDs, err := s.AddRunInstances(ctx, "12345", "i-2", "i-3")
	must(t, err)
	if strings.Join(sortedKeys(setOf(withIDs.InstanceIDs)), ",") != "i-1,i-2,i-3" {
		t.Fatalf("instance ids = %v", withIDs.InstanceIDs)
	}
	// The run item is not an instance: it stays out of the by-run index.
	byRun, err := s.ByRun(ctx, "12345")
	must(t, err)
	if len(byRun) != 0 {
		t.Fatalf("run item showed up in by-run: %+v", byRun)
	}

	// Release wins over a provision still waiting.
	_, err = s.SetRunStatus(ctx, "12345", RunReleased, "released while provisioning", RunProvisioning, RunReady)
	must(t, err)
	_, err = s.SetRunStatus(ctx, "12345", RunReady, "", RunProvisioning)
	wantClause(t, err, ClauseStatus)
	_, err = s.AddRunInstances(ctx, "12345", "i-4")
	wantClause(t, err, ClauseStatus)
	_, err = s.SetRunStatus(ctx, "nope", RunReady, "", RunProvisioning)
	wantClause(t, err, ClauseExists)
	got, err := s.GetRun(ctx, "12345")
	must(t, err)
	if got.Status != RunReleased || got.Detail == "" || len(got.InstanceIDs) != 3 {
		t.Fatalf("run = %+v", got)
	}
	if _, err := s.GetRun(ctx, "absent"); !IsNotFound(err) {
		t.Fatalf("GetRun(absent) = %v", err)
	}
}

func validPool() PoolConfig {
	return PoolConfig{
		Name: "linux-large", Owner: "acme", QueueURL: "http://q", LaunchTemplateID: "lt-1", LaunchTemplateVersion: "3",
		InstanceTypes: []string{"c7i.large", "m7i.large"}, SubnetIDs: []string{"subnet-a"}, UsageClass: "spot",
		MaxInstances: 20,
		IdleWindows:  []IdleWindow{{Cron: "* 8-18 * * 1-5", TimeZone: "Europe/Berlin", IdleCount: 3, EvictionStrategy: "oldest_first"}},
	}
}

func TestPoolConfigValidation(t *testing.T) {
	cases := []struct {
		field  string
		change func(*PoolConfig)
	}{
		{"name:", func(p *PoolConfig) { p.Name = "bad name" }},
		{"owner:", func(p *PoolConfig) { p.Owner = "acme/api/x" }},
		{"queueUrl:", func(p *PoolConfig) { p.QueueURL = "" }},
		{"launchTemplateId:", func(p *PoolConfig) { p.LaunchTemplateID = "" }},
		{"launchTemplateVersion:", func(p *PoolConfig) { p.LaunchTemplateVersion = "" }},
		{"instanceTypes:", func(p *PoolConfig) { p.InstanceTypes = nil }},
		{"instanceTypes[1]:", func(p *PoolConfig) { p.InstanceTypes[1] = "c7i" }},
		{"subnetIds:", func(p *PoolConfig) { p.SubnetIDs = nil }},
		{"usageClass:", func(p *PoolConfig) { p.UsageClass = "reserved" }},
		{"maxInstances:", func(p *PoolConfig) { p.MaxInstances = 0 }},
		{"registration:", func(p *PoolConfig) { p.Registration = "pat" }},
		{"timings.idleTTL:", func(p *PoolConfig) { p.Timings.IdleTTL = -1 }},
		{"timings.staleAfter:", func(p *PoolConfig) { p.Timings.HeartbeatInterval, p.Timings.StaleAfter = 15, 20 }},
		{"idleWindows[0].cron:", func(p *PoolConfig) { p.IdleWindows[0].Cron = "cron(0 8 * * ? *)" }},
		{"idleWindows[0].cron:", func(p *PoolConfig) { p.IdleWindows[0].Cron = "@daily" }},
		{"idleWindows[0].timeZone:", func(p *PoolConfig) { p.IdleWindows[0].TimeZone = "Mars/Olympus" }},
		{"idleWindows[0].idleCount:", func(p *PoolConfig) { p.IdleWindows[0].IdleCount = -2 }},
		{"idleWindows[0].evictionStrategy:", func(p *PoolConfig) { p.IdleWindows[0].EvictionStrategy = "random" }},
		{"scaleSet.name:", func(p *PoolConfig) { p.Registration, p.ScaleSet = RegistrationJIT, &ScaleSetConfig{Name: "linux,gpu"} }},
		{"scaleSet.name:", func(p *PoolConfig) { p.Registration, p.ScaleSet = RegistrationJIT, &ScaleSetConfig{Name: "-linux"} }},
		{"scaleSet.name:", func(p *PoolConfig) {
			p.Registration, p.ScaleSet = RegistrationJIT, &ScaleSetConfig{Name: strings.Repeat("s", 46)}
		}},
		{"scaleSet.maxRunners:", func(p *PoolConfig) {
			p.Registration, p.ScaleSet = RegistrationJIT, &ScaleSetConfig{Name: "linux", MaxRunners: 21}
		}},
		{"scaleSet: a scale set's runners are just-in-time", func(p *PoolConfig) { p.ScaleSet = &ScaleSetConfig{Name: "linux"} }},
	}
	s, _ := newStore(t)
	for _, c := range cases {
		p := validPool()
		p.InstanceTypes = append([]string(nil), p.InstanceTypes...)
		p.IdleWindows = append([]IdleWindow(nil), p.IdleWindows...)
		c.change(&p)
		err := s.PutPoolConfig(ctx, p)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: PutPoolConfig = %v, want an error naming %s", c.field, err, c.field)
		}
	}
	list, err := s.ListPoolConfigs(ctx)
	must(t, err)
	if len(list) != 0 {
		t.Fatalf("invalid configs were written: %+v", list)
	}
}

func TestPoolConfigItems(t *testing.T) {
	s, _ := newStore(t)
	a := validPool()
	a.Timings = a.Timings.WithDefaults()
	b := validPool()
	b.Name, b.UsageClass = "linux-xl", "on-demand"
	b.Timings = Timings{MaxRuntime: 7200}.WithDefaults()
	b.Registration, b.ScaleSet = RegistrationJIT, &ScaleSetConfig{Name: "Linux.Big_1", MaxRunners: 20}
	must(t, s.PutPoolConfig(ctx, a))
	must(t, s.PutPoolConfig(ctx, b))
	got, err := s.GetPoolConfig(ctx, "linux-xl")
	must(t, err)
	if got.ScaleSet == nil || *got.ScaleSet != *b.ScaleSet {
		t.Fatalf("linux-xl scale set = %+v, want %+v", got.ScaleSet, b.ScaleSet)
	}
	if got.Timings.MinRunningTime != 300 || got.Timings.MaxRuntime != 7200 || got.Timings.IdleTTL != 900 || got.UpdatedAt == 0 {
		t.Fatalf("linux-xl timings = %+v", got.Timings)
	}
	if D(got.Timings.ClaimTTL) != 5*time.Minute {
		t.Fatalf("claim TTL = %v", D(got.Timings.ClaimTTL))
	}
	list, err := s.ListPoolConfigs(ctx)
	must(t, err)
	if len(list) != 2 || list[0].Name != "linux-large" || list[1].Name != "linux-xl" || list[0].IdleWindows[0].TimeZone != "Europe/Berlin" {
		t.Fatalf("list = %+v", list)
	}
	must(t, s.DeletePoolConfig(ctx, "linux-large"))
	list, err = s.ListPoolConfigs(ctx)
	must(t, err)
	if len(list) != 1 || list[0].Name != "linux-xl" {
		t.Fatalf("after delete: %+v", list)
	}
	if _, err := s.GetPoolConfig(ctx, "linux-large"); !IsNotFound(err) {
		t.Fatalf("deleted pool still readable: %v", err)
	}
}

func TestIdleWindows(t *testing.T) {
	berlin := IdleWindow{Cron: "* 8-17 * * 1-5", TimeZone: "Europe/Berlin", IdleCount: 3, EvictionStrategy: "oldest_first"}
	night := IdleWindow{Cron: "* 22-23,0-5 * * *", TimeZone: "America/New_York", IdleCount: 1, EvictionStrategy: "newest_first"}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		w    IdleWindow
		now  string
		want bool
	}{
		{berlin, "2026-11-23T07:00:00Z", true},  // Monday 08:00 in Berlin (UTC+1)
		{berlin, "2026-11-23T06:59:59Z", false}, // 07:59:59 in Berlin
		{berlin, "2026-11-23T16:59:30Z", true},  // 17:59:30: still the 17 hour
		{berlin, "2026-11-23T17:00:00Z", false}, // 18:00
		{berlin, "2026-11-22T10:00:00Z", false}, // Sunday
		{berlin, "2026-07-06T06:30:00Z", true},  // summer time: 08:30 CEST
		{night, "2026-11-23T04:59:00Z", true},   // 23:59 in New York, Sunday
		{night, "2026-11-23T05:00:00Z", true},   // midnight
		{night, "2026-11-23T10:59:59Z", true},   // 05:59:59
		{night, "2026-11-23T11:00:00Z", false},  // 06:00
		{night, "2026-11-23T02:30:00Z", false},  // 21:30 in New York
	}
	for _, c := range cases {
		if got := c.w.Active(at(c.now)); got != c.want {
			t.Errorf("%s %s at %s: active=%v, want %v", c.w.Cron, c.w.TimeZone, c.now, got, c.want)
		}
	}
	p := PoolConfig{IdleWindows: []IdleWindow{berlin, night}}
	if w, ok := p.ActiveWindow(at("2026-11-23T08:00:00Z")); !ok || w.IdleCount != 3 {
		t.Fatalf("first active window = %+v %v", w, ok)
	}
	if _, ok := p.ActiveWindow(at("2026-11-22T15:00:00Z")); ok {
		t.Fatal("a window active on Sunday afternoon")
	}
}

func TestAnInstanceGivenUpIsNoLongerTheRunsUntilItsProvisionTakesItBack(t *testing.T) {
	s, _ := newStore(t)
	_, _, err := s.StartRun(ctx, Run{ID: "r-gu", Pool: testPool, InstanceCount: 2, Request: "x"})
	must(t, err)
	_, err = s.AddRunInstances(ctx, "r-gu", "i-a", "i-b")
	must(t, err)
	must(t, s.GiveUpRunInstance(ctx, "r-gu", "i-a"))
	run, err := s.GetRun(ctx, "r-gu")
	must(t, err)
	if run.Member("i-a") || !run.Member("i-b") || run.Member("i-c") {
		t.Fatalf("members after giving up i-a: instanceIds %v, givenUp %v", run.InstanceIDs, run.GivenUp)
	}
	run, err = s.AddRunInstances(ctx, "r-gu", "i-a")
	must(t, err)
	if !run.Member("i-a") {
		t.Fatalf("i-a claimed again: instanceIds %v, givenUp %v, want a member", run.InstanceIDs, run.GivenUp)
	}
	// Given up after the run failed or was released: still recorded.
	_, err = s.SetRunStatus(ctx, "r-gu", RunFailed, "test", RunProvisioning)
	must(t, err)
	must(t, s.GiveUpRunInstance(ctx, "r-gu", "i-b"))
	if run, _ = s.GetRun(ctx, "r-gu"); run.Member("i-b") {
		t.Fatalf("i-b given up by a failed run is still a member")
	}
	if err := s.GiveUpRunInstance(ctx, "r-none", "i-a"); err == nil {
		t.Fatal("giving up an instance of a run that does not exist: no error")
	}
}

func TestAStandingRunKeepsItsJobsQueueStampsForTheCostReport(t *testing.T) {
	s, _ := newStore(t)
	_, _, err := s.StartRun(ctx, Run{ID: "standing-q", Pool: testPool, InstanceCount: 1, Request: "r", ScaleSet: "7"})
	must(t, err)
	must(t, s.SetRunJob(ctx, "standing-q", RunJob{Repository: "acme/app", WorkflowRunID: 9, QueuedAt: 1_800_000_000, StartedAt: 1_800_000_021}))
	run, err := s.GetRun(ctx, "standing-q")
	must(t, err)
	if q, ok := run.Job.QueueSeconds(); !ok || q != 21 {
		t.Fatalf("job = %+v: queue %d (%v), want 21 s", run.Job, q, ok)
	}
}
