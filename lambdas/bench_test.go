package main

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// BenchmarkProvision measures, through the whole harness (bundle via the
// runtime API, moto, fake GitHub, real agents), provision of 1 and 10
// instances when they are created and when they are reused from the pool,
// and release of 10; it reports the median over b.N rounds and the AWS calls
// of one provision. Run: go test ./lambdas -run '^$' -bench Provision -benchtime 3x
func BenchmarkProvision(b *testing.B) {
	d := deployB(b)
	samples := map[string][]float64{}
	calls := map[string]int64{}
	for i := 0; i < b.N; i++ {
		for _, n := range []int{1, 10} {
			for _, phase := range []string{"created", "reused"} {
				run := fmt.Sprintf("bench-%d-%d-%s", i, n, phase)
				before := snapshot()
				start := time.Now()
				var out provisionOut
				d.call("provision", map[string]any{"runId": run, "pool": "linux", "instanceCount": n}, &out)
				samples[fmt.Sprintf("provision-%d-%s-s", n, phase)] = append(samples[fmt.Sprintf("provision-%d-%s-s", n, phase)], time.Since(start).Seconds())
				if i == 0 {
					for op, c := range diff(before, snapshot()) {
						calls[fmt.Sprintf("%d-%s-%s", n, phase, op)] = c
					}
				}
				if (phase == "reused") != (out.Reused == n) {
					b.Fatalf("%s: reused %d of %d", run, out.Reused, n)
				}
				start = time.Now()
				var rel releaseOut
				d.call("release", map[string]any{"runId": run}, &rel)
				if n == 10 {
					samples["release-10-s"] = append(samples["release-10-s"], time.Since(start).Seconds())
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
	}
	for name, c := range calls {
		b.ReportMetric(float64(c), "calls-"+name)
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
// of five owners and counts its calls. Run:
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
			_, err := d.store.Create(ctx, state.NewInstance{ID: inst.InstanceID, Pool: d.pool.Name, Owner: owner, RunID: fmt.Sprintf("r-%d-%d", o, i), Assignment: state.NewAssignment(),
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
		d.call("scale-down", nil, &out)
		b.ReportMetric(time.Since(start).Seconds(), "run-s")
		b.ReportMetric(float64(len(out.Kept)+len(out.Terminated)+len(out.Orphaned)), "instances")
		b.ReportMetric(float64(d.fake.Count("GET /orgs/{org}/actions/runners")+d.fake.Count("GET /repos/{org}/{repo}/actions/runners")-gh), "github-list-calls")
		b.ReportMetric(float64(env.Calls("DynamoDB_20120810.BatchGetItem")-batch), "ddb-batchget-calls")
		b.ReportMetric(float64(diff(before, snapshot())["ec2-desc"]), "ec2-describe-calls")
	}
}
