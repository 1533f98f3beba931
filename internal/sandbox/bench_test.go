package sandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// BenchmarkRegistration compares the two ways a runner registers, in one
// run on one deployment of examples/sandbox (terraform, the bundle through
// the Lambda front endpoint, the streams' event source mapping, an agent
// per instance, the fake GitHub): the just-in-time pool (a runner per job,
// minted by the control plane) and the token pool (config.sh with a
// registration token). Per pool and round: warm provision of 1 and of 10
// (instances reused from the pool) until every runner is online, a
// workflow of 20 jobs on the 10 runners (the gap from a job's end to the
// next job on that instance, and for JIT to its next runner online), the
// GitHub calls of that workflow from provision to release. 5 rounds.
// The scheduled scale-down first fires 10 minutes after deploy: the
// benchmark ends before that (it would trim the warm pool).
// Run: go test ./internal/sandbox -run '^$' -bench Registration -benchtime 1x
func BenchmarkRegistration(b *testing.B) {
	// Production heartbeats (15 s, derived from the default one-hour
	// running lease): the sandbox's 1 s beats of twenty
	// agents were a third of moto's requests, and moto, one Python
	// process, is what the timings wait on.
	// No idle window today: refresh would pre-warm the pools while the
	// benchmark fills them to their maximum, and a fill of 10 would meet
	// pre-warmed instances still booting (a capacity error).
	sb, d, fn := deployedWith(b, sandbox.DeployOptions{MaxRuntimeSeconds: 3600})
	// Steady state: the first launch after an apply waits for EC2 to know
	// the pools' new instance profiles (the sandbox plays IAM's delay),
	// a cost of deploying, not of provisioning.
	time.Sleep(sandbox.ProfilePropagation)
	const rounds, jobs = 5, 20
	call := func(handler string, payload map[string]any, out any) {
		b.Helper()
		in, _ := json.Marshal(payload)
		in, err := sandbox.Sign(context.Background(), aws.ToString(fn.Options().BaseEndpoint), in)
		if err != nil {
			b.Fatal(err)
		}
		res, err := fn.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String(d.Functions[handler]), Payload: in})
		if err != nil {
			b.Fatalf("%s %s: %v", handler, in, err)
		}
		if res.FunctionError != nil || json.Unmarshal(res.Payload, out) != nil {
			b.Fatalf("%s %s: %s", handler, in, res.Payload)
		}
	}
	provisionRun := func(run, pool string, n int) (provision.Output, time.Duration) {
		start := time.Now()
		var out provision.Output
		call(bundle.HandlerProvision, map[string]any{"runId": run, "pool": pool, "instanceCount": n}, &out)
		if out.Status != "ready" || len(out.Instances) != n {
			b.Fatalf("provision %s: %+v", run, out)
		}
		return out, time.Since(start)
	}
	releaseRun := func(run string, n int) {
		var out release.Output
		call(bundle.HandlerRelease, map[string]any{"runId": run}, &out)
		if len(out.Released) != n {
			b.Fatalf("release %s: %+v", run, out)
		}
	}
	report := func(name string, ds []time.Duration) {
		b.ReportMetric(sandbox.Quantile(ds, 0.5).Seconds(), "p50-"+name+"-s")
		b.ReportMetric(sandbox.Quantile(ds, 0.95).Seconds(), "p95-"+name+"-s")
	}
	b.Cleanup(func() { b.Logf("requests by role and action:\n%s", strings.Join(sb.IAMAllowed(), "\n")) })
	for range b.N {
		for _, pool := range sandbox.Pools {
			mode := strings.TrimPrefix(strings.TrimPrefix(pool, "linux"), "-")
			if mode == "" {
				mode = "jit"
			}
			// Fill the pool with 10.
			run := "bench-" + mode + "-fill"
			provisionRun(run, pool, 10)
			releaseRun(run, 10)
			var warm1, warm10, online, started []time.Duration
			var claim, config, runnerStart, signal []time.Duration // of warm provisions of 10
			var rest, registrations int
			for r := range rounds {
				run = fmt.Sprintf("bench-%s-%d-1", mode, r)
				out, took := provisionRun(run, pool, 1)
				if out.Reused != 1 {
					b.Fatalf("%s: reused %d of 1", run, out.Reused)
				}
				warm1 = append(warm1, took)
				releaseRun(run, 1)

				run = fmt.Sprintf("bench-%s-%d-10", mode, r)
				before, start := sb.GitHub.Counts(), time.Now()
				out, took = provisionRun(run, pool, 10)
				split, ok := sandbox.SplitOf(start, start.Add(took), out, sb.GitHub.History())
				if !ok {
					b.Fatalf("%s: no runner of the slowest instance came online", run)
				}
				claim, config = append(claim, split.Claim), append(config, split.Config)
				runnerStart, signal = append(runnerStart, split.RunnerStart), append(signal, split.Signal)
				if out.Reused != 10 {
					b.Fatalf("%s: reused %d of 10", run, out.Reused)
				}
				warm10 = append(warm10, took)
				ids := make([]int64, jobs)
				for i := range ids {
					ids[i] = sb.GitHub.EnqueueJob(out.Label, "true")
				}
				var done []fakegithub.Job
				for _, id := range ids {
					j, err := sb.GitHub.WaitJob(id, time.Minute)
					if err != nil || j.Result != "succeeded" {
						b.Fatalf("%s job %d: %+v %v", run, id, j, err)
					}
					done = append(done, j)
				}
				g := sandbox.NextJobGaps(done, sb.GitHub.History())
				online, started = append(online, g.Online...), append(started, g.Started...)
				releaseRun(run, 10)
				for route, n := range sb.GitHub.Counts() {
					switch n -= before[route]; {
					case route == "POST /_fake/runners" || route == "DELETE /_fake/runners/{id}" || route == "POST /actions/runner-registration":
						registrations += n // config.sh: a runner added or removed
					case strings.Contains(route, " /_fake/"):
						// the listener's protocol: sessions, polls, jobs
					default:
						rest += n // the REST API: what GitHub's rate limit counts
					}
				}
			}
			report(mode+"-warm-1", warm1)
			report(mode+"-warm-10", warm10)
			report(mode+"-warm-10-claim", claim)
			report(mode+"-warm-10-config", config)
			report(mode+"-warm-10-runner-start", runnerStart)
			report(mode+"-warm-10-signal", signal)
			report(mode+"-gap-started", started)
			if mode == "jit" {
				report(mode+"-gap-online", online)
			}
			b.ReportMetric(float64(rest)/rounds, mode+"-rest-calls/workflow")
			b.ReportMetric(float64(registrations)/rounds, mode+"-configsh-calls/workflow")
		}
	}
}
