package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state/statetest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

var ctx = context.Background()

func newQueue(t testing.TB) (*Queue, *sqs.Client) {
	t.Helper()
	client := env.Config(t).SQS()
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(awstest.Name(t, "pool"))})
	if err != nil {
		t.Fatal(err)
	}
	return New(client, aws.ToString(out.QueueUrl)), client
}

func msg(id, typ, class string) Message {
	return Message{InstanceID: id, Pool: "linux", InstanceType: typ, UsageClass: class, IdleUntil: time.Now().Add(15 * time.Minute).Unix()}
}

func send(t testing.TB, q *Queue, msgs ...Message) {
	t.Helper()
	for _, m := range msgs {
		if err := q.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// visible counts the messages that can be received now. It hides them for a
// minute, so call it last.
func visible(t testing.TB, q *Queue) int {
	t.Helper()
	n := 0
	for {
		out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.URL()), MaxNumberOfMessages: 10, VisibilityTimeout: 60})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return n
		}
		n += len(out.Messages)
	}
}

func always(o Outcome) ClaimFunc {
	return func(context.Context, Message) (Outcome, error) { return o, nil }
}

func TestTakeClaimsWhatMatchesAndPutsTheRestBack(t *testing.T) {
	q, _ := newQueue(t)
	send(t, q, msg("i-1", "c6i.large", "on-demand"), msg("i-2", "m7i.large", "on-demand"),
		msg("i-3", "c7i.large", "spot"), msg("i-4", "c7g.large", "on-demand"))
	m, _ := NewMatcher("on-demand", []string{"c*"})
	res, err := q.Take(ctx, 5, m, always(Claimed))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range res.Claimed {
		got[c.InstanceID] = true
	}
	if len(got) != 2 || !got["i-1"] || !got["i-4"] || !res.Exhausted {
		t.Fatalf("claimed %v exhausted=%v, want i-1 and i-4 and exhaustion", got, res.Exhausted)
	}
	if n := visible(t, q); n != 2 {
		t.Fatalf("%d messages left visible, want the 2 that did not match", n)
	}
}

func TestTakeStopsAtWant(t *testing.T) {
	q, _ := newQueue(t)
	for i := 0; i < 6; i++ {
		send(t, q, msg(fmt.Sprintf("i-%d", i), "c6i.large", "on-demand"))
	}
	res, err := q.Take(ctx, 2, Matcher{}, always(Claimed))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Claimed) != 2 || res.Exhausted {
		t.Fatalf("claimed %d exhausted=%v, want 2 and not exhausted", len(res.Claimed), res.Exhausted)
	}
	if n := visible(t, q); n != 4 {
		t.Fatalf("%d left, want 4", n)
	}
}

func TestStaleAndUnreadableMessagesAreDeleted(t *testing.T) {
	q, client := newQueue(t)
	send(t, q, msg("i-1", "c6i.large", "on-demand"), msg("i-2", "c6i.large", "on-demand"))
	client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL()), MessageBody: aws.String("not json")})
	client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL()), MessageBody: aws.String(`{"instanceId":"i-9"}`)})
	res, err := q.Take(ctx, 5, Matcher{}, always(Stale))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Claimed) != 0 || res.Stale != 4 || !res.Exhausted {
		t.Fatalf("result %+v, want 4 stale and exhaustion", res)
	}
	if n := visible(t, q); n != 0 {
		t.Fatalf("%d messages left, want 0", n)
	}
}

