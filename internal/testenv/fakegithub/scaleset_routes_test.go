package fakegithub_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/actions/scaleset"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

func labelNames(ls []scaleset.Label) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

// TestScaleSetsAndTheirRunnersAreManagedThroughTheLibrary: runner groups
// by name, a scale set in a custom group with its labels and
// DisableUpdate, a second of the same name refused, updates (PATCH) of
// labels and DisableUpdate, and a scale set's runner found by id and
// name and removed.
func TestScaleSetsAndTheirRunnersAreManagedThroughTheLibrary(t *testing.T) {
	fake := newScaleSetFake(t, fakegithub.ScaleSetOptions{})
	fake.AddRunnerGroup("acme", "ci")
	c := newScaleSetClient(t, fake, "acme")
	ctx := context.Background()

	def, err := c.GetRunnerGroupByName(ctx, scaleset.DefaultRunnerGroup)
	if err != nil || def.ID != 1 || !def.IsDefault {
		t.Fatalf("the default group: %+v %v", def, err)
	}
	ci, err := c.GetRunnerGroupByName(ctx, "ci")
	if err != nil || ci.ID != 2 || ci.IsDefault || ci.Name != "ci" {
		t.Fatalf("group ci: %+v %v", ci, err)
	}
	if _, err := c.GetRunnerGroupByName(ctx, "nope"); err == nil || !strings.Contains(err.Error(), `no runner group found with name "nope"`) {
		t.Fatalf("an unknown group: %v", err)
	}

	set, err := c.CreateRunnerScaleSet(ctx, &scaleset.RunnerScaleSet{Name: "ssc", RunnerGroupID: ci.ID,
		Labels: []scaleset.Label{{Name: "x"}, {Name: "y"}}, RunnerSetting: scaleset.RunnerSetting{DisableUpdate: true}})
	if err != nil || set.RunnerGroupName != "ci" || !slices.Equal(labelNames(set.Labels), []string{"x", "y"}) || !set.RunnerSetting.DisableUpdate {
		t.Fatalf("created: %+v %v", set, err)
	}
	if _, err := c.CreateRunnerScaleSet(ctx, &scaleset.RunnerScaleSet{Name: "ssc", RunnerGroupID: ci.ID}); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("a second scale set of the same name in the group: %v", err)
	}
	if got, err := c.GetRunnerScaleSet(ctx, def.ID, "ssc"); err != nil || got != nil {
		t.Fatalf("ssc in the default group: %+v %v", got, err)
	}

	upd, err := c.UpdateRunnerScaleSet(ctx, set.ID, &scaleset.RunnerScaleSet{Labels: []scaleset.Label{{Name: "z"}}, RunnerSetting: scaleset.RunnerSetting{DisableUpdate: true}})
	if err != nil || upd.Name != "ssc" || !slices.Equal(labelNames(upd.Labels), []string{"z"}) || !upd.RunnerSetting.DisableUpdate {
		t.Fatalf("updated: %+v %v", upd, err)
	}
	if upd, err = c.UpdateRunnerScaleSet(ctx, set.ID, &scaleset.RunnerScaleSet{}); err != nil || upd.RunnerSetting.DisableUpdate {
		t.Fatalf("DisableUpdate turned off: %+v %v", upd, err)
	}
	if info, _ := fake.ScaleSet(set.ID); info.Group != "ci" || !slices.Equal(info.Labels, []string{"z"}) || info.DisableUpdate {
		t.Fatalf("as the fake has it: %+v", info)
	}

	jit, err := c.GenerateJitRunnerConfig(ctx, &scaleset.RunnerScaleSetJitRunnerSetting{Name: "c-1"}, set.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rn, ok := fake.Runner(int64(jit.Runner.ID)); !ok || rn.Group != "ci" || !slices.Equal(rn.Labels, []string{"z"}) || !rn.JIT {
		t.Fatalf("the scale set's runner: %+v", rn)
	}
	got, err := c.GetRunner(ctx, jit.Runner.ID)
	if err != nil || got.Name != "c-1" || got.RunnerScaleSetID != set.ID {
		t.Fatalf("GetRunner: %+v %v", got, err)
	}
	if got, err := c.GetRunnerByName(ctx, "c-1"); err != nil || got == nil || got.ID != jit.Runner.ID {
		t.Fatalf("GetRunnerByName: %+v %v", got, err)
	}
	if got, err := c.GetRunnerByName(ctx, "nobody"); err != nil || got != nil {
		t.Fatalf("GetRunnerByName of nobody: %+v %v", got, err)
	}
	if err := c.RemoveRunner(ctx, int64(jit.Runner.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRunner(ctx, jit.Runner.ID); !errors.Is(err, scaleset.RunnerNotFoundError) {
		t.Fatalf("a removed runner: %v, want RunnerNotFoundError", err)
	}
}

// TestAStaleMessageQueueTokenIsRefreshedByTheLibrary: a poll answered
// 401 makes the client refresh its session (PATCH) and poll again with
// the new token; the session and its messages stay.
func TestAStaleMessageQueueTokenIsRefreshedByTheLibrary(t *testing.T) {
	fake := newScaleSetFake(t, fakegithub.ScaleSetOptions{})
	c := newScaleSetClient(t, fake, "acme")
	ctx := context.Background()
	set := createScaleSet(t, c, "ssa", false)
	session, err := c.MessageSessionClient(ctx, set.ID, "one")
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close(ctx)
	before := session.Session()
	id := fake.EnqueueScaleSetJob("acme", "api", "ssa", "true")
	fake.ExpireMessageQueueToken(set.ID)
	msg, err := session.GetMessage(ctx, 0, 1)
	if err != nil || msg == nil || len(msg.JobAvailableMessages) != 1 || msg.JobAvailableMessages[0].RunnerRequestID != id {
		t.Fatalf("a poll with a stale token: %+v %v", msg, err)
	}
	after := session.Session()
	if after.SessionID != before.SessionID || after.MessageQueueAccessToken == before.MessageQueueAccessToken {
		t.Fatalf("session before %+v, after %+v: want the same session, a new token", before, after)
	}
	if n := fake.Count("PATCH /_fake/_apis/runtime/runnerscalesets/{id}/sessions/{sid}"); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
	fake.ExpireMessageQueueToken(set.ID)
	if got, err := session.AcquireJobs(ctx, []int64{id}); err != nil || len(got) != 1 {
		t.Fatalf("acquiring with a stale token: %v %v", got, err)
	}
}
