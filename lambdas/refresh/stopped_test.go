package refresh_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// stopInEC2 stops the instance in moto, as scale-down or an outsider would.
func (w *world) stopInEC2(id string) {
	w.t.Helper()
	_, err := w.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}})
	must(w.t, err)
}

func (w *world) record(inst *state.Instance) *state.Instance {
	w.t.Helper()
	got, err := w.cp.Get(ctx, inst.Key)
	must(w.t, err)
	return got
}

func TestAStoppedInstanceIsKeptWithoutAHeartbeatUntilItsKeepTimeThenTerminated(t *testing.T) {
	w := newWorld(t)
	idle := w.idle()
	stopped, err := w.cp.Stop(ctx, idle.Ref(), time.Hour)
	must(t, err)
	w.stopInEC2(stopped.ID)
	if _, err := w.refresh(); err != nil { // notes its last heartbeat
		t.Fatal(err)
	}
	w.now = w.now.Add(30 * time.Minute) // its heartbeat long silent
	if _, err := w.refresh(); err != nil {
		t.Fatal(err)
	}
	if got := w.record(stopped); got.State != state.Stopped || got.Expired(w.now) || !w.alive(stopped.ID) {
		t.Fatalf("within its keep time the stopped instance is %s (expired %v, in EC2 %v), want kept", got.State, got.Expired(w.now), w.alive(stopped.ID))
	}
	w.now = w.now.Add(31 * time.Minute)
	if _, err := w.refresh(); err != nil {
		t.Fatal(err)
	}
	if got := w.record(stopped); got.State != state.Terminated || w.alive(stopped.ID) {
		t.Fatalf("past its keep time the stopped instance is %s (in EC2 %v), want terminated", got.State, w.alive(stopped.ID))
	}
}

func TestAnInstanceStoppedOutsideGhrunnerIsRetired(t *testing.T) {
	w := newWorld(t)
	idle := w.idle()
	w.stopInEC2(idle.ID)
	out, err := w.refresh()
	if err != nil {
		t.Fatal(err)
	}
	if got := w.record(idle); !got.Expired(w.now) || len(out.Expired) != 1 || out.Expired[0].InstanceID != idle.ID {
		t.Fatalf("an idle record over an instance stopped outside: expired %v, out %+v; want its lease ended", got.Expired(w.now), out.Expired)
	}
	if _, err := w.refresh(); err != nil {
		t.Fatal(err)
	}
	if got := w.record(idle); got.State != state.Terminated || w.alive(idle.ID) {
		t.Fatalf("next refresh: %s (in EC2 %v), want terminated", got.State, w.alive(idle.ID))
	}
}

func TestAStoppedRecordWhoseInstanceIsGoneIsClosed(t *testing.T) {
	w := newWorld(t)
	idle := w.idle()
	stopped, err := w.cp.Stop(ctx, idle.Ref(), time.Hour)
	must(t, err)
	_, err = w.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{stopped.ID}})
	must(t, err)
	if _, err := w.refresh(); err != nil {
		t.Fatal(err)
	}
	if got := w.record(stopped); got.State != state.Terminated {
		t.Fatalf("a stopped record whose instance is gone is %s, want terminated", got.State)
	}
}
