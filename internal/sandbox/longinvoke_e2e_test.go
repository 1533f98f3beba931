package sandbox_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// Issue 37, item 4: a long synchronous provision lost its connection. The
// front endpoint resets an Invoke's connection after 4 s without a byte,
// as a NAT gateway drops an idle one (at 350 s), and the pool's instance
// profile is refused by EC2 for 15 s, so the provision takes longer than
// that. The action's own invoke.sh, as a workflow runs it, still gets the
// run's runners: its first call is reset, the invocation runs on, and the
// calls it asks again answer status provisioning within waitSeconds (1 s
// here) until the run is ready, printing how far it got. Every call
// carries the same idToken (a payload given one keeps it): a token asked
// again for the same operation of the same run passes. (Checked once with
// invoke.sh of before the fix, one call with no read timeout: the step
// failed after 6 s, "aws lambda invoke failed: Connection was closed
// before we received a valid response from endpoint URL".)
func TestE2E_ASlowProvisionCompletesThroughConnectionsDroppedWhenIdle(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("aws"); err != nil {
		t.Fatal("the AWS CLI is not on PATH: run make tools (scripts/ensure-awscli installs it)")
	}
	sb, d, fn := deployed(t)
	sb.SetFaults(sandbox.Faults{InvokeIdleReset: 4 * time.Second})
	profileJustMade(t, sb, d, "linux", 15*time.Second)

	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "AWS_") && !strings.HasPrefix(k, "GITHUB_") && !strings.HasPrefix(k, "ACTIONS_") && !strings.HasPrefix(k, "GHRUNNER_") {
			env = append(env, kv)
		}
	}
	output := filepath.Join(t.TempDir(), "github_output")
	env = append(env, "AWS_ENDPOINT_URL="+sb.URL, "AWS_REGION="+sandbox.Region, "AWS_ACCESS_KEY_ID=e2e", "AWS_SECRET_ACCESS_KEY=e2e",
		"GHRUNNER_WAIT_SECONDS=1", "GITHUB_OUTPUT="+output)
	script := filepath.Join(repo, "action", "invoke.sh")
	run := func(function, payload string) (string, error) {
		cmd := exec.Command(script, function, string(signed(t, fn, payload)))
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	began := time.Now()
	out, err := run(d.Functions[bundle.HandlerProvision], `{"runId":"37004","pool":"linux"}`)
	took := time.Since(began)
	if err != nil {
		t.Fatalf("invoke.sh provision: %v after %s\n%s", err, took.Round(time.Second), out)
	}
	if took < 15*time.Second || sb.InvokeResets() == 0 || !strings.Contains(out, "the call's connection was lost or gave no answer within 31s; asking again") {
		t.Errorf("took %s, %d connections reset: want the first call's connection reset while EC2 refused the launch\n%s", took, sb.InvokeResets(), out)
	}
	if !strings.Contains(out, "(label ghr-37004-") || !strings.Contains(out, "still provisioning after ") {
		t.Errorf("no progress printed while waiting:\n%s", out)
	}
	t.Logf("invoke.sh provision, %s:\n%s", took.Round(time.Second), out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var prov provision.Output
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &prov); err != nil || prov.Status != "ready" || len(prov.Instances) != 1 {
		t.Fatalf("provision answered %q (%v)", lines[len(lines)-1], err)
	}
	if b, _ := os.ReadFile(output); !strings.Contains(string(b), "label="+prov.Label+"\nrunners=1\n") {
		t.Errorf("GITHUB_OUTPUT: %q", b)
	}
	if job := runJob(t, sb.URL, "37004", "echo after the wait"); job.Result != "succeeded" {
		t.Errorf("a job of the run: %+v", job)
	}
	if out, err := run(d.Functions[bundle.HandlerRelease], `{"runId":"37004"}`); err != nil || !strings.Contains(out, prov.Instances[0].InstanceID) {
		t.Errorf("invoke.sh release: %v\n%s", err, out)
	}
}
