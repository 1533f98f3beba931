package action_test

import (
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/actionrun"
)

// What the action itself adds to an invoking job, the function answering
// at once: two OIDC tokens from the Actions runtime (the fake GitHub's),
// the AWS CLI's start, its role assumption and the invoke (the stand-in
// AWS, in process), python3 reading the answer. BENCHMARKS.md, "What a
// workflow waits for". The AWS CLI here is v1 (Python); GitHub's images
// carry v2.
func BenchmarkTheActionsOwnSteps(b *testing.B) {
	j := newJob(b, true)
	inputs := map[string]string{"function-name": "ci-provision", "role-to-assume": role, "region": "eu-west-1",
		"payload": `{"runId":"42-2","pool":"linux","instanceCount":2}`}
	b.ResetTimer()
	for range b.N {
		if r := actionrun.Run(b, ".", inputs, j.env); r.Code != 0 {
			b.Fatalf("exit %d\n%s", r.Code, r.Log)
		}
	}
}
