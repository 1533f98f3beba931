package state

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// spanKey is what a test compares: state, run and length.
type spanKey struct {
	state State
	run   string
	secs  int64
	next  State
}

func spansOf(sp []Span) map[spanKey]int {
	out := map[spanKey]int{}
	for _, s := range sp {
		out[spanKey{s.State, s.RunID, s.Seconds(), s.Next}]++
	}
	return out
}

func TestTheLedgerHoldsOneSpanPerStateAnInstancePassedThrough(t *testing.T) {
	s, clk := newStore(t)
	start := clk.Now()
	inst := created(t, s, "i-0001", "run-1")
	must(t, s.PutSignal(ctx, inst.Key, inst.Assignment, SignalRegOK, ""))
	clk.Add(30 * time.Second)
	run1, err := s.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	must(t, err)
	clk.Add(600 * time.Second)
	idle, err := s.Release(ctx, run1.Ref(), "run-1", 15*time.Minute, nil)
	must(t, err)
	must(t, s.PutSignal(ctx, idle.Key, idle.Assignment, SignalRemoveRegOK, ""))
	_, err = s.MarkPooled(ctx, idle.Ref())
	must(t, err)
	clk.Add(300 * time.Second)
	claimed, err := s.Claim(ctx, idle.Key, claimReq("run-2"))
	must(t, err)
	must(t, s.PutSignal(ctx, claimed.Key, claimed.Assignment, SignalRegOK, ""))
	clk.Add(20 * time.Second)
	run2, err := s.MarkRunning(ctx, claimed.Ref(), time.Hour, time.Hour)
	must(t, err)
	clk.Add(100 * time.Second)
	idle2, err := s.Release(ctx, run2.Ref(), "run-2", 15*time.Minute, nil)
	must(t, err)
	clk.Add(50 * time.Second)
	_, err = s.Terminate(ctx, idle2.Key, Termination{Assignment: idle2.Assignment, Reason: "test"})
	must(t, err)

	got, err := s.Usage(ctx, start.Add(-time.Hour), clk.Now().Add(time.Hour))
	must(t, err)
	want := map[spanKey]int{
		{Created, "run-1", 30, Running}: 1, {Running, "run-1", 600, Idle}: 1, {Idle, "", 300, Claimed}: 1,
		{Claimed, "run-2", 20, Running}: 1, {Running, "run-2", 100, Idle}: 1, {Idle, "", 50, Terminated}: 1,
	}
	if g := spansOf(got); len(g) != len(want) || len(got) != 6 {
		t.Fatalf("spans = %+v, want %v", got, want)
	} else {
		for k, n := range want {
			if g[k] != n {
				t.Fatalf("span %+v: %d, want %d (all: %+v)", k, g[k], n, got)
			}
		}
	}
	for _, sp := range got {
		if sp.Pool != testPool || sp.Owner != testOwner || sp.InstanceType != "c7i.large" || sp.UsageClass != "on-demand" {
			t.Fatalf("span %+v lacks the record's pool, owner, type or usage class", sp)
		}
	}
	if rec, lost, err := s.UsageCounts(); rec != 6 || lost != 0 {
		t.Fatalf("usage counts = %d recorded, %d lost (%v), want 6, 0", rec, lost, err)
	}
	// A window that ends before the spans did holds none of them.
	early, err := s.Usage(ctx, start.Add(-time.Hour), start)
	must(t, err)
	if len(early) != 0 {
		t.Fatalf("spans before they ended: %+v", early)
	}
}

func TestASpanWrittenTwiceIsOneEntryOfTheLedger(t *testing.T) {
	s, clk := newStore(t)
	inst := created(t, s, "i-0002", "run-1")
	must(t, s.PutSignal(ctx, inst.Key, inst.Assignment, SignalRegOK, ""))
	clk.Add(45 * time.Second)
	run1, err := s.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	must(t, err)
	s.recordSpan(ctx, run1) // the SDK's retry of a stored write, recognised by applied
	got, err := s.Usage(ctx, clk.Now().Add(-time.Hour), clk.Now().Add(time.Hour))
	must(t, err)
	if len(got) != 1 || got[0].Seconds() != 45 {
		t.Fatalf("spans = %+v, want one of 45 s", got)
	}
}