func TestUndecidedClaimPutsBackAndStops(t *testing.T) {
	q, _ := newQueue(t)
	send(t, q, msg("i-1", "c6i.large", "on-demand"))
	boom := errors.New("dynamodb unreachable")
	_, err := q.Take(ctx, 1, Matcher{}, func(context.Context, Message) (Outcome, error) { return PutBack, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Take = %v, want the claim error", err)
	}
	if n := visible(t, q); n != 1 {
		t.Fatalf("message lost: %d visible, want 1", n)
	}
}

func TestEmptyPoolIsExhaustedWithinTheLongPoll(t *testing.T) {
	q, _ := newQueue(t)
	start := time.Now()
	res, err := q.Take(ctx, 3, Matcher{}, always(Claimed))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Exhausted || len(res.Claimed) != 0 {
		t.Fatalf("result %+v", res)
	}
	t.Logf("empty pool detected in %s", time.Since(start).Round(time.Millisecond))
}

func TestSendValidates(t *testing.T) {
	q, _ := newQueue(t)
	bad := msg("i-1", "c6i.large", "reserved")
	if err := q.Send(ctx, bad); err == nil {
		t.Fatal("message with a bad usage class sent")
	}
	if n := visible(t, q); n != 0 {
		t.Fatalf("invalid message reached the queue")
	}
}

// TestClaimRaceThroughThePool: 32 provisions race over a queue that holds a
// message for each of 20 clean idle instances, a duplicate for 10 of them and
// stale messages for instances that are gone or taken. Every idle instance is
// claimed exactly once and no stale message claims anything.
// poolRole is the pool's instance role id: messages name instances by id,
// and the claimer keys their records with it.
const poolRole = "AROAPOOLTESTROLE00001"

func TestClaimRaceThroughThePool(t *testing.T) {
	q, _ := newQueue(t)
	s := statetest.NewStore(t, env)
	const idle, racers = 20, 32
	for i := 0; i < idle; i++ {
		p := statetest.Pooled(t, s, statetest.Spec{ID: fmt.Sprintf("i-p%02d", i), RoleID: poolRole, Pool: "linux", Owner: "acme", InstanceType: "c7i.large", UsageClass: "on-demand"})
		send(t, q, Message{InstanceID: p.ID, Pool: "linux", InstanceType: p.InstanceType, UsageClass: p.UsageClass, IdleUntil: p.Threshold})
		if i%2 == 0 {
			send(t, q, Message{InstanceID: p.ID, Pool: "linux", InstanceType: p.InstanceType, UsageClass: p.UsageClass, IdleUntil: p.Threshold})
		}
	}
	// Stale: one terminated, one running for another run, one never recorded.
	gone := statetest.Pooled(t, s, statetest.Spec{ID: "i-gone", RoleID: poolRole, Pool: "linux", Owner: "acme", InstanceType: "c7i.large", UsageClass: "on-demand"})
	if _, err := s.Terminate(ctx, gone.Key, state.Termination{Assignment: gone.Assignment}); err != nil {
		t.Fatal(err)
	}
	taken := statetest.Pooled(t, s, statetest.Spec{ID: "i-taken", RoleID: poolRole, Pool: "linux", Owner: "acme", InstanceType: "c7i.large", UsageClass: "on-demand"})
	if _, err := s.Claim(ctx, taken.Key, claimRequest("other-run")); err != nil {
		t.Fatal(err)
	}
	send(t, q, msg("i-gone", "c7i.large", "on-demand"), msg("i-taken", "c7i.large", "on-demand"), msg("i-never", "c7i.large", "on-demand"))

	var mu sync.Mutex
	owner := map[string]string{}
	empty := 0
	var wg sync.WaitGroup
	start := time.Now()
	for r := 0; r < racers; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			run := fmt.Sprintf("run-%02d", r)
			c := &Claimer{Store: s, RoleID: poolRole, Request: claimRequest(run)}
			res, err := q.Take(ctx, 1, Matcher{UsageClass: "on-demand", Types: []string{"c*"}}, c.Claim)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if len(res.Claimed) == 0 {
				empty++
				return
			}
			for _, inst := range c.Instances {
				if prev, dup := owner[inst.ID]; dup {
					t.Errorf("%s claimed by %s and %s", inst.ID, prev, run)
				}
				owner[inst.ID] = run
			}
		}(r)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(owner) != idle {
		t.Fatalf("%d instances claimed, want %d (none lost): %v", len(owner), idle, owner)
	}
	if empty != racers-idle {
		t.Fatalf("%d provisions found the pool empty, want %d", empty, racers-idle)
	}
	for id, run := range owner {
		rec, err := s.Get(ctx, state.InstanceKey(poolRole, id))
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != state.Claimed || rec.RunID != run {
			t.Fatalf("%s is %s for %q, want claimed for %s", id, rec.State, rec.RunID, run)
		}
	}
	if _, ok := owner["i-gone"]; ok {
		t.Fatal("a terminated instance was claimed")
	}
	if n := visible(t, q); n != 0 {
		t.Fatalf("%d messages left in the pool, want 0 (duplicates and stale ones deleted)", n)
	}
	t.Logf("32 racers, 20 claims in %s", elapsed.Round(time.Millisecond))
}

