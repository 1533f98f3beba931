package main

import (
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// Preflight, given the repositories that will invoke provision, reads the
// organization pool's runner group (the Default group while the pool names
// none) and fails naming the pool, the group and each repository the group
// would never serve: a public repository against the Default group (no
// public repositories, as GitHub makes it), a repository a selected group
// does not list. Repositories of other organizations are not the pool's.
// (Without the refusal in groupChecks, each check passes and this fails.)
func TestPreflightNamesTheRepositoriesAPoolsRunnerGroupWouldNeverServe(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)
	d.fake.SetRepositoryVisibility("acme/site", "public")
	groupCheck := func(payload string) provision.Check {
		t.Helper()
		var out provisionOut
		d.call("provision", []byte(payload), &out)
		for _, c := range out.Checks {
			if c.Check == "runner-group" && c.Pool == "linux" {
				if !c.OK && out.Status != "preflight-failed" {
					t.Errorf("a failed runner-group check and status %s", out.Status)
				}
				return c
			}
		}
		t.Fatalf("preflight answered no runner-group check for linux: %+v", out)
		return provision.Check{}
	}
	check := func(payload string, ok bool, says ...string) {
		t.Helper()
		c := groupCheck(payload)
		if c.OK != ok {
			t.Errorf("%s: runner-group check %+v, want ok %v", payload, c, ok)
		}
		for _, s := range says {
			if !strings.Contains(c.Detail, s) {
				t.Errorf("%s: runner-group detail %q does not say %q", payload, c.Detail, s)
			}
		}
	}

	check(`{"preflight":true,"repositories":["acme/app","other/site"]}`, true, `runner group "Default" admits acme/app`)
	check(`{"preflight":true,"repositories":["acme/app","acme/site"]}`, false,
		"pool linux", "acme/site is public", `runner group "Default" does not allow public repositories`, "would stay queued")

	d.fake.AddRunnerGroup("acme", "ci")
	d.fake.SetRunnerGroupAccess("acme", "ci", fakegithub.GroupAccess{Visibility: "selected", Repositories: []string{"app"}})
	d.pool.RunnerGroup = "ci"
	must(t, d.store.PutPoolConfig(ctx, d.pool))
	check(`{"preflight":true,"repositories":["acme/app"]}`, true, `runner group "ci" admits acme/app`)
	check(`{"preflight":true,"repositories":["acme/app","acme/web"]}`, false,
		"pool linux", `runner group "ci" admits selected repositories and acme/web is not one of them`)
	check(`{"preflight":true}`, true, `runner group "ci" exists`)

	d.pool.RunnerGroup = "gone"
	must(t, d.store.PutPoolConfig(ctx, d.pool))
	check(`{"preflight":true}`, false, "pool linux", `runner group "gone" of acme`, "not found")
}
