package main

import (
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// Preflight checks, for a pool with a stopped tier, that provision may
// start the pool's instances (StartInstances with DryRun on one of them),
// so that an account forbidding it learns so before the tier's first
// start: not tried while the pool has no instance, allowed on one it has.
// (The sandbox story shows it failing with UnauthorizedOperation when the
// role's StartOwnInstances statement is removed.)
func TestPreflightChecksThatProvisionMayStartAStoppedTiersInstances(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) { p.Stopped = &state.StoppedTier{Max: 1, KeepSeconds: 600} })
	startCheck := func() (provision.Check, string) {
		t.Helper()
		var out provisionOut
		d.call(bundle.HandlerProvision, []byte(`{"preflight": true}`), &out)
		for _, c := range out.Checks {
			if c.Check == "start" && c.Pool == "linux" {
				return c, out.Status
			}
		}
		t.Fatalf("preflight answered no start check for linux, a pool with a stopped tier: %+v", out)
		return provision.Check{}, ""
	}
	if c, _ := startCheck(); !c.OK || !strings.Contains(c.Detail, "not tried") {
		t.Fatalf("start check with no instance: %+v, want ok, not tried", c)
	}
	var prov provisionOut
	d.call(bundle.HandlerProvision, map[string]any{"runId": "preflight-start", "pool": "linux", "instanceCount": 1}, &prov)
	if len(prov.Instances) != 1 {
		t.Fatalf("provision: %+v", prov)
	}
	if c, status := startCheck(); !c.OK || c.Detail != prov.Instances[0].InstanceID || status != "preflight-ok" {
		t.Fatalf("start check with an instance: %+v (status %s), want ok, tried on %s", c, status, prov.Instances[0].InstanceID)
	}
}
