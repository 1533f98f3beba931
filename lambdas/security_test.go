package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// TestNoSecretInLogsOutputsOrJobs runs a workflow twice on one instance
// (cold, then reused) and checks that no credential — the GitHub App's
// private key, installation tokens, registration and remove tokens, the
// runner's listener secrets — shows up in any function's or agent's log, in
// a function's output, or in the environment a job sees; and that no token is
// left in the instance's record once it is back in the pool. docs/security.md
// points here.
func TestNoSecretInLogsOutputsOrJobs(t *testing.T) {
	t.Parallel()
	d := deploy(t, nil)

	var outputs []string
	secrets := map[string]bool{}
	collect := func() {
		for _, s := range d.fake.Secrets() {
			secrets[s] = true
		}
	}
	var jobEnv []string
	for _, runID := range []string{"sec-1", "sec-2"} {
		res := d.invoke("provision", map[string]any{"runId": runID, "pool": "linux"})
		if res.FunctionError != "" {
			t.Fatalf("provision %s: %s", runID, res.Payload)
		}
		outputs = append(outputs, string(res.Payload))
		collect() // the runner is registered now: its secret is known
		var out provisionOut
		must(t, json.Unmarshal(res.Payload, &out))
		job := d.job(out.Label, "env; ls -la ..; cat ../../.credentials ../../.runner 2>/dev/null || true")
		if job.ExitCode != 0 {
			t.Fatalf("job: %+v", job)
		}
		jobEnv = append(jobEnv, job.Output)
		if strings.Contains(job.Output, "ACTIONS_RUNNER_INPUT_TOKEN") {
			t.Errorf("the registration token's variable reached the job's environment")
		}
		rel := d.invoke("release", map[string]any{"runId": runID})
		if rel.FunctionError != "" {
			t.Fatalf("release %s: %s", runID, rel.Payload)
		}
		outputs = append(outputs, string(rel.Payload))
		collect()
	}

	idle, err := d.store.ByPoolState(ctx, d.pool.Name, state.Idle, time.Time{})
	must(t, err)
	if len(idle) != 1 {
		t.Fatalf("%d idle instances, want the reused one", len(idle))
	}
	rec, err := d.store.Get(ctx, idle[0].Key)
	must(t, err)
	if rec.Registration != nil || !rec.Clean() {
		t.Errorf("pooled record keeps GitHub material (%v) or is not clean", rec.Registration)
	}

	// The App's private key, by its body lines.
	for _, line := range strings.Split(string(d.fake.PrivateKeyPEM), "\n") {
		if len(line) >= 40 && !strings.HasPrefix(line, "-----") {
			secrets[line] = true
		}
	}
	if len(secrets) < 6 {
		t.Fatalf("only %d secrets collected: the check would prove little", len(secrets))
	}
	t.Logf("%d secrets checked against %d bytes of logs, %d outputs and %d job outputs", len(secrets), len(d.logs.String()), len(outputs), len(jobEnv))
	logs := d.logs.String()
	if !strings.Contains(logs, "runner registered") {
		t.Fatalf("agent logs missing: the check would prove nothing:\n%s", logs)
	}
	for s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("a secret (%.8s…) is in the logs", s)
		}
		for _, out := range outputs {
			if strings.Contains(out, s) {
				t.Errorf("a secret (%.8s…) is in a function output: %s", s, out)
			}
		}
	}
	// The job runs as the runner, which holds its own listener secret (as
	// with any self-hosted runner: see docs/security.md); it must not see
	// GitHub App material or registration and remove tokens.
	for _, env := range jobEnv {
		for s := range secrets {
			if strings.Contains(env, s) && !strings.HasPrefix(s, "secret_") {
				t.Errorf("a secret (%.8s…) is visible to the job", s)
			}
		}
	}
}