func claimRequest(run string) state.ClaimRequest {
	return state.ClaimRequest{RunID: run, Pool: "linux", Owner: "acme", ClaimTTL: 5 * time.Minute}
}

func TestClaimerSortsRefusals(t *testing.T) {
	s := statetest.NewStore(t, env)
	p := statetest.Pooled(t, s, statetest.Spec{ID: "i-c1", RoleID: poolRole, Pool: "linux", Owner: "acme", InstanceType: "c7i.large", UsageClass: "on-demand"})
	m := Message{InstanceID: p.ID, Pool: "linux", InstanceType: "c7i.large", UsageClass: "on-demand", IdleUntil: p.Threshold}

	other := &Claimer{Store: s, RoleID: poolRole, Request: claimRequest("r1")}
	other.Request.Owner = "acme/api"
	if o, err := other.Claim(ctx, m); o != PutBack || err != nil {
		t.Fatalf("other owner: %v %v, want PutBack", o, err)
	}
	worn := &Claimer{Store: s, RoleID: poolRole, Request: claimRequest("r1")}
	worn.Request.MaxUses = 1
	if o, err := worn.Claim(ctx, m); o != Stale || err != nil || len(worn.Retire) != 1 {
		t.Fatalf("used up: %v %v retire=%d, want Stale and one to retire", o, err, len(worn.Retire))
	}
	ok := &Claimer{Store: s, RoleID: poolRole, Request: claimRequest("r1")}
	if o, err := ok.Claim(ctx, m); o != Claimed || err != nil || len(ok.Instances) != 1 {
		t.Fatalf("claim: %v %v", o, err)
	}
	if o, err := ok.Claim(ctx, m); o != Stale || err != nil {
		t.Fatalf("duplicate: %v %v, want Stale", o, err)
	}
}

// An instance whose agent said EC2 recommends rebalancing it is, like a
// worn one, dropped from the queue and handed back to be retired.
func TestClaimerRetiresAnInstanceEC2RecommendsRebalancing(t *testing.T) {
	s := statetest.NewStore(t, env)
	p := statetest.Pooled(t, s, statetest.Spec{ID: "i-r1", RoleID: poolRole, Pool: "linux", Owner: "acme", InstanceType: "c7i.large", UsageClass: "spot"})
	if err := s.PutSignal(ctx, p.Key, p.Assignment, state.SignalRebalance, "noticeTime 2026-11-28T22:00:00Z"); err != nil {
		t.Fatal(err)
	}
	m := Message{InstanceID: p.ID, Pool: "linux", InstanceType: "c7i.large", UsageClass: "spot", IdleUntil: p.Threshold}
	c := &Claimer{Store: s, RoleID: poolRole, Request: claimRequest("r1")}
	if o, err := c.Claim(ctx, m); o != Stale || err != nil || len(c.Retire) != 1 || len(c.Instances) != 0 {
		t.Fatalf("rebalance recommended: %v %v retire=%d claimed=%d, want Stale and one to retire", o, err, len(c.Retire), len(c.Instances))
	}
}

