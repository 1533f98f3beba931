package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TestAListenerWhoseAppMayNotManageTheOrganizationsRunnersSaysSoAndKeepsTrying
// runs the listener for an organization whose installation of the App
// lacks the organization's self-hosted runners permission (an owner who
// has not accepted it): the scale set cannot be made, the scale set's
// status (ghrunner status) says why in words an operator acts on, the
// listener asks again with backoff rather than exiting, and it serves the
// scale set once the permission is granted. docs/scale-sets.md points here.
func TestAListenerWhoseAppMayNotManageTheOrganizationsRunnersSaysSoAndKeepsTrying(t *testing.T) {
	t.Parallel()
	d := deploy(t, func(p *state.PoolConfig) {
		p.Registration, p.ScaleSet = state.RegistrationJIT, &state.ScaleSetConfig{Name: "linux-set"}
	})
	d.fake.WithoutAppPermission("organization_self_hosted_runners")
	d.startListener("task-1")

	const tokens = "POST /orgs/{org}/actions/runners/registration-token"
	var st *state.ScaleSetStatus
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		cur, err := d.store.GetScaleSetStatus(ctx, d.pool.Name)
		if err != nil && !state.IsNotFound(err) {
			t.Fatal(err)
		}
		if cur != nil && cur.Error != "" && d.fake.Count(tokens) >= 3 {
			st = cur
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st == nil {
		t.Fatalf("no error in the scale set's status after %d registration token requests", d.fake.Count(tokens))
	}
	t.Logf("status error: %s", st.Error)
	for _, want := range []string{"organization_self_hosted_runners", "acme"} {
		if !strings.Contains(st.Error, want) {
			t.Errorf("the status error does not name %q: %s", want, st.Error)
		}
	}
	if n := len(d.fake.ScaleSets()); n != 0 {
		t.Fatalf("%d scale sets made without the permission", n)
	}

	d.fake.WithAppPermission("organization_self_hosted_runners")
	deadline = time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		cur, err := d.store.GetScaleSetStatus(ctx, d.pool.Name)
		if err != nil && !state.IsNotFound(err) {
			t.Fatal(err)
		}
		if cur != nil && cur.Holder == "task-1" && len(d.fake.ScaleSets()) == 1 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the listener did not serve the scale set once the permission was granted (%d scale sets)", len(d.fake.ScaleSets()))
}
