package github

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// The oldest GitHub Enterprise Server README claims (fakegithub.OldestGHES,
// whose description internal/testenv/ghapi holds the fake to): a token
// pool's calls all work there: registration and remove tokens, the
// runner listing, a runner found by name without the name filter the
// release lacks, lookup and deletion (busy too); a just-in-time request
// fails saying to use tokens.
func TestTheOldestGHESServesEveryCallOfATokenPool(t *testing.T) {
	fake, c, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}, Version: fakegithub.OldestGHES})
	for _, owner := range []string{"acme", "acme/api"} {
		if tok, _, err := c.RegistrationToken(ctx, owner); err != nil || tok == "" {
			t.Fatalf("registration token for %s: %q %v", owner, tok, err)
		}
		if tok, _, err := c.RemoveToken(ctx, owner); err != nil || tok == "" {
			t.Fatalf("remove token for %s: %q %v", owner, tok, err)
		}
	}
	for i := range 130 {
		fake.AddRunner("acme", state.RunnerName(1, fmt.Sprintf("i-%05d", i)), false, "run-1")
	}
	busy := fake.AddRunner("acme", state.RunnerName(2, "i-busy"), true, "run-2")
	all, err := c.ListRunners(ctx, "acme")
	if err != nil || len(all) != 131 {
		t.Fatalf("list: %d runners, %v; want 131", len(all), err)
	}
	last, err := c.RunnerNamed(ctx, "acme", state.RunnerName(1, "i-00129"))
	if err != nil {
		t.Fatalf("a runner on the second page, without a name filter: %v", err)
	}
	if r, err := c.GetRunner(ctx, "acme", last.ID); err != nil || r.Name != last.Name {
		t.Fatalf("get: %+v %v", r, err)
	}
	if err := c.DeleteRunner(ctx, "acme", last.ID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.RunnerNamed(ctx, "acme", last.Name); !IsNotFound(err) {
		t.Fatalf("the deleted runner: %v, want IsNotFound", err)
	}
	if err := c.DeleteRunner(ctx, "acme", busy); !IsBusy(err) {
		t.Fatalf("delete a busy runner: %v, want IsBusy", err)
	}
	if _, err := c.GenerateJITConfig(ctx, "acme", "ghr-3-1-i-0abc", 1, []string{"run-3"}); !IsNotFound(err) || !strings.Contains(err.Error(), `registration = "token"`) {
		t.Fatalf("generate-jitconfig on %s: %v", fakegithub.OldestGHES, err)
	}
}

// The oldest release with just-in-time runners (ghes-3.10, also without
// the name filter): a just-in-time pool's calls work there: a runner
// group by name, a configuration, a name taken, the runner found by name
// and deleted.
func TestTheOldestGHESWithJustInTimeRunnersServesEveryCallOfAJITPool(t *testing.T) {
	fake, c, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}, Version: "ghes-3.10"})
	fake.AddRunnerGroup("acme", "large")
	for i := range 110 {
		fake.AddRunner("acme", state.RunnerName(1, fmt.Sprintf("i-%05d", i)), false, "run-1")
	}
	group, err := c.RunnerGroupID(ctx, "acme", "large")
	if err != nil || group != 2 {
		t.Fatalf("runner group: %d %v", group, err)
	}
	cfg, err := c.GenerateJITConfig(ctx, "acme", "ghr-3-1-i-0abc", group, []string{"run-3"})
	if err != nil || cfg.Encoded == "" {
		t.Fatalf("generate-jitconfig: %+v %v", cfg, err)
	}
	if _, err := c.GenerateJITConfig(ctx, "acme", "ghr-3-1-i-0abc", group, []string{"run-3"}); !IsNameTaken(err) {
		t.Fatalf("the same name again: %v, want IsNameTaken", err)
	}
	r, err := c.RunnerNamed(ctx, "acme", "ghr-3-1-i-0abc")
	if err != nil || r.ID != cfg.RunnerID {
		t.Fatalf("the just-in-time runner by name (past the first page): %+v %v", r, err)
	}
	if err := c.DeleteRunner(ctx, "acme", cfg.RunnerID); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, ok := fake.Runner(cfg.RunnerID); ok {
		t.Fatal("the just-in-time runner is still registered")
	}
}

// Issue 37, item 11: per version, a delete of a busy runner is ErrBusy and
// a just-in-time name already taken ErrNameTaken, whether the version's
// description documents the answer (github.com, GHES 3.13 on) or it was
// only observed (GHES 3.9 to 3.12: fakegithub.ObservedAnswers), for an
// organization and a repository alike. Shown to fail with classify not
// mapping a DELETE's 422 to ErrBusy, and with GenerateJITConfig not
// mapping a 409 to ErrNameTaken.
func TestEveryVersionsBusyDeleteAndTakenNameAreTypedErrorsDocumentedOrObserved(t *testing.T) {
	for _, version := range fakegithub.Versions() {
		how := map[int]string{422: "documented", 409: "documented"}
		for _, o := range fakegithub.ObservedAnswers(version) {
			how[o.Status] = "observed"
		}
		t.Run(version, func(t *testing.T) {
			fake, c, _ := world(t, fakegithub.Options{Orgs: []string{"acme"}, Version: version})
			for _, owner := range []string{"acme", "acme/api"} {
				busy := fake.AddRunner(owner, state.RunnerName(1, "i-0abc"), true, "run-1")
				if err := c.DeleteRunner(ctx, owner, busy); !IsBusy(err) {
					t.Errorf("%s, %s: delete a busy runner (422, %s): %v, want IsBusy", version, owner, how[422], err)
				}
				if version == fakegithub.OldestGHES {
					continue // no just-in-time runners
				}
				name := state.JITRunnerName(2, 1, "i-0abc")
				if _, err := c.GenerateJITConfig(ctx, owner, name, 1, []string{"run-2"}); err != nil {
					t.Fatalf("%s, %s: generate-jitconfig: %v", version, owner, err)
				}
				if _, err := c.GenerateJITConfig(ctx, owner, name, 1, []string{"run-2"}); !IsNameTaken(err) || IsBusy(err) {
					t.Errorf("%s, %s: generate-jitconfig for a taken name (409, %s): %v, want IsNameTaken", version, owner, how[409], err)
				}
			}
		})
	}
}
