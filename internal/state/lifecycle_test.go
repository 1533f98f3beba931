package state

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// TestLifecycleWalkthrough follows the lifecycle of docs/design.md: create,
// running, release to idle, claim by a second run, running, terminated.
func TestLifecycleWalkthrough(t *testing.T) {
	s, clk := newStore(t)
	inst := created(t, s, "i-0001", "run-7890")
	if inst.State != Created || inst.RunID != "run-7890" || inst.Uses != 1 || inst.Threshold != clk.Now().Unix()+600 {
		t.Fatalf("created record = %+v", inst)
	}

	must(t, s.PutSignal(ctx, inst.Key, inst.Assignment, SignalOK, ""))
	must(t, s.PutSignal(ctx, inst.Key, inst.Assignment, SignalRegOK, ""))
	run1, err := s.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	must(t, err)
	if run1.State != Running || run1.PoolState != "linux-large#running" || run1.Version != inst.Version+3 {
		t.Fatalf("running record = %+v", run1)
	}

	clk.Add(10 * time.Minute)
	idle, err := s.Release(ctx, run1.Ref(), "run-7890", 15*time.Minute, &Registration{Purpose: PurposeRemove, Token: "t-remove"})
	must(t, err)
	if idle.State != Idle || idle.RunID != "" || idle.Assignment == run1.Assignment || idle.Registration.Assignment != idle.Assignment {
		t.Fatalf("released record = %+v", idle)
	}
	if idle.Clean() {
		t.Fatal("a just-released instance must not be clean before UD_REMOVE_REG_OK")
	}
	if _, err := s.Claim(ctx, idle.Key, claimReq("run-9999")); ClauseOf(err) != ClauseSignal {
		t.Fatalf("claim before deregistration: %v, want clause signal", err)
	}
	must(t, s.PutSignal(ctx, idle.Key, idle.Assignment, SignalRemoveRegOK, ""))
	pooledRec, err := s.MarkPooled(ctx, idle.Ref())
	must(t, err)
	if pooledRec.PooledAt == 0 {
		t.Fatal("pooledAt not set")
	}

	claimed, err := s.Claim(ctx, idle.Key, claimReq("run-9999"))
	must(t, err)
	if claimed.State != Claimed || claimed.RunID != "run-9999" || claimed.Uses != 2 || claimed.PooledAt != 0 || claimed.Assignment == idle.Assignment {
		t.Fatalf("claimed record = %+v", claimed)
	}
	// The UD_REG_OK of the first run answers an old assignment: not enough.
	if _, err := s.MarkRunning(ctx, claimed.Ref(), time.Hour, time.Hour); ClauseOf(err) != ClauseSignal {
		t.Fatalf("claimed→running on a stale UD_REG_OK: %v, want clause signal", err)
	}
	must(t, s.PutSignal(ctx, idle.Key, claimed.Assignment, SignalRegOK, ""))
	run2, err := s.MarkRunning(ctx, claimed.Ref(), time.Hour, time.Hour)
	must(t, err)
	if run2.State != Running {
		t.Fatalf("state = %s", run2.State)
	}

	term, err := s.Terminate(ctx, run2.Key, Termination{Assignment: run2.Assignment, Reason: "test"})
	must(t, err)
	if term.State != Terminated || term.RunID != "" || term.PoolState != "" || term.Threshold != 0 || term.ExpiresAt != clk.Now().Unix()+7*86400 {
		t.Fatalf("terminated record = %+v", term)
	}
	// Index keys are removed, not blanked: the record leaves both indexes.
	byRun, err := s.ByRun(ctx, "run-9999")
	must(t, err)
	if len(byRun) != 0 {
		t.Fatalf("terminated instance still in by-run: %+v", byRun)
	}
}

func TestTableDefinition(t *testing.T) {
	s, _ := newStore(t)
	db := env.Config(t).DynamoDB()
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.Table())})
	must(t, err)
	indexes := map[string]bool{}
	for _, g := range out.Table.GlobalSecondaryIndexes {
		indexes[aws.ToString(g.IndexName)] = true
	}
	if !indexes[IndexByRun] || !indexes[IndexPoolState] || len(indexes) != 2 {
		t.Fatalf("indexes = %v", indexes)
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.Table())})
	must(t, err)
	if aws.ToString(ttl.TimeToLiveDescription.AttributeName) != AttrExpiresAt || ttl.TimeToLiveDescription.TimeToLiveStatus != "ENABLED" {
		t.Fatalf("ttl = %+v", ttl.TimeToLiveDescription)
	}
}
