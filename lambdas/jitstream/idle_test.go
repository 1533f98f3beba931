package jitstream_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// ask writes the agent's request for configuration n, a few seconds after
// the last, delivers it and returns the record and whether it was refused.
func (r *rig) ask(n int) (*state.Instance, bool) {
	r.t.Helper()
	r.later()
	must(r.t, r.store.PutSignal(ctx, r.inst.Key, r.inst.Assignment, state.SignalJITNext, strconv.Itoa(n)))
	refused := false
	_, answers := r.deliver()
	for _, a := range answers {
		refused = refused || len(a.Refused) > 0
	}
	rec, err := r.store.Get(ctx, r.inst.Key)
	must(r.t, err)
	return rec, refused
}

func (r *rig) refusal() state.JITRefusal {
	rec, err := r.store.Get(ctx, r.inst.Key)
	must(r.t, err)
	return rec.JITRefusedNow()
}

// idleOut plays GitHub removing the instance's runners whose listeners
// waited minutes for a job (actions/runner issue #4726): the consumer's
// clock moves 4 minutes on and the runners are gone.
func (r *rig) idleOut() {
	r.t.Helper()
	r.ahead += 4 * time.Minute
	for _, rn := range r.jitRunners() {
		must(r.t, r.deps.GitHub.DeleteRunner(ctx, "acme", rn.ID))
	}
}

// TestRunnersGitHubRemovedIdleLetThroughOneRunnerEach (issue 37 item 7):
// GitHub's API shows a runner removed because its listener took no job as
// it shows one removed after its job: gone. Root on an instance that lets
// its runners' listeners wait that out must not get the cap's three
// runners again for each such period: a runner gone minutes after it was
// written lets through only the one after the last written, and none
// while that one is still there. The run's job behind an approval, for
// which an honest agent replaces its removed runner one at a time, is
// served all the same. Shown to fail with every gone runner credited in
// full (creditGone returning n): "request 5 served while runner 4 ...".
func TestRunnersGitHubRemovedIdleLetThroughOneRunnerEach(t *testing.T) {
	r := newRig(t)
	for n := 2; n <= 3; n++ { // within the cap
		if rec, _ := r.ask(n); rec.JITSeq != n {
			t.Fatalf("request %d not served: the record holds %d", n, rec.JITSeq)
		}
	}
	r.idleOut()
	if rec, refused := r.ask(4); refused || rec.JITSeq != 4 {
		t.Fatalf("request 4 after the three runners were removed idle: refused %v, the record holds %d", refused, rec.JITSeq)
	}
	if rec, refused := r.ask(5); !refused || rec.JITSeq != 4 {
		t.Fatalf("request 5 served while runner 4 was still there (refused %v, the record holds %d): removed idle runners let several through", refused, rec.JITSeq)
	}
	if c := r.refusal().Clause; c != state.ClauseJITUnused {
		t.Fatalf("request 5 refused by %q, want %q: a look found runner 4 still there", c, state.ClauseJITUnused)
	}
	r.idleOut()
	rec, refused := r.ask(5)
	if refused || rec.JITSeq != 5 {
		t.Fatalf("request 5 after runner 4 was removed idle: refused %v, the record holds %d", refused, rec.JITSeq)
	}
	if got := r.fake.Count("POST /orgs/{org}/actions/runners/generate-jitconfig"); got != 5 {
		t.Fatalf("%d runners minted, want 5: the first, two within the cap, one per idle removal", got)
	}
}
