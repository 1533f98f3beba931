package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// countingDB counts the reads a Watcher makes and can refuse batch reads,
// as a throttled hot key leaves them unprocessed.
type countingDB struct {
	DynamoDBAPI
	gets, batches atomic.Int64
	refuseBatch   bool
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.gets.Add(1)
	return c.DynamoDBAPI.GetItem(ctx, in, o...)
}

func (c *countingDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.batches.Add(1)
	if c.refuseBatch {
		return nil, errors.New("ProvisionedThroughputExceededException: throttled")
	}
	return c.DynamoDBAPI.BatchGetItem(ctx, in, o...)
}

// waitAll waits on each record through one watcher and signals them all
// after a while; one record is terminated meanwhile.
func waitAll(t *testing.T, refuseBatch bool) (*countingDB, time.Duration) {
	s, _ := newStore(t)
	db := &countingDB{DynamoDBAPI: s.db, refuseBatch: refuseBatch}
	counted := New(db, s.table)
	var recs []*Instance
	for i := range 5 {
		recs = append(recs, created(t, s, fmt.Sprintf("i-watch-%d", i), "run-w"))
	}
	w := NewWatcher(counted, 100*time.Millisecond)
	errs := make([]error, len(recs))
	start := time.Now()
	var wg sync.WaitGroup
	for i, r := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, errs[i] = w.WaitSignal(wctx, r.Key, r.Assignment, SignalRegOK, SignalRegFailed)
		}()
	}
	time.Sleep(400 * time.Millisecond)
	_, err := s.Terminate(ctx, recs[0].Key, Termination{Assignment: recs[0].Assignment, Reason: "test"})
	must(t, err)
	for _, r := range recs[1:] {
		must(t, s.PutSignal(ctx, r.Key, r.Assignment, SignalRegOK, ""))
	}
	wg.Wait()
	took := time.Since(start)
	wantClause(t, errs[0], ClauseState)
	for i, err := range errs[1:] {
		if err != nil {
			t.Errorf("wait %d: %v", i+1, err)
		}
	}
	return db, took
}

func TestAWatcherReadsEveryWaitedRecordWithOneBatchPerInterval(t *testing.T) {
	db, took := waitAll(t, false)
	intervals := int64(took/(100*time.Millisecond)) + 2
	if b := db.batches.Load(); b == 0 || b > intervals || db.gets.Load() != 0 {
		t.Fatalf("5 waits over %v: %d batch reads (at most %d: one per interval) and %d single reads (want none)", took, b, intervals, db.gets.Load())
	}
}

func TestAWatcherReadsEachRecordAloneWhenABatchReadFails(t *testing.T) {
	db, _ := waitAll(t, true)
	if db.gets.Load() < 5 {
		t.Fatalf("%d single reads after failed batch reads: the waits must not depend on the batch", db.gets.Load())
	}
}
