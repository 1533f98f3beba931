package state

import (
	"fmt"
	"testing"
	"time"
)

func TestARecordKeyIsTheAWSUserIDOfTheInstancesSession(t *testing.T) {
	// For an instance-profile session IAM's aws:userid is
	// <role id>:<instance id>: the instance role's policy compares
	// dynamodb:LeadingKeys with it.
	if got := InstanceKey("AROAEXAMPLEROLEID0001", "i-0abc"); got != "AROAEXAMPLEROLEID0001:i-0abc" {
		t.Fatalf("key %s", got)
	}
	if got := InstanceKey("", "i-0abc"); got != "i-0abc" {
		t.Fatalf("key without a role %s, want the bare id of records made before keys carried the role", got)
	}
	p := PoolConfig{Name: testPool, InstanceRoleID: testRole}
	if got := p.RecordKey("i-0abc"); got != InstanceKey(testRole, "i-0abc") {
		t.Fatalf("pool record key %s", got)
	}
}

func TestRecordsAreFoundByInstanceIDUnderEitherKey(t *testing.T) {
	s, _ := newStore(t)
	keyed := created(t, s, "i-keyed", "r1")
	legacy, err := s.Create(ctx, NewInstance{ID: "i-legacy", Pool: testPool, Owner: testOwner, RunID: "r2", Assignment: NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute})
	must(t, err)
	if legacy.Key != "i-legacy" || keyed.Key != InstanceKey(testRole, "i-keyed") {
		t.Fatalf("keys %s and %s", legacy.Key, keyed.Key)
	}
	// The same instance with a terminated record under one key and a live
	// one under the other: the live one is the instance's.
	dead, err := s.Create(ctx, NewInstance{ID: "i-keyed", Pool: testPool, Owner: testOwner, RunID: "r0", Assignment: NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute})
	must(t, err)
	_, err = s.Terminate(ctx, dead.Key, Termination{Assignment: dead.Assignment})
	must(t, err)

	got, err := s.ByInstanceID(ctx, []string{"i-keyed", "i-legacy", "i-none"}, func(string) []string { return []string{testRole} })
	must(t, err)
	if len(got) != 2 || got["i-keyed"].Key != keyed.Key || got["i-keyed"].State != Created || got["i-legacy"].Key != legacy.Key {
		t.Fatalf("by instance id: %+v", got)
	}
	// Without the role, a role-keyed record is not found: callers must
	// name the pool's role (refresh would otherwise take the instance for
	// one without a record).
	if got, _ := s.ByInstanceID(ctx, []string{"i-keyed"}, func(string) []string { return nil }); got["i-keyed"].State != Terminated {
		t.Fatalf("without the role: %+v", got["i-keyed"])
	}

	must(t, s.PutPoolConfig(ctx, PoolConfig{Name: testPool, Owner: testOwner, QueueURL: "https://sqs/q", LaunchTemplateID: "lt-1", LaunchTemplateVersion: "1",
		InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand", MaxInstances: 5, OS: "linux", InstanceRoleID: testRole}))
	for id, want := range map[string]Key{"i-keyed": keyed.Key, "i-legacy": legacy.Key} {
		rec, err := s.FindInstance(ctx, id)
		if err != nil || rec.Key != want {
			t.Errorf("find %s: %+v, %v; want the record keyed %s", id, rec, err, want)
		}
	}
	if _, err := s.FindInstance(ctx, "i-none"); !IsNotFound(err) {
		t.Errorf("find an unknown instance: %v, want not found", err)
	}
}

// Once every record carries its role, the look-up under the bare id costs
// nothing: 150 role-keyed records are read with 2 batch reads, not 4.
func TestRecordsKeyedByRoleAreFoundWithoutASecondRead(t *testing.T) {
	s, _ := newStore(t)
	var ids []string
	for i := range 150 {
		id := fmt.Sprintf("i-role%03d", i)
		created(t, s, id, "r")
		ids = append(ids, id)
	}
	before := env.Calls("DynamoDB_20120810.BatchGetItem")
	got, err := s.ByInstanceID(ctx, ids, func(string) []string { return []string{testRole} })
	must(t, err)
	if calls := env.Calls("DynamoDB_20120810.BatchGetItem") - before; len(got) != 150 || calls != 2 {
		t.Fatalf("%d records with %d batch reads, want 150 with 2", len(got), calls)
	}
}
