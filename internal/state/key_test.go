package state

import (
	"fmt"
	"strings"
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
	p := PoolConfig{Name: testPool, InstanceRoleID: testRole}
	if got := p.RecordKey("i-0abc"); got != InstanceKey(testRole, "i-0abc") {
		t.Fatalf("pool record key %s", got)
	}
}

// A record keyed by the bare instance id could be read and written by no
// instance (its role's policy allows only <role id>:<instance id>): a
// create without the pool's role is refused and writes nothing.
func TestARecordWithoutItsPoolsRoleIsRefused(t *testing.T) {
	s, _ := newStore(t)
	_, err := s.Create(ctx, NewInstance{ID: "i-norole", Pool: testPool, Owner: testOwner, RunID: "r1", Assignment: NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", TTL: 10 * time.Minute})
	if err == nil || !strings.Contains(err.Error(), "roleId") {
		t.Fatalf("create without a role: %v, want refused naming roleId", err)
	}
	if got, err := s.GetMany(ctx, []Key{"i-norole", InstanceKey(testRole, "i-norole")}); err != nil || len(got) != 0 {
		t.Fatalf("after the refused create: %v, %v; want no record", got, err)
	}
}

func TestRecordsAreFoundByInstanceIDUnderTheirPoolsRole(t *testing.T) {
	s, _ := newStore(t)
	keyed := created(t, s, "i-keyed", "r1")
	got, err := s.ByInstanceID(ctx, []string{"i-keyed", "i-none"}, func(string) []string { return []string{testRole} })
	must(t, err)
	if len(got) != 1 || got["i-keyed"].Key != keyed.Key || got["i-keyed"].State != Created {
		t.Fatalf("by instance id: %+v", got)
	}
	// Without the role, nothing is found: callers must name the pool's
	// role (refresh would otherwise take the instance for one without a
	// record).
	if got, _ := s.ByInstanceID(ctx, []string{"i-keyed"}, func(string) []string { return nil }); len(got) != 0 {
		t.Fatalf("without the role: %+v", got)
	}

	must(t, s.PutPoolConfig(ctx, PoolConfig{Name: testPool, Owner: testOwner, QueueURL: "https://sqs/q", LaunchTemplateID: "lt-1", LaunchTemplateVersion: "1",
		InstanceTypes: []string{"c7i.large"}, SubnetIDs: []string{"subnet-1"}, UsageClass: "on-demand", MaxInstances: 5, InstanceRoleID: testRole}))
	if rec, err := s.FindInstance(ctx, "i-keyed"); err != nil || rec.Key != keyed.Key {
		t.Errorf("find i-keyed: %+v, %v; want the record keyed %s", rec, err, keyed.Key)
	}
	if _, err := s.FindInstance(ctx, "i-none"); !IsNotFound(err) {
		t.Errorf("find an unknown instance: %v, want not found", err)
	}
}

// ByInstanceID reads in BatchGetItem's pages of 100 keys, one read per
// page: 150 records take 2.
func TestRecordsAreReadByInstanceIDInBatchesOfAHundred(t *testing.T) {
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
