package main

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/cost"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// bracket is when a handler call began and ended, by the test's clock: a
// transition the call made was stamped within it.
type bracket struct{ from, to time.Time }

// timed calls a handler and says when.
func (d *deployment) timed(handler string, payload any, out any) bracket {
	d.t.Helper()
	b := bracket{from: time.Now()}
	d.call(handler, payload, out)
	b.to = time.Now()
	return b
}

// flatPrices prices every instance type at one hourly rate and every volume
// at one monthly rate: the test checks the report's arithmetic over the
// seconds it saw, not AWS's price list (internal/cost's tests do that).
type flatPrices struct{ hourly, gbMonth float64 }

func (p flatPrices) Hourly(context.Context, string, string) (float64, error) { return p.hourly, nil }
func (p flatPrices) VolumeMonthly(context.Context, string) (float64, error)  { return p.gbMonth, nil }

// watcher polls the record of the deployment's one instance (found in
// EC2, then read consistently) and notes when it first saw each state of
// each assignment: the instance's life as the test observed it.
type watcher struct {
	mu     sync.Mutex
	seen   []sighting
	maxGap time.Duration // the longest wait between two reads: how late a sighting can be
	err    error
	stop   context.CancelFunc
	done   chan struct{}
}

type sighting struct {
	state      state.State
	run        string
	assignment string
	at         time.Time
}

