package testenv

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ghrunner/terraform-provider-ghrunner"

// shipped are the main packages of what a user runs: the provider, the
// Lambda bundle, the agent and the operator's command.
var shipped = []string{module, module + "/lambdas", module + "/agent", module + "/cmd/ghrunner"}

// testWorld says whether a package belongs to the test world: this tree,
// the sandbox, or a test-helper package (named ...test, as statetest).
func testWorld(pkg string) bool {
	rel, ok := strings.CutPrefix(pkg, module+"/")
	if !ok {
		return false
	}
	last := rel[strings.LastIndex(rel, "/")+1:]
	return strings.HasPrefix(rel, "internal/testenv") || strings.HasPrefix(rel, "internal/sandbox") || strings.HasSuffix(last, "test")
}

func TestShippedBinariesImportNoTestWorld(t *testing.T) {
	for _, main := range shipped {
		// Every package the binary links, with what each imports, to name
		// the importer of an offending package.
		cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, main)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", main, err, stderr.String())
		}
		linked := 0
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			linked++
			for _, imp := range fields[1:] {
				if testWorld(imp) {
					t.Errorf("%s links the test-world package %s (imported by %s)", main, imp, fields[0])
				}
			}
		}
		if linked < 50 {
			t.Fatalf("go list -deps %s listed %d packages: not the dependency graph of a binary", main, linked)
		}
	}
}

func TestTestWorldIsRecognised(t *testing.T) {
	for pkg, want := range map[string]bool{
		module + "/internal/testenv/fakegithub":    true,
		module + "/internal/sandbox":               true,
		module + "/internal/state/statetest":       true,
		module + "/internal/state":                 false,
		module + "/lambdas/provision":              false,
		"github.com/aws/aws-sdk-go-v2/service/ec2": false,
	} {
		if got := testWorld(pkg); got != want {
			t.Errorf("testWorld(%s) = %v, want %v", pkg, got, want)
		}
	}
}
