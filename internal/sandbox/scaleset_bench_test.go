package sandbox_test

import (
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// BenchmarkScaleSet measures the scale-set mode on a warm pool, deployed as
// users deploy it (the module's listener as an ECS task from the image the
// provider pushed): per job, from queued at GitHub to running on a pooled
// instance (the listener's long poll answered, the job acquired, a warm
// instance claimed, its scale-set runner minted, started and given the
// job), and per instance, from its job's end to clean, checked and
// claimable again. Rounds of three jobs, the scale set's maximum, each
// round on the three warm instances the one before left.
// Run: go test ./internal/sandbox -run '^$' -bench ScaleSet -benchtime 1x
func BenchmarkScaleSet(b *testing.B) {
	sb, d, fn := deployedWith(b, sandbox.DeployOptions{ScaleSet: "linux-bench", MaxRuntimeSeconds: 3600})
	time.Sleep(sandbox.ProfilePropagation)
	store := state.New(sb.AWS.DynamoDB(), d.Table)
	// Three warm instances: a workflow's run of three, released.
	warm := warmMany(b, fn, d, store, "bench-scaleset-fill", 3)
	waitSession(b, sb.GitHub, "linux-bench", "", time.Minute)
	const rounds = 6
	var queuedToRunning, doneToReady []time.Duration
	for range b.N {
		for range rounds {
			ids := make([]int64, len(warm))
			for i := range ids {
				ids[i] = sb.GitHub.EnqueueJob("linux-bench", "true")
			}
			finished := map[string]time.Time{}
			for _, id := range ids {
				j, err := sb.GitHub.WaitJob(id, 2*time.Minute)
				if err != nil || j.Result != "succeeded" {
					b.Fatalf("job %d: %+v %v", id, j, err)
				}
				queuedToRunning = append(queuedToRunning, j.Started.Sub(j.Queued))
				finished[j.Runner[len(j.Runner)-len(warm[0]):]] = j.Finished
			}
			for inst, end := range finished {
				waitIdle(b, store, inst, 2*time.Minute)
				doneToReady = append(doneToReady, time.Since(end))
			}
		}
	}
	b.ReportMetric(sandbox.Quantile(queuedToRunning, 0.5).Seconds(), "p50-queued-to-running-s")
	b.ReportMetric(sandbox.Quantile(queuedToRunning, 0.95).Seconds(), "p95-queued-to-running-s")
	b.ReportMetric(sandbox.Quantile(doneToReady, 0.5).Seconds(), "p50-done-to-ready-s")
}
