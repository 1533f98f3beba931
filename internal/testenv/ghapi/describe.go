// Package ghapi reads GitHub's published REST API descriptions (the npm
// package @octokit/openapi: OpenAPI 3.0 documents for api.github.com and
// each GitHub Enterprise Server release) and validates requests and
// answers against them. Its tests hold the fake GitHub
// (internal/testenv/fakegithub) and the requests our client
// (internal/github) sends to the description of every version the fake
// models.
//
// scripts/ensure-openapi (make tools) installs the descriptions in
// tools/openapi/node_modules; tools/openapi/package.json pins three
// releases of the package, since each carries only the Enterprise Server
// releases GitHub supported when it was cut.
package ghapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Description is one version's REST API description. Only the parts the
// checks read are decoded, when first asked for: a description is 10 to
// 13 MB of JSON.
type Description struct {
	Version string // api.github.com or ghes-3.N
	File    string // where it was read from

	paths      map[string]map[string]json.RawMessage // path → method (or "parameters") → raw
	components map[string]map[string]json.RawMessage // schemas, parameters, responses, … → name → raw
}

// Operation is one method of one path.
type Operation struct {
	Method, Path string // "GET", "/orgs/{org}/actions/runners"
	ID           string // operationId
	Params       []Param
	// Responses maps a documented status ("200", "404") to the schema of
	// its application/json content (nil: no JSON body).
	Responses map[string]json.RawMessage
	// Body is the request body's application/json schema (nil: none).
	Body         json.RawMessage
	BodyRequired bool
}

// Param is one documented parameter.
type Param struct {
	Name, In string // in: path, query, header
	Required bool
	Schema   json.RawMessage
}

