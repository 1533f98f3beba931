package provision

import (
	"context"
	"fmt"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// A scale set's jobs carry no minted label: any workflow of a repository
// its runner group admits can name the scale set in runs-on and run on
// the pool's instances (docs/security.md, C30). Preflight says so when the
// group admits more than chosen repositories.

// groupReader reads a runner group with whom it admits
// (*github.Client).
type groupReader interface {
	RunnerGroup(ctx context.Context, org, name string) (github.RunnerGroup, error)
}

// ScaleSetAccessWarning says what is wrong with who may use pool p's
// scale set through its runner group g, "" when the group admits only
// selected (or private) repositories and no public one.
func ScaleSetAccessWarning(p *state.PoolConfig, g github.RunnerGroup) string {
	var why []string
	if g.Visibility == "all" {
		why = append(why, "admits every repository of "+p.Owner)
	}
	if g.AllowsPublicRepositories {
		why = append(why, "admits public repositories (a pull request from anyone runs on your instances)")
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("runner group %q of scale set %q %s: any workflow there can say runs-on: %s; limit the group to the repositories that may use pool %s (Settings → Actions → Runner groups → Repository access: selected repositories)",
		g.Name, p.ScaleSet.Name, strings.Join(why, " and "), p.ScaleSet.Name, p.Name)
}

// scaleSetAccessCheck is preflight's look at a scale-set pool's group: a
// warning, not a failure (a single-repository organization may mean it).
func scaleSetAccessCheck(ctx context.Context, gh any, p *state.PoolConfig) (Check, bool) {
	if p.ScaleSet == nil || strings.Contains(p.Owner, "/") {
		return Check{}, false // a repository's scale set serves that repository alone
	}
	c := Check{Check: "scale-set-group", Pool: p.Name, Owner: p.Owner, OK: true}
	r, ok := gh.(groupReader)
	if !ok {
		return Check{}, false
	}
	g, err := r.RunnerGroup(ctx, p.Owner, p.RunnerGroup)
	if err != nil {
		c.OK, c.Detail = false, err.Error()
		return c, true
	}
	if w := ScaleSetAccessWarning(p, g); w != "" {
		c.Warning, c.Detail = true, w
	}
	return c, true
}
