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

func TestGroupRefusalSaysWhyARunnerGroupDoesNotAdmitARepository(t *testing.T) {
	def := github.RunnerGroup{Name: "Default", Visibility: "all", Default: true}
	cases := []struct {
		name     string
		group    github.RunnerGroup
		public   bool
		selected []string
		want     []string // nil: admitted
	}{
		{"the Default group admits a private repository", def, false, nil, nil},
		{"the Default group refuses a public repository", def, true, nil, []string{"acme/app is public", `"Default" does not allow public repositories`}},
		{"a group that allows public repositories admits one", github.RunnerGroup{Name: "oss", Visibility: "all", AllowsPublicRepositories: true}, true, nil, nil},
		{"a private-only group refuses a public repository", github.RunnerGroup{Name: "p", Visibility: "private", AllowsPublicRepositories: true}, true, nil, []string{"admits private repositories only"}},
		{"a selected group admits a listed repository", github.RunnerGroup{Name: "ci", Visibility: "selected"}, false, []string{"acme/web", "ACME/App"}, nil},
		{"a selected group refuses an unlisted one", github.RunnerGroup{Name: "ci", Visibility: "selected"}, false, []string{"acme/web"}, []string{`"ci" admits selected repositories and acme/app is not one of them`, "Repository access"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := GroupRefusal(c.group, "acme/app", c.public, c.selected)
			if (got == "") != (c.want == nil) {
				t.Fatalf("refusal %q, want one saying %v", got, c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("refusal %q does not say %q", got, w)
				}
			}
		})
	}
}
