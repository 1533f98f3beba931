package refresh_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
)

// Two spot instances EC2 took back after their notice, within the
// breaker's window, open the pool's spot breaker; an instance lost without
// a notice is no interruption and does not count.
func TestTwoSpotInterruptionsOpenThePoolsBreakerAndALostInstanceDoesNotCount(t *testing.T) {
	w := newWorld(t)
	w.pool.UsageClass, w.pool.OnDemandFallback = state.UsageClassSpot, true
	must(t, w.cp.PutPoolConfig(ctx, w.pool))
	first, agent := w.running("run-a", 0)
	must(t, agent.PutSignal(ctx, first.Key, first.Assignment, state.SignalInterrupted, "terminate"))
	lost, _ := w.running("run-b", 0)
	_, err := w.fleet.Terminate(ctx, []string{first.ID, lost.ID})
	must(t, err)
	out, err := w.refresh()
	must(t, err)
	if b := out.SpotBreakers["linux"]; b.Open || b.Recent != 1 {
		t.Fatalf("breaker after one interruption and one lost instance = %+v, want closed with 1", b)
	}
	second, agent := w.running("run-c", 0)
	must(t, agent.PutSignal(ctx, second.Key, second.Assignment, state.SignalInterrupted, "terminate"))
	_, err = w.fleet.Terminate(ctx, []string{second.ID})
	must(t, err)
	out, err = w.refresh()
	must(t, err)
	if b := out.SpotBreakers["linux"]; !b.Open || b.Recent != 2 || b.OpenUntil != w.now.Add(state.SpotBreakerCooldown).Unix() {
		t.Fatalf("breaker after two interruptions = %+v, want open for %s", b, state.SpotBreakerCooldown)
	}
	stored, err := w.cp.GetSpotBreaker(ctx, "linux")
	must(t, err)
	if !stored.Open(w.now) {
		t.Fatalf("stored breaker %+v is not open", stored)
	}
}

// Release ends the lease of an instance whose agent said a spot notice at
// once: refresh, ending that record before EC2 took the instance, still
// counts the interruption.
func TestAnInterruptedInstanceWhoseLeaseReleaseEndedCountsAsInterrupted(t *testing.T) {
	w := newWorld(t)
	w.pool.UsageClass, w.pool.OnDemandFallback = state.UsageClassSpot, true
	must(t, w.cp.PutPoolConfig(ctx, w.pool))
	inst, agent := w.running("run-a", 0)
	must(t, agent.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalInterrupted, "terminate"))
	idle, err := w.cp.Release(ctx, inst.Ref(), "run-a", 5*time.Minute, nil)
	must(t, err)
	_, err = w.cp.Expire(ctx, idle.Ref(), "spot interruption notice") // as controlplane.Repool does
	must(t, err)
	out, err := w.refresh()
	must(t, err)
	if len(out.Terminated) != 1 || out.Terminated[0].Kind != refresh.KindInterrupted || out.SpotBreakers["linux"].Recent != 1 {
		t.Fatalf("terminated %+v, breaker %+v; want the instance ended as interrupted and counted", out.Terminated, out.SpotBreakers["linux"])
	}
}

