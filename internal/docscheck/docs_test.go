// Package docscheck holds the handwritten docs to the code: what README,
// docs/{design,security,operations,getting-started}.md, the module's README
// and variables and the workflow example state about the functions,
// defaults and validation rules is read from the text and compared with
// what the code does. The generated docs (docs/resources, docs/data-sources)
// are the schemas' own words: make docs-compare keeps them current.
package docscheck

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/provider"
)

const repo = "../../"

// handwritten are the docs written by hand that state facts about the code.
var handwritten = []string{"README.md", "docs/design.md", "docs/security.md", "docs/operations.md", "docs/getting-started.md", "docs/scale-sets.md",
	"docs/index.md", "modules/runner-pool/README.md", "modules/runner-pool/variables.tf", "modules/runner-pool/outputs.tf",
	"examples/workflows/README.md", "docs-templates/index.md.tmpl"}

func read(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(repo + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

var numbers = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}

// countedFunctions is "five functions", "five control-plane functions",
// "five Lambda functions".
var countedFunctions = regexp.MustCompile(`(?i)\b(one|two|three|four|five|six|seven|eight)\s+(?:control-plane\s+|lambda\s+)?functions\b`)

// Every "N functions" says how many handlers the bundle has, unless it is
// the two a workflow invokes (provision and release, named beside it); the
// module's README and the guide name each function.
func TestTheDocsCountAndNameTheFunctionsTheBundleHas(t *testing.T) {
	for _, name := range handwritten {
		text, err := os.ReadFile(repo + name)
		if os.IsNotExist(err) {
			continue // docs-templates/index.md.tmpl may be absent
		}
		for _, m := range countedFunctions.FindAllStringSubmatchIndex(string(text), -1) {
			n := numbers[strings.ToLower(string(text[m[2]:m[3]]))]
			context := string(text[max(0, m[0]-400):min(len(text), m[1]+200)])
			invoked := n == 2 && strings.Contains(context, "provision") && strings.Contains(context, "release")
			if n != len(bundle.Handlers) && !invoked {
				t.Errorf("%s: %q, but the bundle has %d handlers %v", name, text[m[0]:m[1]], len(bundle.Handlers), bundle.Handlers)
			}
		}
	}
	module, guide := read(t, "modules/runner-pool/README.md"), read(t, "docs/getting-started.md")
	for _, h := range bundle.Handlers {
		if !strings.Contains(module, "`-"+h+"`") && !strings.Contains(module, "`<prefix>-"+h+"`") {
			t.Errorf("modules/runner-pool/README.md does not name the function <prefix>-%s", h)
		}
		if !strings.Contains(guide, "`ci-"+h+"`") {
			t.Errorf("docs/getting-started.md does not name the function ci-%s", h)
		}
	}
}

// variables is variables.tf's variables: name to the default's text ("" for
// none), and the pools object's optional(type, default) defaults.
func variables(t *testing.T) (defaultsOf map[string]string, poolDefaults map[string]string) {
	text := read(t, "modules/runner-pool/variables.tf")
	defaultsOf, poolDefaults = map[string]string{}, map[string]string{}
	for _, block := range regexp.MustCompile(`(?ms)^variable "([^"]+)" \{\n(.*?)^\}`).FindAllStringSubmatch(text, -1) {
		d := regexp.MustCompile(`(?m)^  default\s*=\s*(.+)$`).FindStringSubmatch(block[2])
		defaultsOf[block[1]] = ""
		if d != nil {
			defaultsOf[block[1]] = strings.Trim(strings.TrimSpace(d[1]), `"`)
		}
		if block[1] == "pools" {
			for _, o := range regexp.MustCompile(`(?m)^    (\w+)\s*=\s*optional\([a-z]+,\s*(.+)\)$`).FindAllStringSubmatch(block[2], -1) {
				poolDefaults[o[1]] = strings.Trim(o[2], `"`)
			}
		}
	}
	if len(defaultsOf) < 10 || len(poolDefaults) < 5 {
		t.Fatalf("read %d variables and %d pool defaults from variables.tf: has its layout changed?", len(defaultsOf), len(poolDefaults))
	}
	return defaultsOf, poolDefaults
}

// The module README's inputs table lists every variable, with the default
// variables.tf gives it ("required" for none).
func TestTheModuleREADMEStatesEachInputsDefault(t *testing.T) {
	vars, _ := variables(t)
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| .* \\| ([^|]+) \\|$")
	listed := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(read(t, "modules/runner-pool/README.md"), -1) {
		name, stated := m[1], strings.TrimSpace(m[2])
		def, ok := vars[name]
		if !ok {
			continue // the outputs' or another table's row
		}
		listed[name] = true
		switch first := regexp.MustCompile("`([^`]*)`").FindStringSubmatch(stated); {
		case def == "" && stated != "required":
			t.Errorf("README: %s's default is %q; variables.tf has none (required)", name, stated)
		case def != "" && (first == nil || first[1] != def):
			t.Errorf("README: %s's default is %q; variables.tf says %s", name, stated, def)
		}
	}
	for name := range vars {
		if !listed[name] {
			t.Errorf("README's inputs table lacks the variable %s", name)
		}
	}
}

func poolSchema(t *testing.T) schema.Schema {
	t.Helper()
	p := provider.New("test")()
	for _, f := range p.Resources(context.Background()) {
		r := f()
		var meta resource.MetadataResponse
		r.Metadata(context.Background(), resource.MetadataRequest{ProviderTypeName: "ghrunner"}, &meta)
		if meta.TypeName != "ghrunner_pool" {
			continue
		}
		var s resource.SchemaResponse
		r.Schema(context.Background(), resource.SchemaRequest{}, &s)
		return s.Schema
	}
	t.Fatal("the provider has no ghrunner_pool")
	return schema.Schema{}
}

// staticDefault is an attribute's static default as HCL writes it.
func staticDefault(t *testing.T, a schema.Attribute) (string, bool) {
	ctx := context.Background()
	switch a := a.(type) {
	case schema.StringAttribute:
		if a.Default != nil {
			var r defaults.StringResponse
			a.Default.DefaultString(ctx, defaults.StringRequest{}, &r)
			return r.PlanValue.ValueString(), true
		}
	case schema.Int64Attribute:
		if a.Default != nil {
			r := defaults.Int64Response{PlanValue: types.Int64Null()}
			a.Default.DefaultInt64(ctx, defaults.Int64Request{}, &r)
			return fmt.Sprint(r.PlanValue.ValueInt64()), true
		}
	case schema.BoolAttribute:
		if a.Default != nil {
			var r defaults.BoolResponse
			a.Default.DefaultBool(ctx, defaults.BoolRequest{}, &r)
			return fmt.Sprint(r.PlanValue.ValueBool()), true
		}
	}
	return "", false
}

// The module's pools object defaults what ghrunner_pool defaults to the
// same values (max_instances 20, usage_class spot, ...), and names pools,
// scale sets and usage classes by the rules ghrunner_pool has (their one
// home, internal/state: the module is HCL and writes them out).
func TestTheModulesPoolDefaultsAndNameRuleAreThePoolResources(t *testing.T) {
	_, pool := variables(t)
	s := poolSchema(t)
	compared := 0
	for name, def := range pool {
		a, ok := s.Attributes[name]
		if !ok {
			continue // idle_windows' and timings' own fields
		}
		want, ok := staticDefault(t, a)
		if !ok {
			t.Errorf("variables.tf defaults pools[*].%s to %s; ghrunner_pool has no static default for it", name, def)
			continue
		}
		compared++
		if want != def {
			t.Errorf("variables.tf defaults pools[*].%s to %s; ghrunner_pool to %s", name, def, want)
		}
	}
	if compared < 5 || pool["max_instances"] == "" {
		t.Errorf("compared %d pool defaults (max_instances %q): has variables.tf's layout changed?", compared, pool["max_instances"])
	}
	rule := regexp.MustCompile(`regex\("([^"]+)", name\)`).FindStringSubmatch(read(t, "modules/runner-pool/variables.tf"))
	name := s.Attributes["name"].(schema.StringAttribute)
	if rule == nil || len(name.Validators) != 1 {
		t.Fatalf("variables.tf's pool name rule %v, ghrunner_pool's name validators %v", rule, name.Validators)
	}
	// The module writes out the rules it cannot have the provider's Go
	// check for it: each as its one home in internal/state has it.
	if rule[1] != state.PoolNamePattern {
		t.Errorf("variables.tf's pool name rule is %s; state.PoolNamePattern is %s", rule[1], state.PoolNamePattern)
	}
	if ss := regexp.MustCompile(`regex\("([^"]+)", p\.scale_set\.name\)`).FindStringSubmatch(read(t, "modules/runner-pool/variables.tf")); ss == nil || ss[1] != state.ScaleSetNamePattern {
		t.Errorf("variables.tf's scale set name rule %v; state.ScaleSetNamePattern is %s", ss, state.ScaleSetNamePattern)
	}
	classes := regexp.MustCompile(`contains\(\[([^\]]*)\], p\.usage_class\)`).FindStringSubmatch(read(t, "modules/runner-pool/variables.tf"))
	if want := `"` + strings.Join(state.UsageClasses, `", "`) + `"`; classes == nil || classes[1] != want {
		t.Errorf("variables.tf's usage classes %v; state.UsageClasses are %s", classes, want)
	}
	module := regexp.MustCompile(rule[1])
	for _, sample := range []string{"linux", "linux-large_2", strings.Repeat("a", 64), strings.Repeat("a", 65), "", "a.b", "a b", "gpu/x"} {
		var r validator.StringResponse
		name.Validators[0].ValidateString(context.Background(), validator.StringRequest{ConfigValue: types.StringValue(sample)}, &r)
		if module.MatchString(sample) != !r.Diagnostics.HasError() {
			t.Errorf("pool name %q: the module accepts it %t, ghrunner_pool %t", sample, module.MatchString(sample), !r.Diagnostics.HasError())
		}
	}
}

// Schedules as the docs say them: rate(1 minute) is "every minute".
func spoken(rate string) string {
	m := regexp.MustCompile(`^rate\((\d+) minutes?\)$`).FindStringSubmatch(rate)
	if m == nil {
		return rate
	}
	if m[1] == "1" {
		return "every minute"
	}
	return "every " + m[1] + " minutes"
}

// design.md and operations.md say how often refresh runs by default: the
// module's refresh_schedule default; the audience the docs name is the
// functions' default.
func TestTheDocsStateTheModulesScheduleAndAudienceDefaults(t *testing.T) {
	vars, _ := variables(t)
	refresh := spoken(vars["refresh_schedule"])
	if !strings.Contains(read(t, "docs/design.md"), "**refresh** ("+refresh+" by default, the module's `refresh_schedule`)") {
		t.Errorf("docs/design.md does not say refresh runs %s by default (refresh_schedule = %s)", refresh, vars["refresh_schedule"])
	}
	if !regexp.MustCompile(`(?m)^\| refresh \([^)]*\) \| ` + refresh + ` \|`).MatchString(read(t, "docs/operations.md")) {
		t.Errorf("docs/operations.md's cost table does not run refresh %s", refresh)
	}
	if vars["oidc_audience"] != idtoken.DefaultAudience ||
		!strings.Contains(read(t, "examples/workflows/README.md"), "(`oidc_audience`, default `"+idtoken.DefaultAudience+"`)") {
		t.Errorf("oidc_audience defaults to %q in variables.tf, %q in the functions, and examples/workflows/README.md must say so", vars["oidc_audience"], idtoken.DefaultAudience)
	}
}

// examples/workflows/README.md's payload rules are provision's: runId up
// to 100 characters, timeoutSeconds 30 to 900 (the ubuntu-slim advice
// rests on the 900).
func TestTheWorkflowREADMEStatesProvisionsPayloadRules(t *testing.T) {
	text := read(t, "examples/workflows/README.md")
	for _, want := range []string{"`runId` (letters, digits, `.`, `_`, `-`, up to 100, starting with a letter or\ndigit)", "(default 600, at most 900)"} {
		if !strings.Contains(text, want) {
			t.Errorf("examples/workflows/README.md no longer says %q: keep the rule beside its test", want)
		}
	}
	payload := func(runID string, timeout int) error {
		_, err := provision.ParsePayload([]byte(fmt.Sprintf(`{"runId":%q,"pool":"linux","timeoutSeconds":%d}`, runID, timeout)))
		return err
	}
	if err := payload("a"+strings.Repeat("b", 99), 900); err != nil {
		t.Errorf("a runId of 100 characters and timeoutSeconds 900: %v", err)
	}
	if payload("a"+strings.Repeat("b", 100), 900) == nil || payload("-a", 900) == nil || payload("a", 901) == nil || payload("a", 29) == nil {
		t.Error("provision accepts a runId of 101 characters, one starting with '-', or timeoutSeconds outside 30 to 900")
	}
}
