package sandbox

import (
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

func TestNextJobGapsMeasureEachInstanceFromItsLastJob(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Instance a: jobs on runners 1 then 2 (just-in-time); instance b: one
	// job only (no gap); a job that never started does not count.
	jobs := []fakegithub.Job{
		{Runner: "ghr-1-2-i-a", RunnerID: 2, Started: at(1900), Finished: at(2500)},
		{Runner: "ghr-1-1-i-a", RunnerID: 1, Started: at(100), Finished: at(1000)},
		{Runner: "ghr-1-1-i-b", RunnerID: 3, Started: at(200), Finished: at(900)},
		{Runner: "ghr-1-3-i-a", RunnerID: 4},
	}
	history := []fakegithub.Registration{{RunnerID: 1, Online: at(50)}, {RunnerID: 2, Online: at(1600)}, {RunnerID: 3, Online: at(60)}}
	g := NextJobGaps(jobs, history)
	if len(g.Started) != 1 || g.Started[0] != 900*time.Millisecond || len(g.Online) != 1 || g.Online[0] != 600*time.Millisecond {
		t.Fatalf("gaps %+v, want one: started 900ms, online 600ms after the job before", g)
	}
	// A runner online before the job before ended (a token pool's runner
	// takes the next job itself): no wait for a runner at all.
	g = NextJobGaps([]fakegithub.Job{jobs[1], {Runner: "ghr-1-1-i-a", RunnerID: 1, Started: at(1100), Finished: at(1500)}}, history)
	if g.Online[0] != 0 || g.Started[0] != 100*time.Millisecond {
		t.Fatalf("same runner: %+v", g)
	}
}

func TestSplitOfTheSlowestInstance(t *testing.T) {
	start := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	out := provision.Output{ElapsedSeconds: 1.5, Instances: []provision.Instance{
		{InstanceID: "i-fast", ClaimedSeconds: 0.1, ConfiguredSeconds: 0.2, ReadySeconds: 0.8},
		{InstanceID: "i-slow", ClaimedSeconds: 0.3, ConfiguredSeconds: 0.5, ReadySeconds: 1.4},
	}}
	history := []fakegithub.Registration{
		{Name: "ghr-1-1-i-slow", From: start.Add(-time.Hour), Online: start.Add(-time.Hour)}, // an earlier run's
		{Name: "ghr-2-1-i-slow", From: start.Add(400 * time.Millisecond), Online: start.Add(1200 * time.Millisecond)},
		{Name: "ghr-2-1-i-fast", From: start.Add(100 * time.Millisecond), Online: start.Add(600 * time.Millisecond)},
	}
	// The function started 100 ms after the invoke (answered 1.6 s after
	// it, having run 1.5 s): its offsets are from there.
	answered := start.Add(1600 * time.Millisecond)
	s, ok := SplitOf(start, answered, out, history)
	ms := func(d time.Duration) int { return int(d.Round(time.Millisecond) / time.Millisecond) }
	if !ok || ms(s.Claim) != 400 || ms(s.Config) != 200 || ms(s.RunnerStart) != 600 || ms(s.Signal) != 300 || ms(s.Total) != 1600 {
		t.Fatalf("split %+v (%v)", s, ok)
	}
	if _, ok := SplitOf(start, answered, out, history[:1]); ok {
		t.Fatal("split without the run's registration")
	}
}

func TestQuantileIsANearestRank(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	if Quantile(ds, 0.5) != 3 || Quantile(ds, 0.95) != 5 || Quantile(ds, 1) != 5 || Quantile(nil, 0.5) != 0 || ds[0] != 5 {
		t.Fatalf("p50 %v p95 %v (input %v)", Quantile(ds, 0.5), Quantile(ds, 0.95), ds)
	}
}
