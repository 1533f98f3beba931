package fakegithub_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	gh "github.com/google/go-github/v62/github"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// statusOf is the HTTP status of a failed call of the client.
func statusOf(err error) int {
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}

// Issue 37, item 11: every version answers a delete of a busy runner 422
// and a just-in-time name already taken 409 (where it has just-in-time
// runners), documented or only observed (version.go, ObservedAnswers).
// Shown to fail with GHES 3.9 to 3.12 answering as their descriptions
// alone would allow (a delete 204 for a busy runner).
func TestEveryVersionAnswersABusyDelete422AndATakenJITName409(t *testing.T) {
	ctx := context.Background()
	for _, version := range fakegithub.Versions() {
		t.Run(version, func(t *testing.T) {
			fake := fakegithub.NewServer(fakegithub.Options{Orgs: []string{"acme"}, Version: version})
			t.Cleanup(fake.Close)
			c, err := github.New(github.Config{BaseURL: fake.URL(), AppID: fake.AppID, PrivateKeyPEM: fake.PrivateKeyPEM})
			if err != nil {
				t.Fatal(err)
			}
			busy := fake.AddRunner("acme", "ghr-1-i-0abc", true, "run-1")
			if err := c.DeleteRunner(ctx, "acme", busy); statusOf(err) != 422 {
				t.Errorf("delete a busy runner: %v, want 422", err)
			}
			if _, ok := fake.Runner(busy); !ok {
				t.Error("the busy runner was deleted")
			}
			if _, err := c.GenerateJITConfig(ctx, "acme", "ghr-2-1-i-0abc", 1, []string{"run-2"}); err != nil {
				if version == fakegithub.OldestGHES {
					return // no just-in-time runners: 404
				}
				t.Fatal(err)
			}
			if _, err := c.GenerateJITConfig(ctx, "acme", "ghr-2-1-i-0abc", 1, []string{"run-2"}); statusOf(err) != 409 {
				t.Errorf("generate-jitconfig for a taken name: %v, want 409", err)
			}
		})
	}
}

// A just-in-time runner has the labels it was made with and no others
// (jit.go: the description's example, actions/runner's Runner.cs and
// ConfigurationManager.cs). Shown to fail with the fake adding
// self-hosted, Linux and X64, as it did.
func TestAJITRunnerHasOnlyTheLabelsItWasGiven(t *testing.T) {
	r := newRig(t)
	cfg, err := r.gh.GenerateJITConfig(context.Background(), "acme", "ghr-1-1-i-0abc", 1, []string{"ghr-7-secret", "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	if info := r.only(); !slices.Equal(info.Labels, []string{"ghr-7-secret", "gpu"}) {
		t.Fatalf("labels of the just-in-time runner: %v, want exactly [ghr-7-secret gpu]", info.Labels)
	}
	listed, err := r.gh.RunnerNamed(context.Background(), "acme", cfg.Name)
	if err != nil || !slices.Equal(listed.Labels, []string{"ghr-7-secret", "gpu"}) {
		t.Fatalf("labels GitHub lists: %+v %v", listed, err)
	}
}
