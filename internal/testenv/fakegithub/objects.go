package fakegithub

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The REST API's objects the fake answers with, carrying every field the
// descriptions require (components/schemas integration, installation,
// simple-user, runner-groups-org): a client decoding them strictly, or
// the conformance suite, finds nothing missing. Values that mean nothing
// to the fake (timestamps, avatar URLs) are fixed and plausible.

// created is the fixed creation time of the App and its installations.
var created = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC).Format(time.RFC3339)

// apiRoot is the REST API root a request came in under, for the URLs
// inside objects: http://host/ or http://host/api/v3/ (GHES).
func apiRoot(r *http.Request) string {
	prefix, _ := r.Context().Value(prefixKey{}).(string)
	return "http://" + r.Host + prefix + "/"
}

// webRoot is the web address beside it: http://host/.
func webRoot(r *http.Request) string { return "http://" + r.Host + "/" }

// nodeID is a GraphQL global id of the legacy form, base64 of
// "<number>:<Type><id>", as GitHub still answers for these objects.
func nodeID(kind string, id int64) string {
	s := fmt.Sprintf("%02d:%s%d", len(kind), kind, id)
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// account is a user or organization as simple-user describes it.
func account(r *http.Request, login string, id int64, kind string) map[string]any {
	api, web := apiRoot(r), webRoot(r)
	path := "users/" + login
	if kind == "Organization" {
		path = "orgs/" + login
	}
	return map[string]any{
		"login": login, "id": id, "node_id": nodeID(kind, id), "type": kind, "site_admin": false,
		"avatar_url":          fmt.Sprintf("%savatars/u/%d?v=4", web, id),
		"gravatar_id":         "",
		"url":                 api + path,
		"html_url":            web + login,
		"followers_url":       api + "users/" + login + "/followers",
		"following_url":       api + "users/" + login + "/following{/other_user}",
		"gists_url":           api + "users/" + login + "/gists{/gist_id}",
		"starred_url":         api + "users/" + login + "/starred{/owner}{/repo}",
		"subscriptions_url":   api + "users/" + login + "/subscriptions",
		"organizations_url":   api + "users/" + login + "/orgs",
		"repos_url":           api + path + "/repos",
		"events_url":          api + "users/" + login + "/events{/privacy}",
		"received_events_url": api + "users/" + login + "/received_events",
	}
}

// appPermissions are the App's: runners of organizations and of
// repositories (Administration), re-running jobs (Actions, rerun.go), and
// metadata, which every App has.
var appPermissions = map[string]string{"organization_self_hosted_runners": "write", "administration": "write", "actions": "write", "metadata": "read"}

// appJSON is GET /app's integration.
func (s *Server) appJSON(r *http.Request) map[string]any {
	web := webRoot(r)
	return map[string]any{
		"id": s.AppID, "slug": "ghrunner-fake", "node_id": nodeID("App", s.AppID), "client_id": fmt.Sprintf("Iv1.%016x", s.AppID),
		"owner":        account(r, "ghrunner", 1, "Organization"),
		"name":         "ghrunner fake",
		"description":  "The App of a fake GitHub (ghrunner tests).",
		"external_url": "https://ghrunner.invalid", "html_url": web + "apps/ghrunner-fake",
		"created_at": created, "updated_at": created,
		"permissions": appPermissions, "events": []string{},
	}
}

// installationJSON is an installation as GET /orgs/{org}/installation and
// GET /repos/{owner}/{repo}/installation answer it.
func (s *Server) installationJSON(r *http.Request, in *installation) map[string]any {
	api, web := apiRoot(r), webRoot(r)
	selection := "all"
	if in.repos != nil {
		selection = "selected"
	}
	// The fake installs only on organizations; the account's id is
	// derived from the installation's, as the fake keeps no other.
	return map[string]any{
		"id": in.id, "app_id": s.AppID, "app_slug": "ghrunner-fake", "client_id": fmt.Sprintf("Iv1.%016x", s.AppID),
		"target_id": in.id + 5000, "target_type": "Organization",
		"account":              account(r, in.account, in.id+5000, "Organization"),
		"repository_selection": selection,
		"single_file_name":     nil,
		"access_tokens_url":    fmt.Sprintf("%sapp/installations/%d/access_tokens", api, in.id),
		"repositories_url":     api + "installation/repositories",
		"html_url":             fmt.Sprintf("%sorganizations/%s/settings/installations/%d", web, in.account, in.id),
		"events":               []string{},
		"permissions":          s.permissions(),
		"created_at":           created, "updated_at": created,
		"suspended_by": nil, "suspended_at": nil,
	}
}

// runnerGroupJSON is one runner group as GET /orgs/{org}/actions/runner-groups
// lists it (id is its position, 1 the Default group).
func runnerGroupJSON(r *http.Request, org string, id int, name string) map[string]any {
	base := fmt.Sprintf("%sorgs/%s/actions/runner-groups/%d", apiRoot(r), strings.ToLower(org), id)
	return map[string]any{
		"id": id, "name": name, "visibility": "all", "default": id == 1,
		"runners_url": base + "/runners", "hosted_runners_url": base + "/hosted-runners",
		"inherited": false, "allows_public_repositories": false,
		"restricted_to_workflows": false, "selected_workflows": []string{}, "workflow_restrictions_read_only": false,
	}
}
