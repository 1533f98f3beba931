package state

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestQueriesReadEveryPage(t *testing.T) {
	s, clk := newStore(t)
	s.PageSize = 4
	for i := 0; i < 22; i++ {
		created(t, s, fmt.Sprintf("i-q%03d", i), "run-big")
		clk.Add(time.Second) // distinct thresholds, so the sort key orders them
	}
	for i := 0; i < 3; i++ {
		created(t, s, fmt.Sprintf("i-other%d", i), "run-small")
	}
	before := env.Calls("DynamoDB_20120810.Query")
	got, err := s.ByRun(ctx, "run-big")
	must(t, err)
	pages := env.Calls("DynamoDB_20120810.Query") - before
	if len(got) != 22 {
		t.Fatalf("ByRun returned %d instances, want 22", len(got))
	}
	if pages < 6 {
		t.Fatalf("ByRun used %d Query pages with page size 4, want at least 6", pages)
	}
	for _, inst := range got {
		if inst.RunID != "run-big" || inst.Signals != nil || inst.HeartbeatAt != 0 {
			t.Fatalf("by-run item %+v: wrong run, or unprojected attributes present", inst)
		}
	}

	all, err := s.ByPoolState(ctx, testPool, Created, time.Time{})
	must(t, err)
	if len(all) != 25 {
		t.Fatalf("ByPoolState returned %d, want 25", len(all))
	}
	if !sort.SliceIsSorted(all, func(i, j int) bool { return all[i].Threshold < all[j].Threshold }) {
		t.Fatal("ByPoolState not ordered by threshold")
	}
	// Leases end 600 s after each create, one second apart: after 605 s of
	// the first create, leases of the first five creates have ended.
	expired, err := s.ByPoolState(ctx, testPool, Created, time.Unix(all[0].Threshold+5, 0))
	must(t, err)
	if len(expired) != 5 {
		t.Fatalf("expired leases = %d, want 5", len(expired))
	}
	none, err := s.ByPoolState(ctx, testPool, Idle, time.Time{})
	must(t, err)
	if len(none) != 0 {
		t.Fatalf("idle = %d, want 0", len(none))
	}
}

// TestClaimRace: 32 provisions race for 20 clean idle instances. Every
// instance is claimed exactly once, by one run, and none is lost.
func TestClaimRace(t *testing.T) {
	s, _ := newStore(t)
	const idle, racers = 20, 32
	ids := make([]string, idle)
	for i := range ids {
		ids[i] = fmt.Sprintf("i-race%02d", i)
		pooled(t, s, ids[i])
	}
	var mu sync.Mutex
	won := map[string]string{} // instance -> run
	var losses int
	var wg sync.WaitGroup
	for r := 0; r < racers; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			run := fmt.Sprintf("run-%02d", r)
			order := rand.New(rand.NewSource(int64(r))).Perm(idle)
			for _, k := range order {
				inst, err := s.Claim(ctx, InstanceKey(testRole, ids[k]), claimReq(run))
				if err == nil {
					mu.Lock()
					if prev, dup := won[inst.ID]; dup {
						t.Errorf("%s claimed twice: by %s and %s", inst.ID, prev, run)
					}
					won[inst.ID] = run
					mu.Unlock()
					return
				}
				if c := ClauseOf(err); c != ClauseState && c != ClauseRunID && c != ClauseAssignment {
					t.Errorf("claim %s: unexpected %v", ids[k], err)
				}
				mu.Lock()
				losses++
				mu.Unlock()
			}
		}(r)
	}
	wg.Wait()
	if len(won) != idle {
		t.Fatalf("%d instances claimed, want all %d", len(won), idle)
	}
	runs := map[string]bool{}
	for id, run := range won {
		if runs[run] {
			t.Fatalf("run %s got two instances", run)
		}
		runs[run] = true
		rec, err := s.Get(ctx, InstanceKey(testRole, id))
		must(t, err)
		if rec.State != Claimed || rec.RunID != run {
			t.Fatalf("%s: state %s run %s, want claimed by %s", id, rec.State, rec.RunID, run)
		}
	}
	t.Logf("%d claims won, %d refused", len(won), losses)
}

