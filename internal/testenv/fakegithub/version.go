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
