package fakegithub

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Which GitHub the fake is: api.github.com (the default) or one GitHub
// Enterprise Server release, serving only what that release's published
// REST API description has (the npm package @octokit/openapi, installed
// by scripts/ensure-openapi; internal/testenv/ghapi holds the fake to each
// description, so a difference between the table below and the
// descriptions fails make test).
const (
	// APIGitHubCom is github.com's REST API, Options.Version's default.
	APIGitHubCom = "api.github.com"
	// OldestGHES and NewestGHES bound the Enterprise Server releases the
	// fake models: the ones the pinned descriptions carry (ghes-3.9 to
	// ghes-3.19). README's supported versions are these.
	OldestGHES = "ghes-3.9"
	NewestGHES = "ghes-3.19"
)

// Versions lists every version the fake models: api.github.com, then the
// Enterprise Server releases from the oldest.
func Versions() []string {
	out := []string{APIGitHubCom}
	lo, _ := ghesMinor(OldestGHES)
	hi, _ := ghesMinor(NewestGHES)
	for m := lo; m <= hi; m++ {
		out = append(out, "ghes-3."+strconv.Itoa(m))
	}
	return out
}

// features are what differs between the versions the fake models, each
// from the first description that has it.
type features struct {
	// generate-jitconfig (both scopes): in ghes-3.10 and later; ghes-3.9
	// has no such path, and the fake answers it as any unknown route.
	jit bool
	// list runners' name query parameter (both scopes): in ghes-3.11 and
	// later; the ghes-3.9 and 3.10 descriptions list only per_page and
	// page. What such a server does with a name it does not know is not
	// described: the fake ignores it, as GitHub ignores unknown query
	// parameters, and answers an unfiltered page.
	nameFilter bool
}

// Observed is an answer the fake gives where a version's description
// documents none: what such servers were seen to answer.
type Observed struct {
	// Operation is the start of the operation ids it applies to.
	Operation string
	Status    int
	Why       string
}

// ObservedAnswers lists the answers the fake gives as version does
// although its description does not document them. GHES 3.9 to 3.12 answer
// a delete of a runner that runs a job 422 ("still running a job") and
// (3.10 to 3.12, the ones with just-in-time runners) a generate-jitconfig
// for a name another runner has 409, as github.com and GHES 3.13 on do and
// document; the 3.9 to 3.12 descriptions list only 204 for the delete and
// 201, 404 and 422 for generate-jitconfig (@octokit/openapi 16.6.0,
// generated/ghes-3.9.json to ghes-3.12.json). internal/testenv/ghapi
// allows these and no other undocumented statuses, and internal/github
// reads them as the documented ones (ErrBusy, ErrNameTaken).
func ObservedAnswers(version string) []Observed {
	minor, ok := ghesMinor(version)
	if !ok || minor >= 13 {
		return nil
	}
	out := []Observed{{Operation: "actions/delete-self-hosted-runner-from-", Status: 422,
		Why: "422 for deleting a runner that runs a job, observed on GHES 3.9 to 3.12 and documented from 3.13 on"}}
	if minor >= 10 {
		out = append(out, Observed{Operation: "actions/generate-runner-jitconfig-for-", Status: 409,
			Why: "409 for a just-in-time runner whose name is taken, observed on GHES 3.10 to 3.12 and documented from 3.13 on"})
	}
	return out
}

// featuresOf parses Options.Version.
func featuresOf(version string) (features, error) {
	if version == "" || version == APIGitHubCom {
		return features{jit: true, nameFilter: true}, nil
	}
	minor, ok := ghesMinor(version)
	lo, _ := ghesMinor(OldestGHES)
	hi, _ := ghesMinor(NewestGHES)
	if !ok || minor < lo || minor > hi {
		return features{}, fmt.Errorf("fakegithub: Version: %q is not one the fake models: %s, or %s to %s", version, APIGitHubCom, OldestGHES, NewestGHES)
	}
	return features{jit: minor >= 10, nameFilter: minor >= 11}, nil
}

// ghesMinor reads "ghes-3.N" (the description's file name) as N.
func ghesMinor(version string) (int, bool) {
	rest, ok := strings.CutPrefix(version, "ghes-3.")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == rest
}

// Version is the version the server was started as.
func (s *Server) Version() string { return s.version }

// Route is a REST API route the server serves.
type Route struct {
	Pattern string   // as Count takes it: "GET /orgs/{org}/actions/runners"
	Query   []string // the query parameters it reads
}

// Routes lists the REST API routes the server serves, beside the
// runner's own protocol, the OIDC issuer and release downloads, which are
// no part of the REST API.
func (s *Server) Routes() []Route { return slices.Clone(s.served) }
