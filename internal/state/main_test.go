package state

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newStore creates a fresh table in moto and a store on it with a test clock.
func newStore(t testing.TB) (*Store, *clock) {
	t.Helper()
	db := env.Config(t).DynamoDB()
	name := awstest.Name(t, "state")
	if err := CreateTable(context.Background(), db, name, TableOptions{}); err != nil {
		t.Fatal(err)
	}
	s := New(db, name)
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	s.Now = c.Now
	return s, c
}

var ctx = context.Background()

const (
	testPool  = "linux-large"
	testOwner = "acme"
	// testRole is the pool's instance role id: records are keyed
	// <role id>:<instance id>, so a test passing an instance id where a
	// key belongs finds no record.
	testRole = "AROATESTPOOLROLE0001"
)

// created puts a created record for run and returns it.
func created(t testing.TB, s *Store, id, run string) *Instance {
	t.Helper()
	inst, err := s.Create(ctx, NewInstance{ID: id, RoleID: testRole, Pool: testPool, Owner: testOwner, RunID: run, Assignment: NewAssignment(),
		InstanceType: "c7i.large", UsageClass: "on-demand", LaunchTemplateVersion: "3", TTL: 10 * time.Minute})
	if err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	return inst
}

// running walks a new record to running for run.
func running(t testing.TB, s *Store, id, run string) *Instance {
	t.Helper()
	inst := created(t, s, id, run)
	must(t, s.PutSignal(ctx, inst.Key, inst.Assignment, SignalRegOK, ""))
	out, err := s.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	if err != nil {
		t.Fatalf("mark running %s: %v", id, err)
	}
	return out
}

// pooled walks a new record to a clean idle instance.
func pooled(t testing.TB, s *Store, id string) *Instance {
	t.Helper()
	inst := running(t, s, id, "seed-"+id)
	idle, err := s.Release(ctx, inst.Ref(), inst.RunID, 15*time.Minute, nil)
	if err != nil {
		t.Fatalf("release %s: %v", id, err)
	}
	must(t, s.PutSignal(ctx, idle.Key, idle.Assignment, SignalRemoveRegOK, ""))
	out, err := s.MarkPooled(ctx, idle.Ref())
	if err != nil {
		t.Fatalf("mark pooled %s: %v", id, err)
	}
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantClause(t testing.TB, err error, want Clause) {
	t.Helper()
	if got := ClauseOf(err); got != want {
		t.Fatalf("error = %v (clause %q), want clause %q", err, got, want)
	}
}

func claimReq(run string) ClaimRequest {
	return ClaimRequest{RunID: run, Pool: testPool, Owner: testOwner, LaunchTemplateVersion: "3", MaxUses: 50, MaxAge: 24 * time.Hour, ClaimTTL: 5 * time.Minute}
}
