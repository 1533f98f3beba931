package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/lambdart"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
)

// BenchmarkProvision measures, through the whole harness (bundle via the
// runtime API, moto, fake GitHub, real agents), provision of 1, 10 and 50
// instances when they are created (cold: a local "boot" is a process start)
// and when they are reused from the pool (warm), and release of 10; it
// reports p50 and p95 over the rounds and the AWS calls of one provision.
// 1 and 10 run every round, 50 the first three only (it is the slow one).
//
// Each round releases two runs of 10. One goes through the bundle as
// deployed (signal waits poll the record every second). The other runs the
// same release code in this process with the peer design's 10 s polling
// (Deps.Poll): the same work, the same calls, only the interval of the
// waits differs, measured. The two swap between the created and the reused
// run every round.
// Run: go test ./lambdas -run '^$' -bench Provision -benchtime 5x
func BenchmarkProvision(b *testing.B) {
	// Room for 50, and the agents' production heartbeat and polling: the
	// harness's fast polling would have fifty agents saturate moto.
	d := deployTB(b, func(p *state.PoolConfig) {
		p.MaxInstances = 60
		p.Timings.HeartbeatInterval, p.Timings.StaleAfter = 15, 60
	})
	samples := map[string][]float64{}
	calls := map[string]int64{}
	for i := 0; b.Loop(); i++ {
		for _, n := range []int{1, 10, 50} {
			if n == 50 && i >= 3 {
				continue
			}
			for k, phase := range []string{"created", "reused"} {
				run := fmt.Sprintf("bench-%d-%d-%s", i, n, phase)
				before := snapshot()
				start := time.Now()
				var out provisionOut
				d.call("provision", map[string]any{"runId": run, "pool": "linux", "instanceCount": n, "timeoutSeconds": 300}, &out)
				name := fmt.Sprintf("provision-%d-%s-s", n, phase)
				samples[name] = append(samples[name], time.Since(start).Seconds())
				if i == 0 {
					for op, c := range diff(before, snapshot()) {
						calls[fmt.Sprintf("%d-%s-%s", n, phase, op)] = c
					}
				}
				if (phase == "reused") != (out.Reused == n) {
					b.Fatalf("%s: reused %d of %d", run, out.Reused, n)
				}
				name, release := "release-10-s", d.release
				if n == 10 && (i+k)%2 == 1 {
					name, release = "peer-release-10-s", d.peerRelease
				}
				start = time.Now()
				rel := release(run)
				if n == 10 {
					samples[name] = append(samples[name], time.Since(start).Seconds())
					if len(rel.Released) != n {
						b.Fatalf("%s: released %v, expired %v (%s)", run, rel.Released, rel.Expired, rel.Note)
					}
				}
				if phase == "reused" {
					// Retire the pool so the next round creates again.
					d.drain()
				}
			}
		}
	}
	for name, s := range samples {
		sort.Float64s(s)
		b.ReportMetric(s[len(s)/2], "p50-"+name)
		b.ReportMetric(s[min(len(s)-1, int(math.Ceil(0.95*float64(len(s))))-1)], "p95-"+name)
	}
	for name, c := range calls {
		b.ReportMetric(float64(c), "calls-"+name)
	}
}

// release releases a run through the bundle.
func (d *deployment) release(run string) releaseOut {
	var rel releaseOut
	d.call("release", map[string]any{"runId": run}, &rel)
	return rel
}

// peerRelease runs the release handler in this process with the peer
// design's signal polling: one read every 10 s instead of every second.
func (d *deployment) peerRelease(run string) releaseOut {
	gc, err := github.New(github.Config{BaseURL: d.fake.URL(), AppID: d.fake.AppID, PrivateKeyPEM: d.fake.PrivateKeyPEM})
	must(d.t, err)
	tokens, err := idtoken.New(d.fake.Issuer(), audience, idtoken.Options{})
	must(d.t, err)
	deps := &controlplane.Deps{Store: d.store, SQS: d.aws.SQS(), GitHub: gc, Log: slog.New(slog.NewJSONHandler(d.logs, nil)), Poll: 10 * time.Second, IDTokens: tokens}
	rctx, cancel := context.WithTimeout(ctx, 120*time.Second) // the function's timeout
	defer cancel()
	payload, err := json.Marshal(d.signed(ownRepo, map[string]any{"runId": run}))
	must(d.t, err)
	out, err := release.Handle(rctx, release.Deps{Deps: deps}, payload)
	must(d.t, err)
	return releaseOut{Released: out.Released, Expired: out.Expired, Note: out.Note}
}

// BenchmarkColdStart measures the bundle's init: the first invocation of a
// new execution environment (process start, runtime API, configuration)
// against a warm one. The payload is one the function refuses before any AWS
// or GitHub call, so the difference is the init alone, whatever moto holds.
// Run: go test ./lambdas -run '^$' -bench ColdStart -benchtime 5x
func BenchmarkColdStart(b *testing.B) {
	d := deployB(b)
	var cold, warm []float64
	for i := 0; i < b.N; i++ {
		h, err := lambdart.New(d.fnSpec("refresh"))
		must(b, err)
		for k, into := range []*[]float64{&cold, &warm} {
			start := time.Now()
			res, err := h.Invoke(ctx, []byte(`{"unknown":1}`))
			must(b, err)
			if res.FunctionError == "" || !strings.Contains(string(res.Payload), "unknown") {
				b.Fatalf("refresh (%d) with an unknown field: %s", k, res.Payload)
			}
			*into = append(*into, time.Since(start).Seconds())
		}
		h.Close()
	}
	sort.Float64s(cold)
	sort.Float64s(warm)
	b.ReportMetric(cold[len(cold)/2], "p50-cold-invoke-s")
	b.ReportMetric(warm[len(warm)/2], "p50-warm-invoke-s")
	b.ReportMetric(cold[len(cold)/2]-warm[len(warm)/2], "init-s")
	for _, arch := range []string{"arm64", "amd64"} {
		if st, err := os.Stat(filepath.Join("..", "provider", "assets", bundle.FunctionZip(arch))); err == nil {
			b.ReportMetric(float64(st.Size())/(1<<20), "zip-MB-"+arch)
		}
	}
}

