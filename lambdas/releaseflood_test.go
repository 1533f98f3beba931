package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// tokenUses counts the recorded uses of invoking tokens (jti#… items).
func (d *deployment) tokenUses() int {
	d.t.Helper()
	out, err := d.aws.DynamoDB().Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(d.name), ConsistentRead: aws.Bool(true)})
	must(d.t, err)
	n := 0
	for _, item := range out.Items {
		if pk, ok := item["pk"].(*ddbtypes.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "jti#") {
			n++
		}
	}
	return n
}

// Issue 36: releases are not counted by the fair-share limits, and need
// not be: a release holds nothing a provision waits for (no provision
// lease, no place in the capacity queue, no reservation; it only gives
// instances back), and it may release only runs of the invoking workflow
// run (C19). Another repository floods release with every kind of call it
// can make: runs of ours named with its own token (refused by the runId
// rule from the token alone, before any table read or write: nothing
// recorded, not even the token's use), a token whose run_id is our run's
// (a reused id: refused by the run's repository binding), and runs of its
// own that do not exist (nothing to release). None of it touches our run,
// its instance or its runner, writes any item but the token uses of the
// calls that got past the runId rule, or holds any of our repository's
// share: with max_provisions_per_repository = 1 our next provision is
// admitted and served at once. (With the runId rule off — tried once — the
// calls naming our run with the flood's own token get past it and are
// refused only by the binding, each recording its token: "8 token uses
// recorded by calls refused by the runId rule, want none"; with the
// binding off too, the flood releases our run.)
func TestAnotherRepositoryFloodingReleaseHoldsNothingOfOtherRepositories(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) { p.MaxInstances, p.MaxProvisionsPerRepository = 2, 1 })
	var mine provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "8301", "pool": "linux"}, &mine)
	before := d.view("8301")
	rec, err := d.store.Get(ctx, d.key(mine.Instances[0].InstanceID))
	must(t, err)

	const n = 8
	rel := func(run string) map[string]any { return map[string]any{"runId": run} }
	uses := d.tokenUses()
	began := time.Now()
	for range n {
		d.refused(bundle.HandlerRelease, d.as(floodRepo, "9301", 1, rel("8301")), mine.Label, `runId: "8301" is not a run of the invoking workflow run`)
	}
	refusedByRule := time.Since(began)
	if got := d.tokenUses() - uses; got != 0 {
		t.Errorf("%d token uses recorded by calls refused by the runId rule, want none: they must be refused from the token alone", got)
	}
	for range n {
		d.refused(bundle.HandlerRelease, d.as(floodRepo, "8301", 1, rel("8301")), mine.Label, "idToken: repository_id", "is not the repository that provisioned run 8301")
	}
	for i := range n {
		var out releaseOut
		d.call(bundle.HandlerRelease, d.as(floodRepo, "9301", 1, rel("9301-"+strconv.Itoa(i))), &out)
		if len(out.Released)+len(out.Expired) != 0 || !strings.Contains(out.Note, "nothing to release") {
			t.Errorf("the flood's release of its own run 9301-%d that does not exist: %+v", i, out)
		}
	}
	t.Logf("%d releases refused by the runId rule in %s; %d calls in all in %s", n, refusedByRule, 3*n, time.Since(began))
	if got := d.tokenUses() - uses; got != 2*n {
		t.Errorf("%d token uses recorded, want %d: one per call past the runId rule, nothing else", got, 2*n)
	}
	d.unchanged(before, "8301")
	after, err := d.store.Get(ctx, rec.Key)
	must(t, err)
	if after.State != state.Running || after.Assignment != rec.Assignment || after.RunID != "8301" {
		t.Fatalf("our instance after the flood: %s, run %q, assignment %s; want running for 8301 under %s", after.State, after.RunID, after.Assignment, rec.Assignment)
	}
	if job := d.job(mine.Label, "echo still ours"); job.ExitCode != 0 {
		t.Fatalf("our run's job after the flood: %+v", job)
	}

	// Our repository's share is whole: its one provision in flight is
	// admitted and served from the pool's second place at once.
	var next provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "8302", "pool": "linux"}, &next)
	if len(next.Instances) != 1 {
		t.Fatalf("our next provision: %+v", next)
	}
	var out releaseOut
	d.call(bundle.HandlerRelease, rel("8301"), &out)
	if len(out.Released) != 1 {
		t.Fatalf("our own release of 8301: %+v", out)
	}
}
