package fleet

import (
	"errors"
	"testing"
)

func TestAStoppedInstanceIsListedStoppedAndStartsAgain(t *testing.T) {
	n := newNetwork(t)
	f, _ := newFleet(t, wrap(n.client))
	id := launchN(t, n, f, 1)[0]
	must(t, f.Stop(ctx, id))
	got, err := f.List(ctx, Filter{IDs: []string{id}})
	must(t, err)
	if len(got) != 1 || got[0].State != "stopped" && got[0].State != "stopping" {
		t.Fatalf("after the stop EC2 lists %+v, want it stopped and still live", got)
	}
	must(t, f.Start(ctx, id))
	got, err = f.List(ctx, Filter{IDs: []string{id}, States: []string{"pending", "running"}})
	must(t, err)
	if len(got) != 1 {
		t.Fatalf("after the start EC2 lists %+v, want it pending or running", got)
	}
}

func TestStoppingAnInstanceEC2DoesNotKnowSaysItIsGone(t *testing.T) {
	n := newNetwork(t)
	f, _ := newFleet(t, wrap(n.client))
	if err := f.Stop(ctx, ghost); !errors.Is(err, ErrGone) {
		t.Fatalf("stop of an unknown instance: %v, want ErrGone", err)
	}
	if err := f.Start(ctx, ghost); !errors.Is(err, ErrGone) {
		t.Fatalf("start of an unknown instance: %v, want ErrGone", err)
	}
}

// Preflight's start check: a dry-run start of a stopped instance is
// allowed (EC2 answers DryRunOperation) and starts nothing.
func TestADryRunStartOfAStoppedInstanceIsAllowedAndLeavesItStopped(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	f, _ := newFleet(t, w)
	id := launchN(t, n, f, 1)[0]
	must(t, f.Stop(ctx, id))
	if err := f.CanStart(ctx, id); err != nil {
		t.Fatalf("dry-run start of a stopped instance: %v, want allowed", err)
	}
	got, err := f.List(ctx, Filter{IDs: []string{id}, States: []string{"pending", "running"}})
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("after the dry run EC2 lists %+v pending or running, want it still stopped", got)
	}
}
