package refresh_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
)

// forge rewrites attributes of a record as root on its instance could where
// the instance role's attribute limit is bypassed (a deployment with an
// older policy, or a mistake in ours): the control plane must still act
// on nothing but that instance.
func (w *world) forge(key state.Key, attrs map[string]types.AttributeValue) {
	w.t.Helper()
	names, values, set := map[string]string{}, map[string]types.AttributeValue{}, ""
	i := 0
	for a, v := range attrs {
		i++
		n, p := "#a"+strconv.Itoa(i), ":v"+strconv.Itoa(i)
		names[n], values[p] = a, v
		if set != "" {
			set += ", "
		}
		set += n + " = " + p
	}
	_, err := w.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(w.name), Key: map[string]types.AttributeValue{state.AttrPK: &types.AttributeValueMemberS{Value: string(key)}},
		UpdateExpression: aws.String("SET " + set), ExpressionAttributeNames: names, ExpressionAttributeValues: values})
	must(w.t, err)
}

// Issue 29: an instance rewrote its record's instanceId and githubRunnerId
// to another instance's and let its lease run out; refresh terminated the
// instance the record named and deleted that instance's runner. Now the
// instance id comes from the record's key and a runner is deleted only if
// GitHub names it after the instance: the forger alone ends, the other
// instance and its runner stay. (With the key-derived id off, refresh
// terminates the victim; with the name check off, it deletes its runner.)
func TestRefreshEndsOnlyTheInstanceWhoseRecordWasForgedNeverTheOneItNames(t *testing.T) {
	w := newWorld(t)
	victim, _ := w.running("run-victim", 0)
	victimRunner := w.fake.AddRunner("acme", "ghr-1-"+victim.ID, false, "run-victim") // idle: GitHub would delete it
	attacker, _ := w.running("run-attacker", 0)
	w.forge(attacker.Key, map[string]types.AttributeValue{
		"instanceId":        &types.AttributeValueMemberS{Value: victim.ID},
		"githubRunnerId":    &types.AttributeValueMemberN{Value: strconv.FormatInt(victimRunner, 10)},
		state.AttrThreshold: &types.AttributeValueMemberN{Value: strconv.FormatInt(w.now.Unix()-1, 10)},
	})
	out, err := w.refresh() // reports the runner it refused to delete
	if out == nil {
		t.Fatal(err)
	}
	if !w.alive(victim.ID) {
		t.Fatalf("refresh terminated %s, the instance a forged record named (terminated: %+v)", victim.ID, out.Terminated)
	}
	if w.alive(attacker.ID) {
		t.Fatalf("the forger %s lives on after its lease ended (terminated: %+v)", attacker.ID, out.Terminated)
	}
	found := false
	for _, rn := range w.fake.Runners() {
		found = found || rn.ID == victimRunner
	}
	if !found {
		t.Fatalf("refresh deleted runner %d of %s, which a forged record named", victimRunner, victim.ID)
	}
	if rec, err := w.cp.Get(ctx, victim.Key); err != nil || rec.State != state.Running {
		t.Fatalf("the victim's record: %+v %v, want it running", rec, err)
	}
}

// Issue 31, item 3: an agent whose just-in-time runners kept ending without
// a job signals UD_FAILED mid-run and asks for no more; no runner is left on
// the instance. Refresh ends it at once, not when its lease runs out.
func TestRefreshEndsARunningInstanceWhoseAgentSignalledFailed(t *testing.T) {
	w := newWorld(t)
	inst, agent := w.running("run-capped", 0)
	must(t, agent.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalFailed, "the just-in-time runner exited 3 times without taking a job"))
	out, err := w.refresh()
	must(t, err)
	if len(out.Expired) != 1 || out.Expired[0].InstanceID != inst.ID {
		t.Fatalf("expired %+v, want %s", out.Expired, inst.ID)
	}
	healthy, _ := w.running("run-fine", 0)
	if out, _ = w.refresh(); len(out.Expired) != 0 {
		t.Fatalf("refresh expired %+v; %s signalled nothing", out.Expired, healthy.ID)
	}
}

