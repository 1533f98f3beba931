package main

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// Scale-down cut off (the function killed at its timeout) or short of
// time: what it leaves must be repaired by the next run, never half done.

// cutDB cancels the run after its kth conditional write, as if the
// function were killed there; the writes in flight may or may not land.
type cutDB struct {
	state.DynamoDBAPI
	after  int64
	n      atomic.Int64
	cancel context.CancelFunc
}

func (c *cutDB) UpdateItem(cx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.DynamoDBAPI.UpdateItem(cx, in, opts...)
	if c.n.Add(1) == c.after {
		c.cancel()
	}
	return out, err
}

// checkConsistent fails when EC2 and the records disagree: an instance
// alive whose record is terminated, a live record without a live instance,
// an instance terminated in EC2 whose record is live.
func (d *deployment) checkConsistent(ids []string, when string) {
	d.t.Helper()
	states := d.ec2States()
	recs, err := d.store.ByInstanceID(ctx, ids, d.roles)
	must(d.t, err)
	for _, id := range ids {
		rec, st := recs[id], states[id]
		switch {
		case rec == nil:
			d.t.Errorf("%s: %s has no record", when, id)
		case rec.State == state.Terminated && alive(st):
			d.t.Errorf("%s: %s is %s in EC2 but its record is terminated (%s)", when, id, st, rec.TerminatedReason)
		case rec.State != state.Terminated && !alive(st):
			d.t.Errorf("%s: %s is %q in EC2 but its record is %s", when, id, st, rec.State)
		}
	}
}

// TestScaleDownCutOffAtARandomPointIsRepairedByTheNextRun: a scale-down
// retiring many idle instances is cut off after a random number of record
// writes. Nothing it leaves is an idle instance terminated without its
// record marked, and after the next scale-down no instance is alive whose
// record is terminated and no live record lacks its instance.
func TestScaleDownCutOffAtARandomPointIsRepairedByTheNextRun(t *testing.T) {
	t.Parallel()
	const n, quota = 40, 2
	d := scaleDownDeploy(t, quota, nil)
	ids := d.launchN(n, "acme")
	for i, id := range ids {
		d.pooledIdle(id, "acme", 1, nil)
		if i%4 == 0 {
			d.fake.SetOnline(d.fake.AddRunner("acme", state.RunnerName(1, id), false, "seed-0"), false)
		}
	}
	time.Sleep(1100 * time.Millisecond)
	seed := time.Now().UnixNano()
	k := 1 + rand.New(rand.NewPCG(uint64(seed), 0)).Int64N(n-quota-1)
	t.Logf("cut after %d record writes (seed %d)", k, seed)
	cut, cancel := context.WithCancel(ctx)
	defer cancel()
	db := &cutDB{DynamoDBAPI: d.aws.DynamoDB(), after: k, cancel: cancel}
	first := d.scaleDownHere(cut, state.New(db, d.name), d.gitHub())
	t.Logf("cut run: %d kept, %d terminated, errors %v", len(first.Kept), len(first.Terminated), first.Errors)
	states := d.ec2States()
	recs, err := d.store.ByInstanceID(ctx, ids, d.roles)
	must(t, err)
	for _, id := range ids {
		if !alive(states[id]) && recs[id].State != state.Terminated {
			t.Errorf("after the cut: %s terminated in EC2 while its record is %s", id, recs[id].State)
		}
	}

	var next scaleDownOut
	d.call(bundle.HandlerScaleDown, nil, &next)
	d.checkConsistent(ids, "after the next run")
	live := 0
	for _, st := range d.ec2States() {
		if alive(st) {
			live++
		}
	}
	if live != quota {
		t.Errorf("%d instances alive after the next run, want the idle quota %d (next run: %+v)", live, quota, next)
	}
	var refreshed struct{ Errors []string }
	d.call("refresh", nil, &refreshed)
	d.checkConsistent(ids, "after refresh")
}

// TestScaleDownStopsBeforeItsDeadlineAndLeavesNothingHalfDone: GitHub is
// slow (4 s per runner deletion), 64 instances are to retire, 16 at a time,
// and the run has 12 s. It returns before its deadline, says what it
// deferred, and every record it marked has its instance terminated
// already; the next run does the rest.
func TestScaleDownStopsBeforeItsDeadlineAndLeavesNothingHalfDone(t *testing.T) {
	t.Parallel()
	const n = 64
	d := scaleDownDeploy(t, 0, nil)
	ids := d.launchN(n, "acme")
	for _, id := range ids {
		d.pooledIdle(id, "acme", 1, nil)
		d.fake.SetOnline(d.fake.AddRunner("acme", state.RunnerName(1, id), false, "seed-0"), false)
	}
	time.Sleep(1100 * time.Millisecond)
	d.fake.Inject(fakegithub.Fault{Method: "DELETE", Path: "/actions/runners/", Latency: 4 * time.Second})
	short, cancel := context.WithTimeout(ctx, 12*time.Second)
	defer cancel()
	deadline, _ := short.Deadline()
	out := d.scaleDownHere(short, d.store, d.gitHub())
	t.Logf("%d terminated, %d deferred in %.1fs", len(out.Terminated), len(out.Deferred), out.ElapsedSeconds)
	if late := time.Since(deadline); late > 0 {
		t.Errorf("returned %s after its deadline", late)
	}
	if len(out.Terminated) == 0 || len(out.Deferred) == 0 || len(out.Terminated)+len(out.Deferred) != n || len(out.Errors) != 0 {
		t.Errorf("want some terminated, the rest deferred, no errors; got %d terminated, %d deferred, errors %v", len(out.Terminated), len(out.Deferred), out.Errors)
	}
	d.fake.ClearFaults()
	states := d.ec2States()
	recs, err := d.store.ByInstanceID(ctx, ids, d.roles)
	must(t, err)
	for _, id := range ids {
		if recs[id].State == state.Terminated && alive(states[id]) {
			t.Errorf("%s: record terminated, instance %s: the run left it half done", id, states[id])
		}
	}
	var next scaleDownOut
	d.call(bundle.HandlerScaleDown, nil, &next)
	d.checkConsistent(ids, "after the next run")
	if left := len(d.live()); left != 0 {
		t.Errorf("%d instances left after the next run, want 0", left)
	}
}
