package provision

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// A runner group is a routing control: GitHub hands an organization
// runner's job only to a runner whose group admits the job's repository
// (visibility all, selected or private; public repositories only when
// the group allows them, which the Default group does not by default).
// A repository the pool's group does not admit gets no runner: its job
// stays queued on the label provision minted, and fails after GitHub's
// 24 hours. Preflight reads the group once per organization pool and
// says so before the first workflow does: "runner-group" fails when the
// group is missing or refuses one of the repositories the preflight
// names (the module's invoker_repositories, of the pool's organization).
// A scale set's jobs carry no minted label either: any workflow of a
// repository its group admits can name the scale set in runs-on and run
// on the pool's instances (docs/security.md, C30), so the same read also
// warns ("scale-set-group") when that group admits more than chosen
// repositories.

// groupReader reads a runner group, whom it admits, and a repository's
// visibility (*github.Client).
type groupReader interface {
	RunnerGroup(ctx context.Context, org, name string) (github.RunnerGroup, error)
	RunnerGroupRepositories(ctx context.Context, org string, groupID int64) ([]string, error)
	RepositoryPublic(ctx context.Context, repo string) (bool, error)
}

// GroupRefusal says why runner group g does not admit repository repo
// ("acme/app"), public or not, "" when it does; selected are the
// repositories of a group whose visibility is "selected". Workflow
// restrictions are not judged: which workflow will invoke is not known
// here, and the group's SelectedWorkflows name them.
func GroupRefusal(g github.RunnerGroup, repo string, public bool, selected []string) string {
	switch {
	case public && g.Visibility == "private":
		return fmt.Sprintf("%s is public and runner group %q admits private repositories only", repo, g.Name)
	case public && !g.AllowsPublicRepositories:
		return fmt.Sprintf("%s is public and runner group %q does not allow public repositories (GitHub's default): allow them in the group's settings, knowing that a pull request from anyone then runs on your instances, or use the pools from private repositories", repo, g.Name)
	case g.Visibility == "selected" && !slices.ContainsFunc(selected, func(s string) bool { return strings.EqualFold(s, repo) }):
		return fmt.Sprintf("runner group %q admits selected repositories and %s is not one of them: add it (Settings → Actions → Runner groups → %s → Repository access)", g.Name, repo, g.Name)
	}
	return ""
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

// groupChecks are preflight's look at an organization pool's runner group
// (the Default group when the pool names none): "runner-group" when the
// pool names a group or repositories were given, "scale-set-group" for a
// scale-set pool. public caches repositories' visibility across pools.
func groupChecks(ctx context.Context, gh groupReader, p *state.PoolConfig, repos []string, public map[string]bool) []Check {
	if strings.Contains(p.Owner, "/") {
		return nil // a repository's runners serve that repository alone
	}
	var mine []string
	for _, r := range repos {
		if org, _, _ := strings.Cut(r, "/"); strings.EqualFold(org, p.Owner) {
			mine = append(mine, r)
		}
	}
	if p.RunnerGroup == "" && len(mine) == 0 && p.ScaleSet == nil {
		return nil
	}
	g, err := gh.RunnerGroup(ctx, p.Owner, p.RunnerGroup)
	if err != nil {
		c := Check{Check: "runner-group", Pool: p.Name, Owner: p.Owner, Detail: fmt.Sprintf("pool %s: %v", p.Name, err)}
		if p.ScaleSet != nil && p.RunnerGroup == "" {
			c.Check = "scale-set-group"
		}
		return []Check{c}
	}
	var out []Check
	if p.RunnerGroup != "" || len(mine) > 0 {
		c := Check{Check: "runner-group", Pool: p.Name, Owner: p.Owner, OK: true, Detail: admitsDetail(g, mine)}
		if why := refusals(ctx, gh, p, g, mine, public); len(why) > 0 {
			c.OK, c.Detail = false, fmt.Sprintf("pool %s: %s; its jobs from there would stay queued", p.Name, strings.Join(why, "; "))
		}
		out = append(out, c)
	}
	if p.ScaleSet != nil {
		c := Check{Check: "scale-set-group", Pool: p.Name, Owner: p.Owner, OK: true}
		if w := ScaleSetAccessWarning(p, g); w != "" {
			c.Warning, c.Detail = true, w
		}
		out = append(out, c)
	}
	return out
}

// refusals reads what GroupRefusal needs and says, per repository, why
// group g refuses it (or why it could not tell).
func refusals(ctx context.Context, gh groupReader, p *state.PoolConfig, g github.RunnerGroup, repos []string, public map[string]bool) []string {
	var selected []string
	if g.Visibility == "selected" && len(repos) > 0 {
		var err error
		if selected, err = gh.RunnerGroupRepositories(ctx, p.Owner, g.ID); err != nil {
			return []string{err.Error()}
		}
	}
	var why []string
	for _, r := range repos {
		pub, ok := public[strings.ToLower(r)]
		if !ok {
			var err error
			if pub, err = gh.RepositoryPublic(ctx, r); err != nil {
				why = append(why, err.Error())
				continue
			}
			public[strings.ToLower(r)] = pub
		}
		if w := GroupRefusal(g, r, pub, selected); w != "" {
			why = append(why, w)
		}
	}
	return why
}

// admitsDetail is a passed check's detail: the group and what was found.
func admitsDetail(g github.RunnerGroup, repos []string) string {
	if len(repos) == 0 {
		return fmt.Sprintf("runner group %q exists", g.Name)
	}
	return fmt.Sprintf("runner group %q admits %s", g.Name, strings.Join(repos, ", "))
}