// Found by make chaos's spot interruptions (invariant 18): the agent of a
// spot instance said the notice, its heartbeat fell silent as EC2 took it
// (refresh expired it), and GitHub still showed its runner busy with the
// job it lost when refresh ended the record (a lost runner stays busy
// until GitHub notices: how long is not documented), so deleting the
// runner failed 422. The interruption still counts, and the record is
// ended as interrupted: the failed deletion is retried on its own, but a
// terminated record is never looked at again. (Counted only after the
// deletions, refresh failed with the 422 and the breaker never heard of
// the instance: "breaker {Recent:0 …}".)
func TestAnInterruptedInstanceWhoseRunnerGitHubStillShowsBusyCountsAsInterrupted(t *testing.T) {
	w := newWorld(t)
	w.pool.UsageClass, w.pool.OnDemandFallback = state.UsageClassSpot, true
	must(t, w.cp.PutPoolConfig(ctx, w.pool))
	inst, agent := w.running("run-a", 0)
	runner := w.fake.AddRunner("acme", state.JITRunnerName(1, 1, inst.ID), true, "run-a")
	must(t, agent.SetRunner(ctx, inst.Key, inst.Assignment, runner, state.JITRunnerName(1, 1, inst.ID)))
	must(t, agent.PutSignal(ctx, inst.Key, inst.Assignment, state.SignalInterrupted, "terminate"))
	rec, err := w.cp.Get(ctx, inst.Key)
	must(t, err)
	_, err = w.cp.Expire(ctx, rec.Ref(), "heartbeat silent for over 10s") // as refresh's silent does
	must(t, err)
	out, err := w.refresh()
	if err == nil {
		t.Logf("refresh: no error (the runner's deletion answered)")
	}
	if len(out.Terminated) != 1 || out.Terminated[0].Kind != refresh.KindInterrupted || out.SpotBreakers["linux"].Recent != 1 {
		t.Fatalf("terminated %+v, breaker %+v (refresh: %v); want the instance ended as interrupted and counted", out.Terminated, out.SpotBreakers["linux"], err)
	}
}

// A spot instance EC2 took back whose agent never said the notice (killed,
// asleep through the two minutes, or silenced by root on the instance) is
// still an interruption: EC2's state reason says so, and refresh reads it
// for the records whose instance is gone. The breaker counts it; an
// instance terminated for another reason does not count. (Reading only the
// agent's UD_INTERRUPTED, refresh closed it as lost and the breaker never
// heard of it.)
func TestASpotInstanceEC2TookBackWithoutItsAgentsWordCountsAsInterrupted(t *testing.T) {
	w := newWorld(t)
	w.pool.UsageClass, w.pool.OnDemandFallback = state.UsageClassSpot, true
	must(t, w.cp.PutPoolConfig(ctx, w.pool))
	silent, _ := w.running("run-a", 0)
	lost, _ := w.running("run-b", 0)
	_, err := w.fleet.Terminate(ctx, []string{silent.ID, lost.ID})
	must(t, err)
	ec2 := reclaimingEC2{EC2API: w.ec2, ids: map[string]bool{silent.ID: true}}
	out, err := refresh.Handle(ctx, refresh.Deps{Deps: w.deps, EC2: refresh.FleetEC2{Fleet: fleet.New(ec2, w.name)}}, nil)
	must(t, err)
	got := map[string]refresh.Decision{}
	for _, d := range out.Terminated {
		got[d.InstanceID] = d
	}
	if d := got[silent.ID]; d.Kind != refresh.KindInterrupted || d.Reason != refresh.ReasonGoneReclaimed {
		t.Errorf("the instance EC2 took back: %+v, want kind %q reason %q", d, refresh.KindInterrupted, refresh.ReasonGoneReclaimed)
	}
	if d := got[lost.ID]; d.Kind != refresh.KindGone {
		t.Errorf("the instance terminated by a user: %+v, want kind %q", d, refresh.KindGone)
	}
	if b := out.SpotBreakers["linux"]; b.Recent != 1 {
		t.Fatalf("breaker %+v, want the one interruption counted", b)
	}
}

// reclaimingEC2 describes the instances in ids, once terminated, as EC2
// describes a spot instance it took back: state reason
// Server.SpotInstanceTermination (EC2 API Reference, StateReason). moto
// gives every termination the user-initiated reason.
type reclaimingEC2 struct {
	fleet.EC2API
	ids map[string]bool
}

func (e reclaimingEC2) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	out, err := e.EC2API.DescribeInstances(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	for _, r := range out.Reservations {
		for i, inst := range r.Instances {
			if e.ids[aws.ToString(inst.InstanceId)] && inst.State != nil && inst.State.Name == ec2types.InstanceStateNameTerminated {
				r.Instances[i].StateReason = &ec2types.StateReason{Code: aws.String(fleet.ReasonSpotTermination), Message: aws.String("Server.SpotInstanceTermination: Spot instance termination")}
			}
		}
	}
	return out, nil
}
