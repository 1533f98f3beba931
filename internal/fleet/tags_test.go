package fleet

import (
	"errors"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

func TestOrphanAndScaleDownTags(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	f, _ := newFleet(t, w)
	ids := launchN(t, n, f, 2)
	list := func(flt Filter) []Instance {
		t.Helper()
		got, err := f.List(ctx, flt)
		must(t, err)
		return got
	}

	must(t, f.TagOrphan(ctx, ids[0], "as-1"))
	orphans := list(Filter{Orphans: OrphansOnly})
	if len(orphans) != 1 || orphans[0].ID != ids[0] {
		t.Fatalf("orphans %+v, want %s", orphans, ids[0])
	}
	if v, ok := orphans[0].Orphan(); !ok || v != "as-1" {
		t.Errorf("orphan tag %q %v, want the assignment", v, ok)
	}
	if others := list(Filter{Orphans: OrphansExcluded}); len(others) != 1 || others[0].ID != ids[1] {
		t.Errorf("non-orphans %+v, want %s", others, ids[1])
	}
	if all := list(Filter{}); len(all) != 2 {
		t.Errorf("listed %d with orphans included, want 2", len(all))
	}

	must(t, f.SetTags(ctx, ids, map[string]string{TagGithubRunnerID: "42", TagBypassRemoval: "true"}))
	for _, i := range list(Filter{}) {
		if i.Tags[TagGithubRunnerID] != "42" || i.Tags[TagBypassRemoval] != "true" {
			t.Errorf("%s tags %v", i.ID, i.Tags)
		}
	}
	must(t, f.RemoveTags(ctx, ids, TagGithubRunnerID))
	for _, i := range list(Filter{}) {
		if _, ok := i.Tags[TagGithubRunnerID]; ok || i.Tags[TagBypassRemoval] != "true" {
			t.Errorf("%s tags %v: want only the runner id removed", i.ID, i.Tags)
		}
	}

	must(t, f.UntagOrphan(ctx, ids[0]))
	if orphans := list(Filter{Orphans: OrphansOnly}); len(orphans) != 0 {
		t.Errorf("orphan tag still on %+v", orphans)
	}

	// DeleteTags without keys would strip every tag: nothing is sent.
	deletes := w.count("DeleteTags")
	must(t, f.RemoveTags(ctx, ids))
	must(t, f.SetTags(ctx, nil, map[string]string{"a": "b"}))
	if w.count("DeleteTags") != deletes || len(list(Filter{})) != 2 {
		t.Error("RemoveTags without keys reached EC2 or hid the instances")
	}

	var ve *fielderr.Error
	if err := f.TagOrphan(ctx, ids[0], ""); !errors.As(err, &ve) || ve.Field != "assignment" {
		t.Errorf("TagOrphan without assignment: %v", err)
	}
}
