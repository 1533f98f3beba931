package provision

import (
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

func TestAScaleSetsGroupIsFlaggedWhenItAdmitsMoreThanChosenRepositories(t *testing.T) {
	p := &state.PoolConfig{Name: "linux", Owner: "acme", ScaleSet: &state.ScaleSetConfig{Name: "linux-ss"}}
	cases := []struct {
		name  string
		group github.RunnerGroup
		want  []string // "" : no warning
	}{
		{"the Default group admits every repository", github.RunnerGroup{Name: "Default", Visibility: "all", Default: true}, []string{"every repository of acme", "runs-on: linux-ss"}},
		{"selected repositories only", github.RunnerGroup{Name: "ci", Visibility: "selected"}, nil},
		{"selected, but public repositories too", github.RunnerGroup{Name: "ci", Visibility: "selected", AllowsPublicRepositories: true}, []string{"public repositories"}},
		{"everything", github.RunnerGroup{Name: "ci", Visibility: "all", AllowsPublicRepositories: true}, []string{"every repository", "public repositories"}},
		{"private repositories only", github.RunnerGroup{Name: "ci", Visibility: "private"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ScaleSetAccessWarning(p, c.group)
			if (got == "") != (len(c.want) == 0) {
				t.Fatalf("warning %q, want one saying %v", got, c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("warning %q does not say %q", got, w)
				}
			}
		})
	}
}