func (d *deployment) watch() *watcher {
	wctx, stop := context.WithCancel(ctx)
	w := &watcher{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		id, last := "", time.Now()
		for wctx.Err() == nil {
			if id == "" {
				insts, err := d.fleet.List(wctx, fleet.Filter{})
				if err == nil && len(insts) > 0 {
					id = insts[0].ID
				}
			}
			var rec *state.Instance
			var err error
			if id != "" {
				rec, err = d.store.Get(wctx, d.key(id))
			}
			now := time.Now()
			w.mu.Lock()
			w.maxGap = max(w.maxGap, now.Sub(last))
			last = now
			switch {
			case err != nil && !state.IsNotFound(err) && wctx.Err() == nil:
				w.err = err
			case rec != nil:
				n := len(w.seen)
				if n == 0 || w.seen[n-1].state != rec.State || w.seen[n-1].assignment != rec.Assignment {
					w.seen = append(w.seen, sighting{rec.State, rec.RunID, rec.Assignment, now})
				}
			}
			w.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return w
}

// observed stops the watcher and sums the seconds it saw the instance
// spend in each (run, state), and how many times it entered each.
func (w *watcher) observed(t *testing.T) (secs map[[2]string]float64, entered map[[2]string]int, maxGap time.Duration) {
	t.Helper()
	// The test calls this once the instance's end has happened; the watcher
	// may not have read the record since. Let it see the end before it
	// stops (its last sighting closes the span before it).
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		w.mu.Lock()
		n, ended := len(w.seen), false
		if n > 0 {
			ended = w.seen[n-1].state == state.Terminated
		}
		w.mu.Unlock()
		if ended {
			break
		}
	}
	w.stop()
	<-w.done
	if w.err != nil {
		t.Fatalf("watching the record: %v", w.err)
	}
	secs, entered = map[[2]string]float64{}, map[[2]string]int{}
	for i, s := range w.seen[:max(0, len(w.seen)-1)] {
		k := [2]string{s.run, string(s.state)}
		secs[k] += w.seen[i+1].at.Sub(s.at).Seconds()
		entered[k]++
	}
	if n := len(w.seen); n == 0 || w.seen[n-1].state != state.Terminated {
		t.Fatalf("the watcher never saw the instance terminated: %+v", w.seen)
	}
	return secs, entered, w.maxGap
}

// TestTheCostReportOfAFewWorkflowsIsTheTimeTheTestSawEachInstanceSpendInEachState:
// two workflows share one instance (a launch, then a claim of it warm), a
// scale-down stops it and, past its keep time, ends it. The report of the
// ledger the functions wrote gives, per run and per state, the seconds the
// test saw the instance's record spend there (watching it), within the
// stamps' rounding, priced at the book's rates, and each run's queue time within its provision's
// duration; the functions' metrics count every span written and none lost.
func TestTheCostReportOfAFewWorkflowsIsTheTimeTheTestSawEachInstanceSpendInEachState(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) {
		p.Timings.MinRunningTime = 1
		p.Stopped = &state.StoppedTier{Max: 1, KeepSeconds: 600}
		p.RootVolume = &state.RootVolume{GiB: 30, Type: "gp3"}
	})
	start := time.Now()
	w := d.watch()
	defer w.stop()

	var provA provisionOut
	pA := d.timed(bundle.HandlerProvision, map[string]any{"runId": "cost-a", "pool": "linux", "instanceCount": 1}, &provA)
	if len(provA.Instances) != 1 || provA.Created != 1 {
		t.Fatalf("first provision: %+v, want one instance launched", provA)
	}
	id := provA.Instances[0].InstanceID
	if job := d.job(provA.Label, "sleep 2"); job.Result != "succeeded" {
		t.Fatalf("job of cost-a: %+v", job)
	}
	var rel releaseOut
	d.call(bundle.HandlerRelease, map[string]any{"runId": "cost-a"}, &rel)
	if len(rel.Released) != 1 {
		t.Fatalf("release of cost-a: %+v", rel)
	}
	d.waitPooled(id)

	var provB provisionOut
	pB := d.timed(bundle.HandlerProvision, map[string]any{"runId": "cost-b", "pool": "linux", "instanceCount": 1}, &provB)
	if provB.Reused != 1 || len(provB.Instances) != 1 || provB.Instances[0].InstanceID != id {
		t.Fatalf("second provision: %+v, want %s claimed warm", provB, id)
	}
	if job := d.job(provB.Label, "sleep 1"); job.Result != "succeeded" {
		t.Fatalf("job of cost-b: %+v", job)
	}
	d.call(bundle.HandlerRelease, map[string]any{"runId": "cost-b"}, &rel)
	if len(rel.Released) != 1 {
		t.Fatalf("release of cost-b: %+v", rel)
	}
	d.waitPooled(id)

	var sd stoppedScaleDownOut
	d.call(bundle.HandlerScaleDown, nil, &sd)
	if len(sd.Stopped) != 1 || sd.Stopped[0].InstanceID != id {
		t.Fatalf("scale-down: %+v, want %s stopped", sd, id)
	}
	time.Sleep(2 * time.Second) // a stopped span of whole seconds, not one the stamps truncate to nothing
	rec, err := d.store.Get(ctx, d.key(id))
	must(t, err)
	_, err = d.store.Expire(ctx, rec.Ref(), "test: past the keep time") // no state: no span
	must(t, err)
	d.call(bundle.HandlerScaleDown, nil, &sd)
	if len(sd.Terminated) != 1 || sd.Terminated[0].InstanceID != id {
		t.Fatalf("scale-down past the keep time: %+v, want %s terminated", sd, id)
	}

	secs, entered, gap := w.observed(t)

	spans, err := d.store.Usage(ctx, start.Add(-time.Minute), time.Now().Add(time.Minute))
	must(t, err)
	if len(spans) != 7 {
		t.Fatalf("ledger holds %d spans, want 7 (created, running, idle, claimed, running, idle, stopped): %+v", len(spans), spans)
	}

	prices := flatPrices{hourly: 0.0893, gbMonth: 0.08}
	now := time.Now()
	byRun, err := cost.Read(ctx, d.store, prices, start.Add(-time.Minute), now.Add(time.Minute), cost.ByRun, now)
	must(t, err)
	if byRun.Open != 0 {
		t.Fatalf("report counts %d open spans of a terminated instance", byRun.Open)
	}
	rows := map[string]*cost.Row{}
	for _, r := range byRun.Rows {
		rows[r.Key] = r
	}
	idleRow, stoppedRow := rows["(no run: linux idle)"], rows["(no run: linux stopped)"]
	if rows["cost-a"] == nil || rows["cost-b"] == nil || idleRow == nil || stoppedRow == nil || len(rows) != 4 {
		t.Fatalf("rows by run: %v, want cost-a, cost-b, the pool's idle and stopped time", keysOf(rows))
	}
	// Each row within a second (the control plane's stamps are unix
	// seconds) and the watcher's longest gap of what the test saw, per
	// span the row sums.
	nSpans := map[string]int{}
	for _, sp := range spans {
		tier := "job"
		if sp.State == state.Idle || sp.State == state.Stopped {
			tier = string(sp.State)
		}
		nSpans[sp.RunID+"/"+tier]++
	}
	for _, c := range []struct {
		what   string
		got    int64
		saw    float64
		nSpans int
	}{
		{"cost-a job seconds (created, running)", rows["cost-a"].JobSeconds, secs[[2]string{"cost-a", "created"}] + secs[[2]string{"cost-a", "running"}], nSpans["cost-a/job"]},
		{"cost-b job seconds (claimed, running)", rows["cost-b"].JobSeconds, secs[[2]string{"cost-b", "claimed"}] + secs[[2]string{"cost-b", "running"}], nSpans["cost-b/job"]},
		{"warm seconds", idleRow.WarmSeconds, secs[[2]string{"", "idle"}], nSpans["/idle"]},
		{"stopped seconds", stoppedRow.StoppedSeconds, secs[[2]string{"", "stopped"}], nSpans["/stopped"]},
	} {
		slack := float64(c.nSpans) * (1 + gap.Seconds())
		if c.nSpans == 0 || math.Abs(float64(c.got)-c.saw) > slack {
			t.Errorf("%s = %d in the report, the test saw %.2f (%d spans, ± %.2f s)", c.what, c.got, c.saw, c.nSpans, slack)
		}
		t.Logf("%s: report %d, observed %.2f (± %.2f)", c.what, c.got, c.saw, slack)
	}
	if entered[[2]string{"", "idle"}] != 2 || entered[[2]string{"", "stopped"}] != 1 || entered[[2]string{"cost-a", "running"}] != 1 || entered[[2]string{"cost-b", "running"}] != 1 {
		t.Errorf("the watcher saw the instance enter %v, want idle twice, stopped once and running once per run", entered)
	}
	if tot := byRun.Total; tot.JobSeconds != rows["cost-a"].JobSeconds+rows["cost-b"].JobSeconds || tot.WarmSeconds != idleRow.WarmSeconds || tot.StoppedSeconds != stoppedRow.StoppedSeconds {
		t.Errorf("total %+v is not the sum of its rows", tot)
	}
	tot := byRun.Total
	wantInst := prices.hourly * float64(tot.JobSeconds+tot.WarmSeconds) / 3600 // stopped: the volume only
	wantVol := prices.gbMonth * 30 * float64(tot.JobSeconds+tot.WarmSeconds+tot.StoppedSeconds) / (730 * 3600)
	if tot.InstanceUSD == nil || tot.VolumeUSD == nil || tot.TotalUSD == nil ||
		math.Abs(*tot.InstanceUSD-wantInst) > 1e-6 || math.Abs(*tot.VolumeUSD-wantVol) > 1e-6 || math.Abs(*tot.TotalUSD-wantInst-wantVol) > 2e-6 {
		t.Errorf("total = %+v, want instance %.6f and volume %.6f USD", tot, wantInst, wantVol)
	}

	// Queue time: the run asked for runners (its item) until its first was
	// online, both inside its provision call.
	for run, p := range map[string]bracket{"cost-a": pA, "cost-b": pB} {
		row := rows[run]
		measured := p.to.Sub(p.from)
		if row.QueuedRuns != 1 || row.QueueMaxSeconds < 0 || row.QueueMaxSeconds > int64(math.Ceil(measured.Seconds()))+1 {
			t.Errorf("%s queued %d s (%d runs known), its provision took %s", run, row.QueueMaxSeconds, row.QueuedRuns, measured)
		}
		t.Logf("%s: queue %d s in the report, provision call %s", run, row.QueueMaxSeconds, measured.Round(time.Millisecond))
	}
	byRepo, err := cost.Read(ctx, d.store, prices, start.Add(-time.Minute), now.Add(time.Minute), cost.ByRepo, now)
	must(t, err)
	for _, r := range byRepo.Rows {
		if r.Key == ownRepo && (r.Runs != 2 || r.JobSeconds != tot.JobSeconds) {
			t.Errorf("row of %s: %d runs, %d job seconds; want 2 and %d", ownRepo, r.Runs, r.JobSeconds, tot.JobSeconds)
		}
	}

	// The functions' metrics count the spans they wrote, and none lost.
	points, err := metrics.Read(strings.NewReader(d.logs.String()))
	must(t, err)
	recorded, _ := metrics.Sum(points, "UsageSpansRecorded", nil)
	lost, n := metrics.Sum(points, "UsageSpansLost", nil)
	if recorded != 7 || lost != 0 || n == 0 {
		t.Errorf("metrics: %v spans recorded, %v lost (%d points), want 7 and 0", recorded, lost, n)
	}
}

func keysOf(m map[string]*cost.Row) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
