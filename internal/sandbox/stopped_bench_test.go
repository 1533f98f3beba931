package sandbox_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/scaledown"
)

// BenchmarkStoppedTier measures a provision of 1 until its runner is online
// (provision's answer: the agent's ready signal) from each tier, on the
// story's stopped-tier pool (sandbox.PoolStopped) of one deployment of
// examples/sandbox: cold (nothing idle or stopped: a launch), warm (an
// idle pooled instance claimed) and stopped (EC2 start with the sandbox's
// modelled boot, sandbox.BootDelay in pending, then the agent started
// again on its kept disk). Each round: cold, released; warm, released;
// scale-down stops it; stopped, released; then it is retired (its record
// expired, refresh terminates it) so that the next round's first
// provision launches. The sandbox's short timings (60 s lease, 5 s
// minimum running time) let scale-down stop an instance seconds after
// its run; the tiers' figures do not depend on them. A local "boot" is a
// process start: cold and stopped exclude what a real boot costs beyond
// the modelled delay (BENCHMARKS.md).
// Run: go test ./internal/sandbox -run '^$' -bench StoppedTier -benchtime 1x
func BenchmarkStoppedTier(b *testing.B) {
	sb, d, fn := deployedWith(b, sandbox.DeployOptions{StoppedPool: true})
	time.Sleep(sandbox.ProfilePropagation) // steady state: EC2 knows the pools' instance profiles
	store := state.New(sb.AWS.DynamoDB(), d.Table)
	ec2 := fleet.New(sb.AWS.EC2(), sandbox.Environment)
	pool := sandbox.PoolStopped
	provisionOne := func(run string) (provision.Output, time.Duration) {
		b.Helper()
		start := time.Now()
		var out provision.Output
		invoke(b, fn, d.Functions[bundle.HandlerProvision], fmt.Sprintf(`{"runId":%q,"pool":%q,"instanceCount":1}`, run, pool), &out)
		if out.Status != "ready" || len(out.Instances) != 1 {
			b.Fatalf("provision %s: %+v", run, out)
		}
		return out, time.Since(start)
	}
	releaseOne := func(run string) {
		b.Helper()
		var out release.Output
		invoke(b, fn, d.Functions[bundle.HandlerRelease], fmt.Sprintf(`{"runId":%q}`, run), &out)
		if len(out.Released) != 1 {
			b.Fatalf("release %s: %+v", run, out)
		}
	}
	ec2State := func(id string) string {
		insts, err := ec2.List(b.Context(), fleet.Filter{IDs: []string{id}})
		if err != nil || len(insts) == 0 {
			return ""
		}
		return insts[0].State
	}
	waitFor := func(what string, ok func() bool) {
		b.Helper()
		for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%s: not within a minute", what)
			}
		}
	}
	const rounds = 5
	var cold, warm, stopped []time.Duration
	for range b.N {
		for r := range rounds {
			run := fmt.Sprintf("bench-stopped-%d-", r)
			out, took := provisionOne(run + "cold")
			if out.Created != 1 {
				b.Fatalf("round %d cold: %+v, want a launch", r, out)
			}
			id := out.Instances[0].InstanceID
			cold = append(cold, took)
			releaseOne(run + "cold")

			if out, took = provisionOne(run + "warm"); out.Reused != 1 || out.Instances[0].InstanceID != id {
				b.Fatalf("round %d warm: %+v, want %s reused", r, out, id)
			}
			warm = append(warm, took)
			releaseOne(run + "warm")

			// Idle past the minimum running time: scale-down stops it.
			waitFor("scale-down stops "+id, func() bool {
				var sd scaledown.Output
				invoke(b, fn, d.Functions[bundle.HandlerScaleDown], `{}`, &sd)
				rec, err := store.FindInstance(b.Context(), id)
				return err == nil && rec.State == state.Stopped
			})
			waitFor(id+" stopped in EC2", func() bool { return ec2State(id) == "stopped" })

			if out, took = provisionOne(run + "stopped"); out.Started != 1 || out.Instances[0].InstanceID != id {
				b.Fatalf("round %d stopped: %+v, want %s started", r, out, id)
			}
			stopped = append(stopped, took)
			releaseOne(run + "stopped")

			// Retired, so that the next round launches.
			rec, err := store.FindInstance(b.Context(), id)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := store.Expire(b.Context(), rec.Ref(), "benchmark: the next round launches"); err != nil {
				b.Fatal(err)
			}
			waitFor(id+" terminated", func() bool {
				var out struct{}
				invoke(b, fn, d.Functions[bundle.HandlerRefresh], `{}`, &out)
				s := ec2State(id)
				return s == "" || s == "shutting-down"
			})
		}
	}
	for name, ds := range map[string][]time.Duration{"cold-1": cold, "warm-1": warm, "stopped-1": stopped} {
		b.ReportMetric(sandbox.Quantile(ds, 0.5).Seconds(), "p50-"+name+"-s")
		b.ReportMetric(sandbox.Quantile(ds, 0.95).Seconds(), "p95-"+name+"-s")
	}
	b.ReportMetric(sandbox.BootDelay.Seconds(), "modelled-boot-s")
}
