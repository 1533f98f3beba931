package main

import (
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The invoking job's token leaks (a log, a step that prints its payload)
// and is replayed while it is valid, by the functions as deployed: it
// cannot release the run it provisioned nor provision another run of its
// workflow run. The provision sent again with it (invoke.sh after a lost
// answer) answers the run as before, and the workflow's release job, with
// a token of its own, releases it.
//
// With the UseToken call removed from controlplane.Caller, the test
// reported (tried once):
//
//	release 5201: answered {"runId":"5201","released":["i-e3b42294a0c6c9e72"],"expired":[],…}, want a refusal
//	provision 5201-2: answered {"runId":"5201-2","label":"ghr-5201-2-wjorbvqubxsm2oq7",…,"status":"ready",…}, want a refusal
//	refused calls changed the deployment: {keys:[… run#5201 run#5201-2] live:1 runners:1 runStatus:released}, was {…}
//	provision failed: … run 5201 was released already …
func TestALeakedInvokingTokenIsRefusedForAnyOtherCall(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	leaked := d.signed(ownRepo, map[string]any{"runId": "5201", "pool": "linux"})["idToken"]
	var mine provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "5201", "pool": "linux", "idToken": leaked}, &mine)
	before := d.view("5201")

	d.refused(bundle.HandlerRelease, map[string]any{"runId": "5201", "idToken": leaked}, "",
		"idToken: was already used (jti ", "for provision of run 5201")
	d.refused(bundle.HandlerProvision, map[string]any{"runId": "5201-2", "pool": "linux", "idToken": leaked}, mine.Label,
		"idToken: was already used (jti ", "for provision of run 5201")
	d.unchanged(before, "5201")
	if before.runStatus != state.RunReady {
		t.Fatalf("run status %q before the replays, want ready", before.runStatus)
	}

	var again provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "5201", "pool": "linux", "idToken": leaked}, &again)
	if again.Label != mine.Label || len(again.Instances) != 1 || again.Instances[0].InstanceID != mine.Instances[0].InstanceID {
		t.Fatalf("the provision sent again answered %+v, want the run's %+v", again, mine)
	}
	var rel releaseOut
	d.call(bundle.HandlerRelease, map[string]any{"runId": "5201"}, &rel)
	if len(rel.Released)+len(rel.Expired) != 1 {
		t.Fatalf("release with a token of its own: %+v, want the run's instance back", rel)
	}
}
