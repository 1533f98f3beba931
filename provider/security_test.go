package provider

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// secretish matches attribute, variable and output names that would carry a
// credential.
var secretish = regexp.MustCompile(`(?i)(token|secret|password|private_?key|pem|credential|access_?key)`)

// TestNoSecretAttributes: no attribute of the provider, its resources or its
// data source takes or exposes a credential. The GitHub App key or token is
// never in Terraform configuration or state: functions read it at run time
// from the SSM SecureString whose *name* github_parameter holds; AWS
// credentials come from the environment or a profile name.
func TestNoSecretAttributes(t *testing.T) {
	srv, err := providerserver.NewProtocol6WithError(New("test")())()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*tfprotov6.Schema{"provider": resp.Provider}
	for n, s := range resp.ResourceSchemas {
		schemas["resource "+n] = s
	}
	for n, s := range resp.DataSourceSchemas {
		schemas["data "+n] = s
	}
	if len(schemas) < 7 {
		t.Fatalf("only %d schemas", len(schemas))
	}
	var walk func(where string, b *tfprotov6.SchemaBlock)
	walkAttrs := func(where string, attrs []*tfprotov6.SchemaAttribute) {
		for _, a := range attrs {
			if secretish.MatchString(a.Name) || a.Sensitive {
				t.Errorf("%s.%s looks like it holds a credential", where, a.Name)
			}
			if a.NestedType != nil {
				for _, n := range a.NestedType.Attributes {
					if secretish.MatchString(n.Name) || n.Sensitive {
						t.Errorf("%s.%s.%s looks like it holds a credential", where, a.Name, n.Name)
					}
				}
			}
		}
	}
	walk = func(where string, b *tfprotov6.SchemaBlock) {
		if b == nil {
			return
		}
		walkAttrs(where, b.Attributes)
		for _, nb := range b.BlockTypes {
			walk(where+"."+nb.TypeName, nb.Block)
		}
	}
	for where, s := range schemas {
		walk(where, s.Block)
	}

	// The GitHub credentials: a parameter name, documented as a SecureString.
	fn := resp.ResourceSchemas["ghrunner_function"]
	found := false
	for _, a := range fn.Block.Attributes {
		if a.Name == "github_parameter" {
			found = true
			if !strings.Contains(a.Description, "SecureString") {
				t.Errorf("github_parameter does not say it names an SSM SecureString: %q", a.Description)
			}
		}
	}
	if !found {
		t.Error("ghrunner_function has no github_parameter")
	}
}

// TestModuleTakesAndGivesNoSecret: the runner-pool module has no variable or
// output that carries a credential, and its outputs are names, ARNs, URLs
// and ids only.
func TestModuleTakesAndGivesNoSecret(t *testing.T) {
	for _, file := range []string{"../modules/runner-pool/variables.tf", "../modules/runner-pool/outputs.tf"} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blocks := regexp.MustCompile(`(?m)^(variable|output) "([^"]+)"`).FindAllStringSubmatch(string(raw), -1)
		if len(blocks) == 0 {
			t.Fatalf("%s: no variables or outputs found", file)
		}
		for _, b := range blocks {
			if secretish.MatchString(b[2]) {
				t.Errorf("%s: %s %q looks like a credential", file, b[1], b[2])
			}
		}
		if strings.HasSuffix(file, "outputs.tf") {
			for _, v := range regexp.MustCompile(`(?m)^\s*value\s*=\s*(.+)$`).FindAllStringSubmatch(string(raw), -1) {
				if !regexp.MustCompile(`\.(name|[a-z]+_names|arn|[a-z_]+_arn|url|launch_template_id|log_group)\s*[})]?\s*$`).MatchString(v[1]) {
					t.Errorf("%s: output value %q is not a name, ARN, URL or id", file, v[1])
				}
			}
		}
	}
}