// BenchmarkClaimRace races provisions through the queue for 20 pooled
// instances of acme (setup excluded), once with our long poll (WaitSeconds 1)
// and once, in the same run, with the peer design's short polling
// (WaitSeconds 0); nothing else differs.
//
//   - pure: 32 provisions of acme want one instance each. claims/s counts the
//     winners up to the last successful claim (ns/op also includes the
//     losers' final empty receive).
//   - arriving: 20 provisions start while the 20 instances are being pooled
//     (releases finishing as other workflows start): the provisions and the
//     pool messages arrive at random times within the same half second,
//     seeded, the same schedule for both variants. "missed" are provisions
//     that came away empty although an instance was pooled within half a
//     second: each would launch a new instance needlessly while a pooled
//     one stays idle.
//
// receives and empty-receives count ReceiveMessage calls and the ones that
// returned no message, per round. Moto answers a short poll from the whole
// queue; real SQS samples a subset of its servers and can answer a short
// poll empty even when visible messages exist, which moto cannot show: the
// peer's figures here are a lower bound.
func BenchmarkClaimRace(b *testing.B) {
	s := statetest.NewStore(b, env)
	type variant struct {
		prefix string
		wait   int32
	}
	variants := []variant{{"", 1}, {"peer-", 0}}
	type totals struct {
		claims                      int
		winning                     time.Duration
		receives, arrRecv, arrEmpty int64
		missed                      int
	}
	tot := map[string]*totals{}
	for _, v := range variants {
		tot[v.prefix] = &totals{}
	}
	round := 0
	// race runs racers provisions against 20 pooled instances and returns
	// the claims, the time to the last one and the receives. Without arrive,
	// the messages are in the queue and the provisions start at once; with
	// it, provision r starts at arrive[r] and message k is sent at
	// arrive[racers+k].
	race := func(v variant, racers int, arrive []time.Duration) (claims int, lastWin time.Duration, sq *countingSQS) {
		b.StopTimer()
		round++
		q, client := newQueue(b)
		sq = &countingSQS{SQSAPI: client}
		q = New(sq, q.URL())
		q.WaitSeconds = v.wait
		msgs := make([]Message, 20)
		for k := range msgs {
			p := statetest.Pooled(b, s, statetest.Spec{ID: fmt.Sprintf("i-b%d-%02d", round, k), RoleID: poolRole, Pool: "linux", Owner: "acme", InstanceType: "c7i.large", UsageClass: "on-demand"})
			msgs[k] = Message{InstanceID: p.ID, Pool: "linux", InstanceType: p.InstanceType, UsageClass: p.UsageClass, IdleUntil: p.Threshold}
			if arrive == nil {
				send(b, q, msgs[k])
			}
		}
		sq.reset()
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		for k, m := range msgs {
			if arrive == nil {
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(arrive[racers+k])
				if err := q.Send(ctx, m); err != nil {
					b.Error(err)
				}
			}()
		}
		for r := 0; r < racers; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if arrive != nil {
					time.Sleep(arrive[r])
				}
				c := &Claimer{Store: s, RoleID: poolRole, Request: claimRequest(fmt.Sprintf("run-%d-%d", round, r))}
				res, err := q.Take(ctx, 1, Matcher{}, c.Claim)
				if err != nil {
					b.Error(err)
				}
				mu.Lock()
				defer mu.Unlock()
				if len(res.Claimed) > 0 {
					claims += len(res.Claimed)
					lastWin = max(lastWin, time.Since(start))
				}
			}()
		}
		wg.Wait()
		return claims, lastWin, sq
	}
	for i := 0; b.Loop(); i++ {
		rng := rand.New(rand.NewPCG(uint64(i), 8))
		arrive := make([]time.Duration, 40)
		for k := range arrive {
			arrive[k] = time.Duration(rng.Int64N(int64(500 * time.Millisecond)))
		}
		for _, v := range variants {
			t := tot[v.prefix]
			claims, win, sq := race(v, 32, nil)
			t.claims += claims
			t.winning += win
			t.receives += sq.calls.Load()
			claims, _, sq = race(v, 20, arrive)
			t.missed += 20 - claims
			t.arrRecv += sq.calls.Load()
			t.arrEmpty += sq.empty.Load()
		}
	}
	n := float64(b.N)
	for _, v := range variants {
		t := tot[v.prefix]
		b.ReportMetric(float64(t.claims)/t.winning.Seconds(), v.prefix+"claims/s")
		b.ReportMetric(float64(t.winning.Milliseconds())/n, v.prefix+"ms-to-20-claims")
		b.ReportMetric(float64(t.receives)/n, v.prefix+"pure-receives")
		b.ReportMetric(float64(t.arrRecv)/n, v.prefix+"arriving-receives")
		b.ReportMetric(float64(t.arrEmpty)/n, v.prefix+"arriving-empty-receives")
		b.ReportMetric(float64(t.missed)/n, v.prefix+"arriving-missed")
	}
}

// countingSQS counts the pool's ReceiveMessage calls and empty answers.
type countingSQS struct {
	SQSAPI
	calls, empty atomic.Int64
}

func (c *countingSQS) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := c.SQSAPI.ReceiveMessage(ctx, in, opts...)
	c.calls.Add(1)
	if err == nil && len(out.Messages) == 0 {
		c.empty.Add(1)
	}
	return out, err
}

func (c *countingSQS) reset() { c.calls.Store(0); c.empty.Store(0) }
