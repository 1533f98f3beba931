package jitstream_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Issue 29: root on an instance rewrote its own record (runId, and the
// instance id it names) and asked for its next just-in-time runner; the
// consumer minted one carrying another run's label into it, so the other
// run's jobs could land on the attacker's instance. A record is a request,
// not an authority: the consumer mints only for an instance its run lists
// (by the id the record's key ends with) and has not given up, of the
// run's pool, with the run's pool's owner. The forgeries below are written
// past IAM (the role's attribute limit bypassed): the consumer alone must
// hold. With MintWhy's membership clause removed, the first case mints a
// runner labelled ghr-run-2-secret into i-0abc's record.
func TestAForgedRecordGetsNoRunnerOfAnotherRun(t *testing.T) {
	for _, c := range []struct {
		name  string
		forge map[string]string
	}{
		{"an instance that wrote another run's id into its record", map[string]string{"runId": "run-2"}},
		{"and named the other run's instance as itself", map[string]string{"runId": "run-2", "instanceId": "i-0victim"}},
		{"and another pool and owner", map[string]string{"runId": "run-2", "pool": "gpu", "owner": "other-org"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			victim := r.otherRun()
			r.forge(r.inst.Key, c.forge)
			must(t, r.store.PutSignal(ctx, r.inst.Key, r.inst.Assignment, state.SignalJITNext, "2"))
			r.deliver()
			for _, rn := range r.fake.Runners() {
				for _, l := range rn.Labels {
					if strings.EqualFold(l, "ghr-run-2-secret") && rn.Name != state.JITRunnerName(victim.Uses, 1, victim.ID) {
						t.Fatalf("runner %s was minted with run-2's label for a forged record", rn.Name)
					}
				}
			}
			if rec, _ := r.store.Get(ctx, r.inst.Key); rec.JITSeq != 1 {
				t.Fatalf("the forged record got configuration %d", rec.JITSeq)
			}
		})
	}
}

// Chaos, issue 29: provision gave up an instance whose record writes were
// throttled and replaced it; the consumer then minted that instance's next
// runner for the run, and a job of the run ran on an instance no longer
// its. The run item says it was given up; nothing is minted for it.
func TestAnInstanceGivenUpByItsRunGetsNoMoreRunnersOfIt(t *testing.T) {
	r := newRig(t)
	must(t, r.store.GiveUpRunInstance(ctx, "run-1", r.inst.ID))
	must(t, r.store.PutSignal(ctx, r.inst.Key, r.inst.Assignment, state.SignalJITNext, "2"))
	r.deliver()
	if rec, _ := r.store.Get(ctx, r.inst.Key); rec.JITSeq != 1 || len(r.jitRunners()) != 1 {
		t.Fatalf("a given-up instance got configuration %d (%d runners)", rec.JITSeq, len(r.jitRunners()))
	}
}

// otherRun starts run-2 (label ghr-run-2-secret) with an instance of its own
// that got its first runner.
func (r *rig) otherRun() *state.Instance {
	r.t.Helper()
	_, _, err := r.store.StartRun(ctx, state.Run{ID: "run-2", Pool: "linux", Owner: "acme", InstanceCount: 1, Request: "{}", Label: "ghr-run-2-secret"})
	must(r.t, err)
	inst, err := r.store.Create(ctx, state.NewInstance{ID: "i-0victim", RoleID: testRole, Pool: "linux", Owner: "acme", RunID: "run-2", Assignment: state.NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute})
	must(r.t, err)
	_, err = r.store.AddRunInstances(ctx, "run-2", inst.ID)
	must(r.t, err)
	inst, err = r.deps.MintJIT(ctx, inst, 1, "ghr-run-2-secret", 1)
	must(r.t, err)
	return inst
}

// forge sets string attributes of a record directly, as an instance could
// if its role's attribute limit were bypassed.
func (r *rig) forge(key state.Key, attrs map[string]string) {
	r.t.Helper()
	names, values, set := map[string]string{}, map[string]types.AttributeValue{}, []string{}
	for a, v := range attrs {
		n, p := "#"+a, ":"+a
		names[n], values[p] = a, &types.AttributeValueMemberS{Value: v}
		set = append(set, n+" = "+p)
	}
	_, err := env.Config(r.t).DynamoDB().UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.store.Table()),
		Key:              map[string]types.AttributeValue{state.AttrPK: &types.AttributeValueMemberS{Value: string(key)}},
		UpdateExpression: aws.String("SET " + strings.Join(set, ", ")), ExpressionAttributeNames: names, ExpressionAttributeValues: values})
	must(r.t, err)
}

// Release and the other functions take a record's pool (and so its owner,
// its timings and whether a remove token is minted) from the key's role
// id, never from the record: an instance that wrote another pool and owner
// into its record would otherwise have release mint that owner's remove
// token into it. With PoolOf reading the record's pool, the forged "gpu"
// comes back (or no pool at all).
func TestTheControlPlaneTakesARecordsPoolAndOwnerFromItsKey(t *testing.T) {
	r := newRig(t)
	must(t, r.store.PutPoolConfig(ctx, state.PoolConfig{Name: "gpu", Owner: "other-org", QueueURL: "https://sqs/q2", LaunchTemplateID: "lt-2",
		LaunchTemplateVersion: "1", InstanceTypes: []string{"g6.xlarge"}, SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand", MaxInstances: 5,
		InstanceRoleID: "AROAJITSTREAMGPU00001", Registration: state.RegistrationToken}))
	r.forge(r.inst.Key, map[string]string{"pool": "gpu", "owner": "other-org"})
	rec, err := r.store.Get(ctx, r.inst.Key)
	must(t, err)
	p, err := r.deps.PoolOf(ctx, rec)
	must(t, err)
	if p.Name != "linux" || rec.Pool != "linux" || rec.Owner != "acme" || len(rec.Forged) == 0 {
		t.Fatalf("pool %s, record's pool %s and owner %s (forged %v), want linux and acme, the forgery noted", p.Name, rec.Pool, rec.Owner, rec.Forged)
	}
	stray := &state.Instance{Key: state.InstanceKey("AROANOPOOLHASTHIS0001", "i-0stray"), Pool: "linux", Owner: "acme"}
	if _, err := r.deps.PoolOf(ctx, stray); !state.IsNotFound(err) {
		t.Fatalf("a record of a role no pool has: %v, want not found", err)
	}
}

// otherOwner starts a run of another owner's pool with an instance that got
// its first runner.
func (r *rig) otherOwner(owner string) *state.Instance {
	r.t.Helper()
	const role = "AROAJITSTREAMOTHER001"
	must(r.t, r.store.PutPoolConfig(ctx, state.PoolConfig{Name: "linux-" + owner, Owner: owner, QueueURL: "https://sqs/q3", LaunchTemplateID: "lt-3",
		LaunchTemplateVersion: "1", InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand", MaxInstances: 5, InstanceRoleID: role}))
	_, _, err := r.store.StartRun(ctx, state.Run{ID: "run-" + owner, Pool: "linux-" + owner, Owner: owner, InstanceCount: 1, Request: "{}", Label: "ghr-run-" + owner})
	must(r.t, err)
	inst, err := r.store.Create(ctx, state.NewInstance{ID: "i-0" + owner, RoleID: role, Pool: "linux-" + owner, Owner: owner, RunID: "run-" + owner, Assignment: state.NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute})
	must(r.t, err)
	_, err = r.store.AddRunInstances(ctx, "run-"+owner, inst.ID)
	must(r.t, err)
	inst, err = r.deps.MintJIT(ctx, inst, 1, "ghr-run-"+owner, 1)
	must(r.t, err)
	return inst
}