// BenchmarkClaim measures conditional claims per second against moto (one
// claim per pooled instance; the pooling setup is excluded from the timing).
func BenchmarkClaim(b *testing.B) {
	s, _ := newStore(b)
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("i-bench%06d", i)
		pooled(b, s, ids[i])
	}
	var next sync.Mutex
	k := 0
	b.ResetTimer()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			next.Lock()
			id := ids[k]
			k++
			next.Unlock()
			if _, err := s.Claim(ctx, InstanceKey(testRole, id), claimReq("bench")); err != nil {
				b.Error(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

func TestGetManyReadsEveryBatch(t *testing.T) {
	s, _ := newStore(t)
	keys := make([]Key, 0, 230)
	for i := 0; i < 230; i++ {
		keys = append(keys, created(t, s, fmt.Sprintf("i-many%03d", i), "r").Key)
	}
	before := env.Calls("DynamoDB_20120810.BatchGetItem")
	// Repeated keys are read once: BatchGetItem refuses duplicate keys.
	got, err := s.GetMany(ctx, append(append(keys, InstanceKey(testRole, "i-absent")), keys[:5]...))
	must(t, err)
	if len(got) != 230 || got[InstanceKey(testRole, "i-many229")].Signals == nil {
		t.Fatalf("GetMany returned %d records", len(got))
	}
	if calls := env.Calls("DynamoDB_20120810.BatchGetItem") - before; calls != 3 {
		t.Fatalf("BatchGetItem calls = %d, want 3 for 231 ids", calls)
	}
}

func TestReservationsNeverPassTheCap(t *testing.T) {
	s, _ := newStore(t)
	none := func(context.Context) (map[string]string, error) { return nil, nil }
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Reserve(ctx, "linux", fmt.Sprintf("r%d", i), 1, 3, time.Minute, none)
			switch {
			case err == nil:
				ok.Add(1)
			case IsPoolAtCap(err):
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 3 || refused.Load() != 5 {
		t.Fatalf("%d reservations held and %d refused, want 3 and 5", ok.Load(), refused.Load())
	}
	// A settled reservation counts only until its end; a lapsed one not at all.
	if err := s.SettleReservation(ctx, "linux", "r0", nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r1", "r2", "r3", "r4", "r5", "r6", "r7"} {
		if err := s.SettleReservation(ctx, "linux", id, []string{"i-" + id}, -time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Reserve(ctx, "linux", "next", 3, 3, time.Minute, none); err != nil {
		t.Fatalf("the cap is free again, yet: %v", err)
	}
	if err := s.Reserve(ctx, "linux", "over", 1, 3, time.Minute, none); !IsPoolAtCap(err) {
		t.Fatalf("a fourth instance was reserved: %v", err)
	}
}

func TestAReservationCountsOnlyWhatTheIndexDoesNotShow(t *testing.T) {
	s, _ := newStore(t)
	indexed := map[string]string{}
	count := func(context.Context) (map[string]string, error) { return indexed, nil }
	if err := s.Reserve(ctx, "linux", "a", 2, 3, time.Minute, count); err != nil {
		t.Fatal(err)
	}
	if err := s.SettleReservation(ctx, "linux", "a", []string{"i-1", "i-2"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The index shows one of the two: 1 indexed + 1 pending + 1 asked = 3.
	indexed["i-1"] = "a"
	if err := s.Reserve(ctx, "linux", "b", 1, 3, time.Minute, count); err != nil {
		t.Fatalf("an instance was counted twice (index and reservation): %v", err)
	}
	if err := s.Reserve(ctx, "linux", "c", 1, 3, time.Minute, count); !IsPoolAtCap(err) {
		t.Fatalf("a fourth instance was reserved: %v", err)
	}
	// b's provision died after writing its record, before settling: the
	// record carries b as its assignment and is not counted twice.
	// With a cap of 4: i-1, i-3 indexed, i-2 pending, 1 asked.
	indexed["i-3"] = "b"
	if err := s.Reserve(ctx, "linux", "c", 1, 4, time.Minute, count); err != nil {
		t.Fatalf("b's record was counted twice (index and unsettled reservation): %v", err)
	}
}

func TestInPoolStateReadsWholeRecordsOfThePoolInTheStateOrderedByKey(t *testing.T) {
	s, _ := newStore(t)
	for _, id := range []string{"i-ips3", "i-ips1", "i-ips2"} {
		running(t, s, id, "run-"+id)
	}
	created(t, s, "i-ips0", "run-created")
	got, err := s.InPoolState(ctx, testPool, Running)
	must(t, err)
	if len(got) != 3 {
		t.Fatalf("InPoolState(running) returned %d records, want 3", len(got))
	}
	for i, rec := range got {
		// The index projects neither runId nor signals: these come from the record.
		if rec.State != Running || rec.RunID != "run-"+rec.ID || rec.Signals == nil {
			t.Fatalf("record %d = %+v: want a whole running record", i, rec)
		}
		if i > 0 && got[i-1].Key >= rec.Key {
			t.Fatalf("records not ordered by key: %s before %s", got[i-1].Key, rec.Key)
		}
	}
	none, err := s.InPoolState(ctx, "another-pool", Running)
	must(t, err)
	if len(none) != 0 {
		t.Fatalf("InPoolState of another pool returned %d records, want 0", len(none))
	}
}