// The span's state is the control plane's copy: an instance that rewrites
// its record's state (the instance role may name state, see
// AgentAttributes) does not relabel its time.
func TestAStateTheInstanceForgedDoesNotLabelItsSpan(t *testing.T) {
	s, clk := newStore(t)
	inst := created(t, s, "i-0003", "run-1")
	must(t, s.PutSignal(ctx, inst.Key, inst.Assignment, SignalRegOK, ""))
	clk.Add(10 * time.Second)
	run1, err := s.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	must(t, err)
	clk.Add(90 * time.Second)
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(string(run1.Key)),
		UpdateExpression:          aws.String("SET #s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: string(Stopped)}}})
	must(t, err)
	_, err = s.Terminate(ctx, run1.Key, Termination{Assignment: run1.Assignment, Reason: "forged"})
	must(t, err)
	got, err := s.Usage(ctx, clk.Now().Add(-time.Hour), clk.Now().Add(time.Hour))
	must(t, err)
	if spansOf(got)[spanKey{Running, "run-1", 90, Terminated}] != 1 {
		t.Fatalf("spans = %+v, want the 90 s running span of run-1", got)
	}
}

func TestALiveRecordsOpenSpanRunsFromItsStateToNow(t *testing.T) {
	s, clk := newStore(t)
	inst := created(t, s, "i-0004", "run-1")
	clk.Add(70 * time.Second)
	rec, err := s.Get(ctx, inst.Key)
	must(t, err)
	sp, ok := rec.OpenSpan(clk.Now().Unix())
	if !ok || sp.State != Created || sp.Seconds() != 70 || sp.RunID != "run-1" || !sp.Open {
		t.Fatalf("open span = %+v (%v), want created for 70 s of run-1", sp, ok)
	}
}

// Every other write path that moves a record's state (stop, start,
// unclaim, adopt, a pre-warmed instance joining the pool, a termination
// after Expire) closes its span; writes that move no state (heartbeat,
// renew, pooled, expire) close none: an expired lease is not a state, its
// time runs on in the state the record is in until it is terminated.
func TestEveryStateAWritePathMovesARecordOutOfIsASpanOfTheLedger(t *testing.T) {
	s, clk := newStore(t)
	start := clk.Now()
	// A pre-warmed instance: created with no run, joins the pool.
	pre, err := s.Create(ctx, NewInstance{ID: "i-0005", RoleID: testRole, Pool: testPool, Owner: testOwner, Assignment: NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", LaunchTemplateVersion: "3", TTL: 10 * time.Minute})
	must(t, err)
	must(t, s.PutSignal(ctx, pre.Key, pre.Assignment, SignalOK, ""))
	clk.Add(40 * time.Second)
	idle, err := s.JoinPool(ctx, pre.Ref(), 15*time.Minute)
	must(t, err)
	must(t, s.PutSignal(ctx, idle.Key, idle.Assignment, SignalRemoveRegOK, ""))
	must(t, s.Heartbeat(ctx, idle.Key))
	idle, err = s.MarkPooled(ctx, idle.Ref())
	must(t, err)
	idle, err = s.Renew(ctx, idle.Ref(), 15*time.Minute)
	must(t, err)
	clk.Add(60 * time.Second)
	// Claimed, its registration fails: back to idle (Unclaim).
	claimed, err := s.Claim(ctx, idle.Key, claimReq("run-u"))
	must(t, err)
	clk.Add(7 * time.Second)
	idle, err = s.Unclaim(ctx, claimed.Ref(), 15*time.Minute, nil)
	must(t, err)
	must(t, s.PutSignal(ctx, idle.Key, idle.Assignment, SignalRemoveRegOK, ""))
	clk.Add(80 * time.Second)
	stopped, err := s.Stop(ctx, idle.Ref(), time.Hour)
	must(t, err)
	clk.Add(900 * time.Second)
	started, err := s.Start(ctx, stopped.Key, claimReq("run-s"), 10*time.Minute)
	must(t, err)
	clk.Add(25 * time.Second)
	adopted, err := s.Adopt(ctx, started.Ref(), time.Hour, time.Hour)
	must(t, err)
	clk.Add(200 * time.Second)
	adopted, err = s.Expire(ctx, adopted.Ref(), "test: lease ended")
	must(t, err)
	clk.Add(5 * time.Second)
	_, err = s.Terminate(ctx, adopted.Key, Termination{IfExpired: true, Reason: "expired"})
	must(t, err)

	got, err := s.Usage(ctx, start.Add(-time.Hour), clk.Now().Add(time.Hour))
	must(t, err)
	want := map[spanKey]int{
		{Created, "", 40, Idle}: 1, {Idle, "", 60, Claimed}: 1, {Claimed, "run-u", 7, Idle}: 1,
		{Idle, "", 80, Stopped}: 1, {Stopped, "", 900, Created}: 1, {Created, "run-s", 25, Running}: 1,
		{Running, "run-s", 205, Terminated}: 1,
	}
	g := spansOf(got)
	if len(got) != len(want) {
		t.Fatalf("%d spans %+v, want %v", len(got), got, want)
	}
	for k, n := range want {
		if g[k] != n {
			t.Fatalf("span %+v: %d, want %d (all: %+v)", k, g[k], n, got)
		}
	}
}