// forgeAsInstance rewrites attributes of a record as root on its instance
// can with the instance role's own permissions: only attributes the role's
// policy lets it name (state.AgentAttributes; provider/iam_catalogue_test.go
// holds the policy to the same list).
func (w *world) forgeAsInstance(key state.Key, attrs map[string]types.AttributeValue) {
	w.t.Helper()
	for a := range attrs {
		if !slices.Contains(state.AgentAttributes, a) {
			w.t.Fatalf("the instance role may not write %s: not a forgery it can make", a)
		}
	}
	w.forge(key, attrs)
}

func unixAttr(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.Unix(), 10)}
}

// Issue 36, item 4: root on an instance rewrote what its role may write of
// its own record — a running lease and its cap a year ahead; an idle
// record's state to running with a running lease — so that no lease ever
// ended it and scale-down took it for busy. Refresh judges the record
// against what the control plane itself wrote (poolState, leaseLimit,
// launchedAt) on its own clock and terminates both forgers at once; an
// honest instance, extending its lease within its cap, is left alone.
// (With LifeNotGiven answering "" the test reports "the forger i-… lives
// on: its record claims a year of lease".)
func TestRefreshRetiresAnInstanceWhoseRecordClaimsALifeTheControlPlaneDidNotGive(t *testing.T) {
	w := newWorld(t)
	forever, _ := w.running("run-forever", 0)
	w.forgeAsInstance(forever.Key, map[string]types.AttributeValue{
		state.AttrThreshold: unixAttr(w.now.Add(365 * 24 * time.Hour)),
		"leaseCap":          unixAttr(w.now.Add(365 * 24 * time.Hour)),
		"leaseAt":           unixAttr(w.now),
	})
	busy := w.idle()
	w.forgeAsInstance(busy.Key, map[string]types.AttributeValue{
		"state":             &types.AttributeValueMemberS{Value: string(state.Running)},
		state.AttrThreshold: unixAttr(w.now.Add(10 * time.Minute)),
	})
	honest, agent := w.running("run-honest", 0)
	extended, err := agent.ExtendLease(ctx, honest.Key, honest.Assignment, honest.Threshold, honest.LeaseCap)
	must(t, err)

	out, err := w.refresh()
	must(t, err)
	for _, forger := range []*state.Instance{forever, busy} {
		if w.alive(forger.ID) {
			t.Fatalf("the forger %s lives on: its record claims a year of lease or a state not given (terminated: %+v)", forger.ID, out.Terminated)
		}
		rec, err := w.cp.Get(ctx, forger.Key)
		must(t, err)
		if rec.State != state.Terminated || !strings.Contains(rec.TerminatedReason, "claims a life the control plane did not give") {
			t.Errorf("the forger's record: %s (%s)", rec.State, rec.TerminatedReason)
		}
	}
	kinds := map[string]refresh.Kind{}
	for _, d := range out.Terminated {
		kinds[d.InstanceID] = d.Kind
	}
	if kinds[forever.ID] != refresh.KindForged || kinds[busy.ID] != refresh.KindForged {
		t.Errorf("decisions %+v, want both forgers as %s", out.Terminated, refresh.KindForged)
	}
	if !w.alive(honest.ID) || kinds[honest.ID] != "" {
		t.Fatalf("refresh ended %s, whose agent extended its lease to its cap %d honestly", honest.ID, extended.Threshold)
	}
	// What the control plane judges by is out of the role's reach.
	for _, a := range []string{state.AttrLeaseLimit, state.AttrPoolState, "launchedAt"} {
		if slices.Contains(state.AgentAttributes, a) {
			t.Errorf("the instance role may write %s", a)
		}
	}
}
