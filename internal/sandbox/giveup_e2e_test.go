package sandbox_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// A provision that never sees its instance's registration gives the
// instance up and replaces it. Here the instance's record is hot: its
// agent reads it and registers, then every write to it (the UD_REG_OK note
// included) and, once the runner is on GitHub, every read of it is
// throttled, so that provision can neither see the note nor read the
// record when it gives up. The runner that registered carries the run's
// label: left alone it would take the run's jobs on an instance the run was
// not given (a 200-workflow chaos run found exactly this). Provision must
// withdraw it through GitHub's API.
func TestE2E_AnInstanceProvisionGaveUpTakesNoJobOfItsRun(t *testing.T) {
	t.Parallel() // it mostly waits out a lease; see TestE2E_Chaos
	sb, d, fn := deployed(t)
	var mu sync.Mutex
	victim, victimKey, hot := "", "", false
	sb.SetFaults(sandbox.Faults{DynamoDB: func(req sandbox.DynamoRequest) sandbox.DynamoAnswer {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range req.Keys {
			// Instance records are keyed <role id>:<instance id>.
			if _, id, ok := strings.Cut(k, ":"); victim == "" && req.Write && ok && strings.HasPrefix(id, "i-") {
				victim, victimKey = id, k // provision's Create of the first instance
			}
			if k == victimKey && hot {
				return sandbox.DynamoAnswer{HotKeys: []string{k}}
			}
		}
		return sandbox.DynamoAnswer{}
	}})
	defer sb.SetFaults(sandbox.Faults{})
	// The record turns hot the moment GitHub registers the victim's runner,
	// before config.sh returns: the agent's UD_REG_OK never lands.
	sb.GitHub.OnRegister(func(r fakegithub.Registration) {
		mu.Lock()
		defer mu.Unlock()
		if inst, _ := github.InstanceOf(r.Name); inst != "" && inst == victim {
			hot = true
		}
	})
	defer sb.GitHub.OnRegister(nil)

	var prov provision.Output
	invoke(t, fn, d.Functions[bundle.HandlerProvision], `{"runId":"88001","pool":"linux"}`, &prov)
	mu.Lock()
	played := hot
	mu.Unlock()
	if !played {
		t.Fatalf("the first instance (%s) never registered its runner: the test did not play its scenario", victim)
	}
	if prov.Status != "ready" || len(prov.Instances) != 1 || prov.Instances[0].InstanceID == victim {
		t.Fatalf("provision = %+v: want one ready instance other than the given-up %s", prov, victim)
	}
	given := prov.Instances[0].InstanceID

	// The given-up instance's runner is gone from GitHub, not merely offline.
	for _, r := range sb.GitHub.Runners() {
		if inst, _ := github.InstanceOf(r.Name); inst == victim {
			t.Errorf("runner %s of the given-up %s is still registered with labels %v", r.Name, victim, r.Labels)
		}
	}
	// And every job of the run runs on the instance the run was given.
	for i := range 3 {
		job := runJob(t, sb.URL, "88001", "echo job")
		if inst, _ := github.InstanceOf(job.Runner); job.Result != "succeeded" || inst != given {
			t.Errorf("job %d ran on %q (%s), want the given %s", i, job.Runner, job.Result, given)
		}
	}
	ended := slices.IndexFunc(sb.GitHub.History(), func(r fakegithub.Registration) bool {
		inst, _ := github.InstanceOf(r.Name)
		return inst == victim && r.EndedBy == "api"
	})
	if ended < 0 {
		t.Errorf("the given-up %s's registration was not ended through the API: %+v", victim, sb.GitHub.History())
	}
	sb.SetFaults(sandbox.Faults{})
	var rel release.Output
	invoke(t, fn, d.Functions[bundle.HandlerRelease], `{"runId":"88001"}`, &rel)
}
