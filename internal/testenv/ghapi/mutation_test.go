package ghapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// The suite fails when the fake moves away from the description: each
// mutation (through the fake's test hooks Rewrite and ExtraRoutes) must be
// reported, naming what changed; a suite that let one through would
// pass whatever the fake did.
func TestTheSuiteReportsAFakeThatMovesAwayFromTheDescription(t *testing.T) {
	for _, m := range []struct {
		name string
		opts fakegithub.Options
		want string // in one of the problems
	}{{
		name: "a route the description does not have",
		opts: fakegithub.Options{ExtraRoutes: []string{"GET /orgs/{org}/actions/runners/{id}/jobs"}},
		want: "the fake serves GET /orgs/{org}/actions/runners/{id}/jobs, which the api.github.com description does not have",
	}, {
		name: "a route a GHES release does not have",
		opts: fakegithub.Options{Version: "ghes-3.9", ExtraRoutes: []string{"POST /orgs/{org}/actions/runners/generate-jitconfig"}},
		want: "the fake serves POST /orgs/{org}/actions/runners/generate-jitconfig, which the ghes-3.9 description does not have",
	}, {
		name: "a status the operation does not document",
		opts: fakegithub.Options{Rewrite: func(route string, status int, body any) (int, any) {
			if route == "POST /orgs/{org}/actions/runners/registration-token" && status == http.StatusCreated {
				return http.StatusOK, body
			}
			return status, body
		}},
		want: "status 200 is not documented for the operation (documented: 201)",
	}, {
		name: "a runner without a required field",
		opts: fakegithub.Options{Rewrite: func(route string, status int, body any) (int, any) {
			if route == "GET /orgs/{org}/actions/runners" && status == http.StatusOK {
				for _, r := range body.(map[string]any)["runners"].([]map[string]any) {
					delete(r, "busy")
				}
			}
			return status, body
		}},
		want: "missing property 'busy'",
	}, {
		name: "a field of the wrong type",
		opts: fakegithub.Options{Rewrite: func(route string, status int, body any) (int, any) {
			if route == "GET /orgs/{org}/installation" && status == http.StatusOK {
				body.(map[string]any)["repository_selection"] = "some"
			}
			return status, body
		}},
		want: "repository_selection",
	}} {
		t.Run(m.name, func(t *testing.T) {
			problems := conformance(t, m.opts)
			for _, p := range problems {
				if strings.Contains(p, m.want) {
					return
				}
			}
			t.Fatalf("no problem says %q; the suite reported:\n%s", m.want, strings.Join(problems, "\n"))
		})
	}
}
