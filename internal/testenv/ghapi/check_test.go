package ghapi_test

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/ghapi"
)

// The conformance checks: each returns what disagrees with the
// description, one sentence per problem.

// allowedStatus says why the fake may answer a status an operation does
// not document; "" when it may not. GitHub's REST docs describe the
// first five once for every route (authentication, troubleshooting, rate
// limits), and the descriptions list them on few operations. Their
// bodies must still be GitHub's basic-error.
//
// An answer a version was observed to give where its description documents
// none (fakegithub.ObservedAnswers) is allowed for that version alone.
func allowedStatus(version string, op *ghapi.Operation, status int) string {
	for _, o := range fakegithub.ObservedAnswers(version) {
		if o.Status == status && strings.HasPrefix(op.ID, o.Operation) {
			return o.Why
		}
	}
	switch {
	case status == 401:
		return "401 Bad credentials / Requires authentication: answered on every route that needs authentication"
	case status == 403:
		return "403 for a token that may not act here (Resource not accessible by integration: a missing permission, or an installation that does not cover the repository) and for an exhausted primary rate limit: on every route"
	case status == 404:
		return "404 for an owner, installation or runner the credentials cannot see (GitHub does not tell missing from hidden): on every route"
	case status == 429:
		return "429 for a secondary rate limit: on every route"
	case status >= 500:
		return "server errors: on every route (the fake answers them only when a test injects them)"
	}
	return ""
}

// allowedQuery says why our client may send a query parameter the
// operation does not list; "" when it may not.
func allowedQuery(op *ghapi.Operation, name string) string {
	if name == "name" && strings.HasSuffix(op.Path, "/actions/runners") && op.Method == "GET" {
		// internal/github RunnerNamed.
		return "list runners' name filter, absent before GHES 3.11: such a server ignores it and RunnerNamed reads every page"
	}
	return ""
}

// checkRoutes: each route the fake serves is in the description, with
// the query parameters it reads; and the fake serves, of what it serves
// as api.github.com (reference), exactly what the description has.
func checkRoutes(d *ghapi.Description, served, reference []fakegithub.Route) []string {
	var problems []string
	byPattern := map[string]fakegithub.Route{}
	for _, rt := range served {
		byPattern[rt.Pattern] = rt
		method, path, _ := strings.Cut(rt.Pattern, " ")
		op, err := d.Operation(method, path)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if op == nil {
			problems = append(problems, fmt.Sprintf("the fake serves %s, which the %s description does not have", rt.Pattern, d.Version))
			continue
		}
		for _, q := range rt.Query {
			if _, ok := op.Param("query", q); !ok {
				problems = append(problems, fmt.Sprintf("the fake reads query parameter %s of %s, which the %s description does not list", q, rt.Pattern, d.Version))
			}
		}
	}
	for _, ref := range reference {
		method, path, _ := strings.Cut(ref.Pattern, " ")
		op, err := d.Operation(method, path)
		if err != nil || op == nil {
			continue
		}
		rt, ok := byPattern[ref.Pattern]
		if !ok {
			problems = append(problems, fmt.Sprintf("the %s description has %s, which the fake does not serve as %s", d.Version, ref.Pattern, d.Version))
			continue
		}
		for _, q := range ref.Query {
			if _, described := op.Param("query", q); described && !slices.Contains(rt.Query, q) {
				problems = append(problems, fmt.Sprintf("the %s description lists query parameter %s of %s, which the fake ignores as %s", d.Version, q, ref.Pattern, d.Version))
			}
		}
	}
	return problems
}

// checkExchange holds one recorded request and answer to the
// description: the answer always, the request when our client sent it.
func checkExchange(d *ghapi.Description, x ghapi.Exchange) []string {
	path := strings.TrimPrefix(x.Path, "/api/v3")
	where := fmt.Sprintf("%s %s → %d", x.Method, path, x.Status)
	op, pathValues, err := d.Match(x.Method, path)
	if err != nil {
		return []string{where + ": " + err.Error()}
	}
	if op == nil {
		if x.Status == 404 {
			return nil // GitHub's answer to a route it does not have
		}
		return []string{fmt.Sprintf("%s: the %s description has no such route", where, d.Version)}
	}
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s (%s, %s): ", where, op.ID, d.Version)+fmt.Sprintf(format, args...))
	}
	schema, documented := op.Responses[strconv.Itoa(x.Status)]
	if !documented {
		if allowedStatus(d.Version, op, x.Status) == "" {
			add("status %d is not documented for the operation (documented: %s)", x.Status, documentedStatuses(op))
		}
		// What GitHub sends with such a status: components/schemas/basic-error.
		schema = []byte(`{"$ref": "#/components/schemas/basic-error"}`)
	}
	switch {
	case schema == nil && len(strings.TrimSpace(string(x.ResponseBody))) > 0:
		add("a body where the description has none: %.200s", x.ResponseBody)
	case schema != nil && !strings.HasPrefix(x.ContentType, "application/json"):
		add("content type %q, want application/json", x.ContentType)
	case schema != nil:
		if err := d.ValidateJSON(schema, x.ResponseBody); err != nil {
			add("the answer does not validate against the operation's schema: %v", err)
		}
	}
	if x.Direct {
		return problems
	}
	for _, p := range op.Params {
		if p.In == "path" {
			if err := d.ValidateParam(p, pathValues[p.Name]); err != nil {
				add("path parameter %s: %v", p.Name, err)
			}
		}
	}
	q, err := url.ParseQuery(x.RawQuery)
	if err != nil {
		add("query %q: %v", x.RawQuery, err)
	}
	for name, values := range q {
		p, ok := op.Param("query", name)
		if !ok {
			if allowedQuery(op, name) == "" {
				add("our client sends query parameter %s, which the description does not list", name)
			}
			continue
		}
		for _, v := range values {
			if err := d.ValidateParam(p, v); err != nil {
				add("query parameter %s: %v", name, err)
			}
		}
	}
	for _, p := range op.Params {
		if p.In == "query" && p.Required && !q.Has(p.Name) {
			add("our client leaves out required query parameter %s", p.Name)
		}
	}
	body := strings.TrimSpace(string(x.RequestBody))
	switch {
	case op.Body == nil && body != "":
		add("our client sends a body where the description has none: %.200s", body)
	case op.Body != nil && body == "" && op.BodyRequired:
		add("our client sends no body where the description requires one")
	case op.Body != nil && body != "":
		if err := d.ValidateJSON(op.Body, x.RequestBody); err != nil {
			add("our client's request body does not validate: %v", err)
		}
	}
	return problems
}

func documentedStatuses(op *ghapi.Operation) string {
	var out []string
	for s := range op.Responses {
		out = append(out, s)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
