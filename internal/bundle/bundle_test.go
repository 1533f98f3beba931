package bundle

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ghrunner/terraform-provider-ghrunner"

// linked lists the packages a main package links when built as shipped.
func linked(t *testing.T, pkg, tags string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-tags", tags, pkg)
	cmd.Env = append(os.Environ(), "GOOS=linux", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// What makes the shipped binaries heavy without doing anything for them:
// net/rpc (its reflection keeps every exported method alive) and the SDK
// packages of services only deployment calls.
var heavy = []string{
	"net/rpc",
	"github.com/aws/aws-sdk-go-v2/service/iam",
	"github.com/aws/aws-sdk-go-v2/service/s3",
	"github.com/aws/aws-sdk-go-v2/service/lambda",
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs",
	"github.com/aws/aws-sdk-go-v2/service/scheduler",
}

func TestTheBundleAndTheAgentLinkNothingTheyNeverCall(t *testing.T) {
	// The agent sends its logs to CloudWatch Logs itself (agent/logship):
	// it calls that service, the bundle does not.
	calls := map[string][]string{module + "/lambdas": nil, module + "/agent": {"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"}}
	for main, needs := range calls {
		deps := linked(t, main, BuildTags)
		if len(deps) < 50 {
			t.Fatalf("go list -deps %s listed %d packages: not a binary's dependency graph", main, len(deps))
		}
		for _, pkg := range heavy {
			if slices.Contains(deps, pkg) && !slices.Contains(needs, pkg) {
				t.Errorf("%s links %s", main, pkg)
			}
		}
	}
}

func TestWithoutTheBuildTagTheBundleLinksNetRPC(t *testing.T) {
	// The tag is what keeps net/rpc out: if aws-lambda-go ever renames
	// it, the check above would pass for the wrong reason.
	if !slices.Contains(linked(t, module+"/lambdas", ""), "net/rpc") {
		t.Fatal("the bundle links no net/rpc even without lambda.norpc: the tag does nothing any more")
	}
}

// The artifacts `make bundle` wrote (make test builds them first) stay
// within their budgets: a smaller zip uploads and cold-starts faster.
func TestTheArtifactsStayWithinTheirBudgets(t *testing.T) {
	const mb = 1 << 20
	for _, arch := range Architectures {
		for name, budget := range map[string]int64{FunctionZip(arch): 12 * mb, Agent(arch): 14 * mb} {
			fi, err := os.Stat(filepath.Join("..", "..", "provider", "assets", name))
			if err != nil {
				t.Fatalf("%v: run make bundle", err)
			}
			if fi.Size() > budget {
				t.Errorf("%s is %.1f MB, over its budget of %d MB", name, float64(fi.Size())/mb, budget/mb)
			}
		}
	}
}
