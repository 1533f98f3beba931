package sandbox_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// drainBesideAProvision runs `ghrunner drain linux` (the real binary)
// while a provision of a new run starts, with runId's instances released
// into the pool first. Either may come first; neither may act on an
// instance the other took: an instance the drain retired is given to no
// run, an instance given to the run is not retired, and a provision that
// came second is refused naming the drain. Then drain --off.
func drainBesideAProvision(t *testing.T, sb *sandbox.Sandbox, d sandbox.Deployment, fn *lambda.Client, runID string) {
	ctx := context.Background()
	var rel struct{ Released []string }
	invoke(t, fn, d.Functions[bundle.HandlerRelease], `{"runId":"`+runID+`"}`, &rel)
	if len(rel.Released) < 2 {
		t.Fatalf("release %s: %+v, want its instances pooled", runID, rel)
	}
	type provisioned struct {
		out    provision.Output
		failed string
	}
	done := make(chan provisioned, 1)
	go func() {
		res, err := fn.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(d.Functions[bundle.HandlerProvision]),
			Payload: signed(t, fn, `{"runId":"77100","pool":"linux","instanceCount":2}`)})
		var p provisioned
		switch {
		case err != nil:
			p.failed = err.Error()
		case res.FunctionError != nil:
			p.failed = string(res.Payload)
		default:
			err = json.Unmarshal(res.Payload, &p.out)
		}
		done <- p
	}()
	var drained ops.DrainView
	operator(t, sb, d, &drained, "drain", "linux", "--json")
	p := <-done

	var given []string
	for _, in := range p.out.Instances {
		given = append(given, in.InstanceID)
	}
	t.Logf("drain retired %v, left %v; provision: %v %q", drained.Retired, drained.Left, given, p.failed)
	if p.failed != "" && !strings.Contains(p.failed, "draining") {
		t.Errorf("provision beside the drain failed for another reason: %s", p.failed)
	}
	if p.failed == "" && p.out.Status != "ready" {
		t.Errorf("provision beside the drain: %+v", p.out)
	}
	store := state.New(sb.AWS.DynamoDB(), d.Table)
	for _, id := range drained.Retired {
		if slices.Contains(given, id) {
			t.Errorf("%s was both retired by the drain and given to run 77100", id)
		}
		rec, err := store.FindInstance(ctx, id)
		if err != nil || rec.RunID != "" || rec.Threshold > time.Now().Unix() {
			t.Errorf("%s retired by the drain: %+v, %v", id, rec, err)
		}
	}
	for _, id := range given {
		rec, err := store.FindInstance(ctx, id)
		if err != nil || rec.RunID != "77100" || rec.State != state.Running || rec.TerminatedReason != "" {
			t.Errorf("%s given to run 77100 after the drain: %+v, %v", id, rec, err)
		}
	}
	if len(drained.Retired)+len(given) == 0 {
		t.Errorf("neither the drain nor the provision took any of the %d pooled instances", len(rel.Released))
	}
	var status ops.StatusView
	operator(t, sb, d, &status, "status", "--json")
	if !status.Pools[0].Draining || status.Pools[1].Draining {
		t.Errorf("status while linux drains: %+v", status.Pools)
	}
	var off ops.DrainView
	operator(t, sb, d, &off, "drain", "linux", "--off", "--json")
	operator(t, sb, d, &status, "status", "--json")
	if off.Draining || status.Pools[0].Draining {
		t.Errorf("after drain --off: %+v, status %+v", off, status.Pools)
	}
}

// retireBesideAProvision runs `ghrunner retire` (the real binary) on the
// pool's one idle instance while a provision of a new run claims from the
// pool. Either may win; never both: a retired instance is given to no run,
// and a retire that lost is refused with a message saying the instance is
// another's now, having changed nothing.
func retireBesideAProvision(t *testing.T, sb *sandbox.Sandbox, d sandbox.Deployment, fn *lambda.Client) {
	ctx := context.Background()
	var seed provision.Output
	invoke(t, fn, d.Functions[bundle.HandlerProvision], `{"runId":"77300","pool":"linux","instanceCount":1}`, &seed)
	var rel struct{ Released []string }
	invoke(t, fn, d.Functions[bundle.HandlerRelease], `{"runId":"77300"}`, &rel)
	if seed.Status != "ready" || len(rel.Released) != 1 {
		t.Fatalf("seeding an idle instance: provision %+v, release %+v", seed, rel)
	}
	target := rel.Released[0]

	done := make(chan provision.Output, 1)
	go func() { // not invoke: t.Fatal belongs to the test's goroutine
		var out provision.Output
		res, err := fn.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(d.Functions[bundle.HandlerProvision]),
			Payload: signed(t, fn, `{"runId":"77301","pool":"linux","instanceCount":1}`)})
		if err == nil && res.FunctionError == nil {
			json.Unmarshal(res.Payload, &out)
		}
		done <- out
	}()
	stdout, stderr, err := ghrunnerRun(t, sb, d, "retire", target, "--reason", "beside a provision", "--json")
	given := <-done
	if given.Status != "ready" || len(given.Instances) != 1 {
		t.Fatalf("provision beside the retire: %+v", given)
	}
	took := given.Instances[0].InstanceID == target
	t.Logf("retire of %s: err %v, %s%s; provision took %s (%s)", target, err, stdout, stderr, given.Instances[0].InstanceID, given.Instances[0].Source)
	rec, rerr := state.New(sb.AWS.DynamoDB(), d.Table).FindInstance(ctx, target)
	if rerr != nil {
		t.Fatal(rerr)
	}
	switch {
	case err == nil && took:
		t.Errorf("%s both retired and given to run 77301", target)
	case err == nil && (rec.RunID != "" || rec.Threshold > time.Now().Unix()):
		t.Errorf("retire said it retired %s, but its record is %+v", target, rec)
	case err != nil && !took:
		t.Errorf("retire of an idle instance no run took failed: %v %s", err, stderr)
	case err != nil && (!strings.Contains(string(stderr), target) || !strings.Contains(string(stderr), "nothing changed")):
		t.Errorf("retire that lost to the provision says %q, want the instance and \"nothing changed\"", stderr)
	case err != nil && (rec.RunID != "77301" || rec.TerminatedReason != ""):
		t.Errorf("%s given to run 77301 after a refused retire: %+v", target, rec)
	}
	var end struct{ Released []string }
	invoke(t, fn, d.Functions[bundle.HandlerRelease], `{"runId":"77301"}`, &end)
}