var watched = map[string]string{
	"ddb-read":  "DynamoDB_20120810.GetItem",
	"ddb-write": "DynamoDB_20120810.UpdateItem",
	"ddb-put":   "DynamoDB_20120810.PutItem",
	"ddb-query": "DynamoDB_20120810.Query",
	"sqs-recv":  "AmazonSQS.ReceiveMessage",
	"ec2-fleet": "CreateFleet",
	"ec2-desc":  "DescribeInstances",
}

func snapshot() map[string]int64 {
	m := map[string]int64{}
	for k, op := range watched {
		m[k] = env.Calls(op)
	}
	return m
}

func diff(a, b map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k := range a {
		out[k] = b[k] - a[k]
	}
	return out
}

// BenchmarkScaleDown1000 times one scale-down over 1,000 recorded instances
// of five owners, each with its runner registered on the fake GitHub, and
// counts its calls: one paginated runner listing per owner (100 a page).
// Beside it, against the same fake GitHub and in the same run, the peer
// design's way: one GitHub look-up per instance's runner. Run:
// go test ./lambdas -run '^$' -bench ScaleDown1000 -benchtime 1x
func BenchmarkScaleDown1000(b *testing.B) {
	d := deployB(b)
	d.host.Stop()
	// A /22 subnet: 1,000 instances do not fit the /24 of the harness.
	vpcs, err := d.aws.EC2().DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: d.pool.SubnetIDs})
	must(b, err)
	big, err := d.aws.EC2().CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpcs.Subnets[0].VpcId, CidrBlock: aws.String("10.1.4.0/22"), AvailabilityZone: aws.String("us-east-1a")})
	must(b, err)
	d.pool.SubnetIDs = []string{aws.ToString(big.Subnet.SubnetId)}
	owners := []string{"acme", "acme/api", "acme/web", "acme/ops", "acme/data"}
	runnerIDs := map[string]int64{}
	for o, owner := range owners {
		var launched []fleet.Launched
		for len(launched) < 200 {
			req := launchRequest(d)
			req.Owner, req.Count = owner, 50
			res, err := d.fleet.Launch(ctx, req)
			must(b, err)
			launched = append(launched, res.Instances...)
		}
		for i, inst := range launched {
			runnerIDs[inst.InstanceID] = d.fake.AddRunner(owner, state.RunnerName(1, inst.InstanceID), false, "linux")
			_, err := d.store.Create(ctx, state.NewInstance{ID: inst.InstanceID, RoleID: d.pool.InstanceRoleID, Pool: d.pool.Name, Owner: owner, RunID: fmt.Sprintf("r-%d-%d", o, i), Assignment: state.NewAssignment(),
				InstanceType: inst.InstanceType, UsageClass: "on-demand", TTL: time.Hour})
			must(b, err)
		}
	}
	for i := 0; i < b.N; i++ {
		before := snapshot()
		gh := d.fake.Count("GET /orgs/{org}/actions/runners") + d.fake.Count("GET /repos/{org}/{repo}/actions/runners")
		batch := env.Calls("DynamoDB_20120810.BatchGetItem")
		start := time.Now()
		var out scaleDownOut
		d.call(bundle.HandlerScaleDown, nil, &out)
		b.ReportMetric(time.Since(start).Seconds(), "run-s")
		b.ReportMetric(float64(len(out.Kept)+len(out.Terminated)+len(out.Orphaned)), "instances")
		b.ReportMetric(float64(d.fake.Count("GET /orgs/{org}/actions/runners")+d.fake.Count("GET /repos/{org}/{repo}/actions/runners")-gh), "github-list-calls")
		b.ReportMetric(float64(env.Calls("DynamoDB_20120810.BatchGetItem")-batch), "ddb-batchget-calls")
		b.ReportMetric(float64(diff(before, snapshot())["ec2-desc"]), "ec2-describe-calls")

		// The peer design looks each instance's runner up on its own: one
		// GitHub call per instance, against the same fake GitHub. Its EC2
		// side (one paginated DescribeInstances) is the same as ours.
		gc, err := github.New(github.Config{BaseURL: d.fake.URL(), AppID: d.fake.AppID, PrivateKeyPEM: d.fake.PrivateKeyPEM})
		must(b, err)
		recs, err := d.store.ByInstanceID(ctx, instanceIDs(b, d), d.roles)
		must(b, err)
		calls := d.fake.Count("GET /orgs/{org}/actions/runners/{id}") + d.fake.Count("GET /repos/{org}/{repo}/actions/runners/{id}")
		start = time.Now()
		for _, rec := range recs {
			if _, err := gc.GetRunner(ctx, rec.Owner, runnerIDs[rec.ID]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(time.Since(start).Seconds(), "peer-lookups-s")
		b.ReportMetric(float64(d.fake.Count("GET /orgs/{org}/actions/runners/{id}")+d.fake.Count("GET /repos/{org}/{repo}/actions/runners/{id}")-calls), "peer-github-calls")
	}
}

// instanceIDs lists the deployment's instances in EC2.
func instanceIDs(b *testing.B, d *deployment) []string {
	insts, err := d.fleet.List(ctx, fleet.Filter{})
	must(b, err)
	ids := make([]string, 0, len(insts))
	for _, in := range insts {
		ids = append(ids, in.ID)
	}
	return ids
}
