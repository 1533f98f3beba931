package ghapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// OpenAPI 3.0's schema objects are JSON Schema draft 4 (really draft
// wright-00) with additions; the few that change what validates are
// translated before compiling with santhosh-tekuri/jsonschema:
//   - nullable: true → anyOf [the schema, {type: null}];
//   - $ref siblings are ignored by both (draft 4 as OpenAPI 3.0 says);
//   - example, readOnly, discriminator and the like are annotations,
//     which draft 4 ignores as unknown keywords;
//   - an empty required list, which draft 4's meta-schema refuses, is
//     dropped (it requires nothing).
//
// Only the components a schema reaches are decoded and put into the
// document compiled, under the same pointers (#/components/schemas/x).

const docURL = "https://ghapi.invalid/description.json"

var cacheMu sync.Mutex

// schemas caches compiled schemas per description and raw schema.
var schemas = map[*Description]map[string]*jsonschema.Schema{}

// Schema compiles a schema of the description (raw: as it appears in an
// operation, $refs and all).
func (d *Description) Schema(raw json.RawMessage) (*jsonschema.Schema, error) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if s, ok := schemas[d][string(raw)]; ok {
		return s, nil
	}
	root, err := decodeNumbers(raw)
	if err != nil {
		return nil, err
	}
	comps := map[string]any{}
	var collect func(v any) error
	collect = func(v any) error {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				name, isSchema := strings.CutPrefix(ref, "#/components/schemas/")
				if !isSchema {
					return fmt.Errorf("%s: a schema $ref outside #/components/schemas/", ref)
				}
				if _, done := comps[name]; !done {
					c, err := d.component(ref)
					if err != nil {
						return err
					}
					cv, err := decodeNumbers(c)
					if err != nil {
						return err
					}
					comps[name] = nil // before the walk: schemas refer to themselves
					if err := collect(cv); err != nil {
						return err
					}
					comps[name] = openAPIToJSONSchema(cv)
				}
			}
			for _, child := range v {
				if err := collect(child); err != nil {
					return err
				}
			}
		case []any:
			for _, child := range v {
				if err := collect(child); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := collect(root); err != nil {
		return nil, err
	}
	doc := map[string]any{"root": openAPIToJSONSchema(root), "components": map[string]any{"schemas": comps}}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.AssertFormat()
	if err := c.AddResource(docURL, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(docURL + "#/root")
	if err != nil {
		return nil, fmt.Errorf("%s: compile a schema: %w", d.Version, err)
	}
	if schemas[d] == nil {
		schemas[d] = map[string]*jsonschema.Schema{}
	}
	schemas[d][string(raw)] = s
	return s, nil
}

// ValidateJSON validates a JSON document (a body) against a schema of the
// description.
func (d *Description) ValidateJSON(schema json.RawMessage, body []byte) error {
	s, err := d.Schema(schema)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.Validate(v)
}

// ValidateParam validates a parameter's value (query and path values are
// strings: they are read as the schema's type first).
func (d *Description) ValidateParam(p Param, value string) error {
	s, err := d.Schema(p.Schema)
	if err != nil {
		return err
	}
	var typ struct{ Type string }
	json.Unmarshal(p.Schema, &typ)
	var v any = value
	switch typ.Type {
	case "integer", "number":
		v = json.Number(value)
		if _, err := strconv.ParseFloat(value, 64); err != nil {
			return fmt.Errorf("%s=%q: not a number", p.Name, value)
		}
	case "boolean":
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("%s=%q: not a boolean", p.Name, value)
		}
		v = b
	}
	return s.Validate(v)
}

func decodeNumbers(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// openAPIToJSONSchema translates a decoded schema (see above), walking
// only into the keywords that hold schemas: property names such as
// "default" or "nullable" are names there, not keywords.
func openAPIToJSONSchema(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(m))
	for k, child := range m {
		switch k {
		case "items", "additionalProperties", "not":
			out[k] = openAPIToJSONSchema(child)
		case "allOf", "anyOf", "oneOf":
			list, _ := child.([]any)
			conv := make([]any, len(list))
			for i, c := range list {
				conv[i] = openAPIToJSONSchema(c)
			}
			out[k] = conv
		case "properties", "patternProperties":
			props, _ := child.(map[string]any)
			conv := make(map[string]any, len(props))
			for name, c := range props {
				conv[name] = openAPIToJSONSchema(c)
			}
			out[k] = conv
		default:
			out[k] = child
		}
	}
	if req, ok := out["required"].([]any); ok && len(req) == 0 {
		delete(out, "required")
	}
	nullable, _ := out["nullable"].(bool)
	delete(out, "nullable")
	if nullable {
		return map[string]any{"anyOf": []any{out, map[string]any{"type": "null"}}}
	}
	return out
}
