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
			Payload: []byte(`{"runId":"77100","pool":"linux","instanceCount":2}`)})
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
		rec, err := store.Get(ctx, id)
		if err != nil || rec.RunID != "" || rec.Threshold > time.Now().Unix() {
			t.Errorf("%s retired by the drain: %+v, %v", id, rec, err)
		}
	}
	for _, id := range given {
		rec, err := store.Get(ctx, id)
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
