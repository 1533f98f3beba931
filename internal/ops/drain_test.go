package ops_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/ops"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

func TestDrainRetiresTheIdleInstancesAndLetsRunsFinish(t *testing.T) {
	s := Seed(t)
	busy, err := s.FindInstance(ctx, "i-busy")
	must(t, err)
	v, err := ops.Drain(ctx, s, "linux", true)
	must(t, err)
	if strings.Join(v.Retired, ",") != "i-idle-1,i-idle-2" || strings.Join(v.RunsInFlight, ",") != "run-7" || len(v.Left) != 0 {
		t.Fatalf("drain: %+v", v)
	}
	for _, id := range v.Retired {
		rec, err := s.FindInstance(ctx, id)
		must(t, err)
		if rec.Threshold > time.Now().Unix() || rec.TerminatedReason != "retired: pool draining" {
			t.Errorf("%s after the drain: lease %d, reason %q", id, rec.Threshold, rec.TerminatedReason)
		}
	}
	after, err := s.FindInstance(ctx, "i-busy")
	must(t, err)
	if after.Version != busy.Version || after.State != state.Running {
		t.Fatalf("the drain touched the instance of a run in flight: %+v", after)
	}
	p, err := s.GetPoolConfig(ctx, "linux")
	must(t, err)
	if !p.Draining || p.Owner != "acme" || len(p.IdleWindows) != 1 {
		t.Fatalf("pool config after the drain: %+v", p)
	}
	status, err := ops.Status(ctx, s, time.Now())
	must(t, err)
	if !status[0].Draining || status[1].Draining {
		t.Fatalf("status does not show the drain: %+v", status)
	}
	v, err = ops.Drain(ctx, s, "linux", false)
	must(t, err)
	if p, _ := s.GetPoolConfig(ctx, "linux"); v.Draining || p.Draining {
		t.Fatalf("drain --off: %+v, config %+v", v, p)
	}
}

// claimOne is the table with a provision claiming one instance between
// the drain's read and its write.
type claimOne struct {
	*state.Store
	t  *testing.T
	id string
}

func (c claimOne) Expire(ctx context.Context, r state.Ref, reason string) (*state.Instance, error) {
	if r.ID == c.id {
		_, err := c.Claim(ctx, r.Key, state.ClaimRequest{RunID: "run-8", Pool: "linux", Owner: "acme", ClaimTTL: time.Minute})
		must(c.t, err)
	}
	return c.Store.Expire(ctx, r, reason)
}

func TestDrainLeavesAnInstanceAConcurrentProvisionClaimedAndSaysSo(t *testing.T) {
	s := Seed(t)
	v, err := ops.Drain(ctx, claimOne{s, t, "i-idle-2"}, "linux", true)
	must(t, err)
	if strings.Join(v.Retired, ",") != "i-idle-1" || !strings.Contains(v.Left["i-idle-2"], "claimed by a run") {
		t.Fatalf("drain racing a claim: %+v", v)
	}
	rec, err := s.FindInstance(ctx, "i-idle-2")
	must(t, err)
	if rec.State != state.Claimed || rec.RunID != "run-8" || rec.TerminatedReason != "" || rec.Threshold <= time.Now().Unix() {
		t.Fatalf("the claim must stand untouched: %+v", rec)
	}
}

func TestDrainOfAPoolThatIsNotThereChangesNothing(t *testing.T) {
	s := Seed(t)
	_, err := ops.Drain(ctx, s, "gpu", true)
	if !ops.IsBadInput(err) || !strings.Contains(err.Error(), `no pool "gpu" in this table (pools: linux, win)`) {
		t.Fatalf("drain of an unknown pool: %v", err)
	}
	if _, err := s.GetPoolConfig(ctx, "gpu"); !state.IsNotFound(err) {
		t.Fatalf("the refused drain made a pool item: %v", err)
	}
	pools, err := s.ListPoolConfigs(ctx)
	must(t, err)
	if len(pools) != 2 || pools[0].Draining || pools[1].Draining {
		t.Fatalf("pools after the refused drain: %+v", pools)
	}
}