// Param returns the parameter of that name and place.
func (op *Operation) Param(in, name string) (Param, bool) {
	for _, p := range op.Params {
		if p.In == in && p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Root finds tools/openapi/node_modules from the working directory (a
// test runs in its package's directory) up to the module root.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			nm := filepath.Join(dir, "tools", "openapi", "node_modules")
			if _, err := os.Stat(filepath.Join(nm, ".package-lock.json")); err != nil {
				return "", fmt.Errorf("GitHub's REST API descriptions are not installed in %s: run make tools (or scripts/ensure-openapi; it needs Node.js 18+ and npm)", nm)
			}
			return filepath.Join(dir, "tools", "openapi"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("ghapi: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Files maps each version described to its file: from the newest release
// of the package that has it (the releases pinned in
// tools/openapi/package.json, read in the order of their versions).
func Files() (map[string]string, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(root, "package.json"))
	if err != nil {
		return nil, err
	}
	var pkg struct{ Dependencies map[string]string }
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return nil, fmt.Errorf("tools/openapi/package.json: %w", err)
	}
	type release struct {
		dir     string
		version []int
	}
	var releases []release
	for name, spec := range pkg.Dependencies {
		_, v, _ := strings.Cut(strings.TrimPrefix(spec, "npm:@octokit/openapi"), "@")
		if v == "" {
			v = spec
		}
		var nums []int
		for _, part := range strings.Split(v, ".") {
			n, err := strconv.Atoi(part)
			if err != nil {
				return nil, fmt.Errorf("tools/openapi/package.json: %s: %q is not an exact version", name, spec)
			}
			nums = append(nums, n)
		}
		releases = append(releases, release{filepath.Join(root, "node_modules", name, "generated"), nums})
	}
	sort.Slice(releases, func(i, j int) bool { // newest first
		a, b := releases[i].version, releases[j].version
		for k := range min(len(a), len(b)) {
			if a[k] != b[k] {
				return a[k] > b[k]
			}
		}
		return len(a) > len(b)
	})
	out := map[string]string{}
	for _, r := range releases {
		matches, err := filepath.Glob(filepath.Join(r.dir, "*.json"))
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			v := strings.TrimSuffix(filepath.Base(m), ".json")
			if v != "api.github.com" && !strings.HasPrefix(v, "ghes-") || strings.Contains(v, ".deref") {
				continue
			}
			if _, seen := out[v]; !seen {
				out[v] = m
			}
		}
	}
	return out, nil
}

// Load reads a description file.
func Load(version, file string) (*Description, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc struct {
		OpenAPI    string                                `json:"openapi"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components map[string]map[string]json.RawMessage `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.0.") {
		// The schema conversion (schema.go) reads OpenAPI 3.0's nullable.
		return nil, fmt.Errorf("%s: OpenAPI %q, want 3.0.x", file, doc.OpenAPI)
	}
	return &Description{Version: version, File: file, paths: doc.Paths, components: doc.Components}, nil
}

// Operation finds the operation of a method and a path template (nil
// when the description has none). The
// template's parameter names need not be the description's: the shapes
// are compared ("/repos/{org}/{repo}/x/{id}" is "/repos/{owner}/{repo}/x/{runner_id}").
func (d *Description) Operation(method, template string) (*Operation, error) {
	want := shape(template)
	for path := range d.paths {
		if shape(path) == want {
			return d.operation(method, path)
		}
	}
	return nil, nil
}

// Match finds the operation a concrete request path is for (nil when
// none: the server would answer 404) (literal
// segments are preferred to parameters: .../runners/remove-token is not
// .../runners/{runner_id}) and the values of its path parameters.
func (d *Description) Match(method, urlPath string) (*Operation, map[string]string, error) {
	segs := strings.Split(strings.Trim(urlPath, "/"), "/")
	best, bestLiterals := "", -1
	for path, ops := range d.paths {
		if _, ok := ops[strings.ToLower(method)]; !ok {
			continue
		}
		tsegs := strings.Split(strings.Trim(path, "/"), "/")
		if len(tsegs) != len(segs) {
			continue
		}
		literals := 0
		for i, t := range tsegs {
			if isParam(t) {
				continue
			}
			if t != segs[i] {
				literals = -1
				break
			}
			literals++
		}
		if literals > bestLiterals {
			best, bestLiterals = path, literals
		}
	}
	if best == "" {
		return nil, nil, nil
	}
	values := map[string]string{}
	for i, t := range strings.Split(strings.Trim(best, "/"), "/") {
		if isParam(t) {
			values[t[1:len(t)-1]] = segs[i]
		}
	}
	op, err := d.operation(method, best)
	return op, values, err
}

func isParam(seg string) bool { return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") }

func shape(template string) string {
	segs := strings.Split(template, "/")
	for i, s := range segs {
		if isParam(s) {
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/")
}

// operation decodes one operation, its $refs to parameters, responses
// and request bodies followed (schemas keep theirs: schema.go resolves
// them).
func (d *Description) operation(method, path string) (*Operation, error) {
	raw, ok := d.paths[path][strings.ToLower(method)]
	if !ok {
		return nil, nil
	}
	var o struct {
		OperationID string                     `json:"operationId"`
		Parameters  []json.RawMessage          `json:"parameters"`
		Responses   map[string]json.RawMessage `json:"responses"`
		RequestBody json.RawMessage            `json:"requestBody"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	op := &Operation{Method: strings.ToUpper(method), Path: path, ID: o.OperationID, Responses: map[string]json.RawMessage{}}
	var shared []json.RawMessage // path-level parameters
	if p, ok := d.paths[path]["parameters"]; ok {
		if err := json.Unmarshal(p, &shared); err != nil {
			return nil, err
		}
	}
	for _, p := range append(shared, o.Parameters...) {
		var param struct {
			Name, In string
			Required bool
			Schema   json.RawMessage
		}
		if err := d.deref(p, &param); err != nil {
			return nil, fmt.Errorf("%s %s: parameter: %w", method, path, err)
		}
		op.Params = append(op.Params, Param{Name: param.Name, In: param.In, Required: param.Required, Schema: param.Schema})
	}
	for status, r := range o.Responses {
		var resp struct {
			Content map[string]struct{ Schema json.RawMessage }
		}
		if err := d.deref(r, &resp); err != nil {
			return nil, fmt.Errorf("%s %s: response %s: %w", method, path, status, err)
		}
		op.Responses[status] = resp.Content["application/json"].Schema
	}
	if len(o.RequestBody) > 0 {
		var body struct {
			Required bool
			Content  map[string]struct{ Schema json.RawMessage }
		}
		if err := d.deref(o.RequestBody, &body); err != nil {
			return nil, fmt.Errorf("%s %s: request body: %w", method, path, err)
		}
		op.Body, op.BodyRequired = body.Content["application/json"].Schema, body.Required
	}
	return op, nil
}

// deref decodes raw into v, following a "#/components/<kind>/<name>" $ref.
func (d *Description) deref(raw json.RawMessage, v any) error {
	var ref struct {
		Ref string `json:"$ref"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		return err
	}
	if ref.Ref != "" {
		target, err := d.component(ref.Ref)
		if err != nil {
			return err
		}
		raw = target
	}
	return json.Unmarshal(raw, v)
}

// component returns what a "#/components/<kind>/<name>" reference names.
func (d *Description) component(ref string) (json.RawMessage, error) {
	kind, name, ok := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
	if !ok || !strings.HasPrefix(ref, "#/components/") {
		return nil, fmt.Errorf("%s: a $ref outside #/components/", ref)
	}
	raw, ok := d.components[kind][name]
	if !ok {
		return nil, fmt.Errorf("%s: no such component", ref)
	}
	return raw, nil
}
