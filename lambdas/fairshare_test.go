package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/lambdart"
)

// Fair share between repositories (issue 36 item 4; state/fairshare.go):
// another repository allowed to invoke floods provision, and the pool's
// per-repository limits keep its share bounded while the workflows of the
// repository the tests play still get theirs. The repository is the one of
// the invoking job's verified token.

const floodRepo = "acme/flood"

// background invokes provision with payload in the background; the
// result arrives on the returned channel.
func (d *deployment) background(payload map[string]any) <-chan lambdart.Result {
	out := make(chan lambdart.Result, 1)
	go func() {
		raw, _ := json.Marshal(payload)
		res, err := d.fns[bundle.HandlerProvision].Invoke(ctx, raw)
		if err != nil {
			res = lambdart.Result{FunctionError: "invoke", Payload: []byte(err.Error())}
		}
		out <- res
	}()
	return out
}

// waitQueued waits until n provisions wait in the pool's capacity queue.
func (d *deployment) waitQueued(n int) {
	d.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ahead, err := d.store.Ahead(ctx, d.pool.Name, "a-newcomer", time.Now())
		must(d.t, err)
		if ahead == n {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%d provisions wait in the capacity queue, want %d", ahead, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A repository may hold max_provisions_per_repository provisions in flight:
// its next one is refused at once, naming the limit and writing nothing,
// and the provision of another repository is still admitted (it waits its
// turn for the pool). (With the control disabled — provision not taking its
// lease — run 7004 waits like the others and, 18 s later, fails with "pool
// linux: 2 earlier provisions wait for its capacity": the test reports the
// refusal not naming max_provisions_per_repository, taking 18 s and
// writing its run.)
func TestAnotherRepositoryFloodingProvisionIsRefusedAtItsLimitWhileOthersAreAdmitted(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) { p.MaxInstances, p.MaxProvisionsPerRepository = 1, 2 })
	flood := func(run string, timeout int) map[string]any {
		return d.as(floodRepo, run, 1, map[string]any{"runId": run, "pool": "linux", "timeoutSeconds": timeout})
	}
	var first provisionOut
	d.call(bundle.HandlerProvision, flood("7001", 120), &first) // holds the pool's one instance
	// Two more wait for the pool: the flood's two provisions in flight.
	waiting := []<-chan lambdart.Result{d.background(flood("7002", 50)), d.background(flood("7003", 50))}
	d.waitQueued(2)

	began := time.Now()
	res := d.invoke(bundle.HandlerProvision, flood("7004", 50))
	if res.FunctionError == "" {
		t.Fatalf("the flood's third provision in flight was not refused: %s", res.Payload)
	}
	msg := string(res.Payload)
	for _, want := range []string{"maxProvisionsPerRepository", "max_provisions_per_repository (2)", floodRepo} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %s, want it to name %q", msg, want)
		}
	}
	if took := time.Since(began); took > 15*time.Second {
		t.Errorf("the refusal took %s: it must come before any slow work", took)
	}
	if _, err := d.store.GetRun(ctx, "7004"); !state.IsNotFound(err) {
		t.Errorf("the refused provision wrote its run: %v", err)
	}

	// Our repository's workflow is admitted: it takes its own lease and
	// joins the queue.
	ours := d.background(d.signed(ownRepo, map[string]any{"runId": "8001", "pool": "linux", "timeoutSeconds": 50}))
	d.waitQueued(3)
	for _, c := range append(waiting, ours) {
		r := <-c // each waits until a boot no longer fits, then fails on the pool's cap
		if strings.Contains(string(r.Payload), "PerRepository") {
			t.Errorf("a provision within its repository's share was refused: %s", r.Payload)
		}
	}
}

// A repository holds at most max_queued_per_repository places in a pool's
// capacity queue: the flood's second waiter fails at once naming the limit,
// so our repository's run is second in line, not third, and is served
// right after the flood's one waiter. (With the control disabled — Queue
// given no limit — run 7103 waits in the queue behind 7102 and ahead of
// ours: "the flood's second waiter was not refused (after 58s): pool linux:
// 1 earlier provisions wait for its capacity".)
func TestAnotherRepositoryHoldsNoMoreOfThePoolsQueueThanItsShare(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) { p.MaxInstances, p.MaxQueuedPerRepository = 1, 1 })
	flood := func(run string, timeout int) map[string]any {
		return d.as(floodRepo, run, 1, map[string]any{"runId": run, "pool": "linux", "timeoutSeconds": timeout})
	}
	var first provisionOut
	d.call(bundle.HandlerProvision, flood("7101", 120), &first)
	second := d.background(flood("7102", 300))
	d.waitQueued(1)

	began := time.Now()
	res := d.invoke(bundle.HandlerProvision, flood("7103", 90))
	if res.FunctionError == "" || time.Since(began) > 30*time.Second {
		t.Fatalf("the flood's second waiter was not refused (after %s): %s", time.Since(began), res.Payload)
	}
	if msg := string(res.Payload); !strings.Contains(msg, "maxQueuedPerRepository") || !strings.Contains(msg, "max_queued_per_repository (1)") {
		t.Errorf("refusal %s, want it to name max_queued_per_repository", msg)
	}

	ours := d.background(d.signed(ownRepo, map[string]any{"runId": "8101", "pool": "linux", "timeoutSeconds": 300}))
	d.waitQueued(2)
	var rel releaseOut
	d.call(bundle.HandlerRelease, d.as(floodRepo, "7101", 1, map[string]any{"runId": "7101"}), &rel)
	if r := <-second; r.FunctionError != "" {
		t.Fatalf("the flood's waiter: %s", r.Payload)
	}
	d.call(bundle.HandlerRelease, d.as(floodRepo, "7102", 1, map[string]any{"runId": "7102"}), &rel)
	select {
	case r := <-ours:
		if r.FunctionError != "" || !strings.Contains(string(r.Payload), `"status":"ready"`) {
			t.Fatalf("our run: %s", r.Payload)
		}
	case <-time.After(90 * time.Second):
		t.Fatal("our run was not served after the flood's one waiter")
	}
}
