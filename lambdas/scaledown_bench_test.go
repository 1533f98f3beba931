package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/lambdart"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/scaledown"
)

// functionTimeout is the scale-down function's timeout as the provider
// deploys it.
const functionTimeout = 300 * time.Second

// BenchmarkScaleDownRetire times one scale-down with the function's 300 s
// timeout as its deadline over n instances of five owners in moto: 9 in 10
// clean and idle, with an idle quota of n/10, so that 8 in 10 are retired;
// one idle instance in 10 still has its last run's runner registered; 1 in
// 10 runs a job. It reports the setup time, the run's time (and the part
// spent reading before the first action), what it did and its calls.
//
// 1,000 and 5,000 run through the bundle, the EC2 listing included. moto
// describes instances in time quadratic in the tags it holds (each
// instance's tags are a scan of all of them): one listing of 10,000 takes
// 240 s on 2 quiet cores and over 285 s on busy ones, nearly the whole
// timeout, where EC2 answers in ten pages. So 10,000 runs in this process
// with the listing answered from memory (the instances as RunInstances
// returned them) and everything else against moto and the fake GitHub.
// Run: go test ./lambdas -run '^$' -bench ScaleDownRetire -benchtime 1x -timeout 60m
func BenchmarkScaleDownRetire(b *testing.B) {
	for _, size := range []struct {
		name       string
		n          int
		fromMemory bool
	}{{"1000", 1000, false}, {"5000", 5000, false}, {"10000-memlist", 10000, true}} {
		b.Run(size.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				build(b) // not part of the setup time
				start := time.Now()
				d, launched := scaleDownFleet(b, size.n)
				b.ReportMetric(time.Since(start).Seconds(), "setup-s")
				b.StartTimer()
				if size.fromMemory {
					d.scaleDownListedFromMemory(b, launched)
				} else {
					d.timedScaleDown(b, size.n)
				}
			}
		})
	}
}

// scaleDownFleet deploys a pool of n instances as BenchmarkScaleDownRetire
// describes and returns them as launched. Instances come from
// RunInstances, 500 at a time, with only the tags scale-down reads (moto's
// tag look-ups grow with every tag it holds); records are written 25 at a
// time, already in their state.
func scaleDownFleet(b *testing.B, n int) (*deployment, []fleet.Instance) {
	d := deployTB(b, func(p *state.PoolConfig) {
		p.MaxInstances = n
		p.Timings.MinRunningTime, p.Timings.BootTime = 1, 1
		p.IdleWindows = []state.IdleWindow{{Cron: "* * * * *", TimeZone: "UTC", IdleCount: n / 10, EvictionStrategy: "oldest_first"}}
	})
	d.host.Stop()
	ec := d.aws.EC2()
	vpcs, err := ec.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: d.pool.SubnetIDs})
	must(b, err)
	big, err := ec.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpcs.Subnets[0].VpcId, CidrBlock: aws.String("10.1.64.0/18"), AvailabilityZone: aws.String("us-east-1a")})
	must(b, err)
	owners := []string{"acme", "acme/api", "acme/web", "acme/ops", "acme/data"}
	now := time.Now()
	var items []map[string]ddbtypes.AttributeValue
	var launched []fleet.Instance
	for start := 0; start < n; start += 500 {
		count := min(500, n-start)
		owner := owners[start/500%len(owners)]
		tags := []ec2types.Tag{{Key: aws.String(fleet.TagEnvironment), Value: aws.String(d.name)}, {Key: aws.String(fleet.TagPool), Value: aws.String(d.pool.Name)}, {Key: aws.String(fleet.TagOwner), Value: aws.String(owner)}}
		res, err := ec.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(env.Network(b).AMI), MinCount: aws.Int32(int32(count)), MaxCount: aws.Int32(int32(count)),
			InstanceType: ec2types.InstanceTypeC7iLarge, SubnetId: big.Subnet.SubnetId, TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}}})
		must(b, err)
		for i, inst := range res.Instances {
			id := aws.ToString(inst.InstanceId)
			launched = append(launched, fleet.Instance{ID: id, InstanceType: string(inst.InstanceType), State: "running", LaunchTime: aws.ToTime(inst.LaunchTime),
				UsageClass: fleet.OnDemand, Tags: map[string]string{fleet.TagEnvironment: d.name, fleet.TagPool: d.pool.Name, fleet.TagOwner: owner}})
			rec := state.Instance{Key: d.key(id), Kind: "instance", ID: id, Pool: d.pool.Name, Owner: owner, Assignment: state.NewAssignment(),
				Threshold: now.Add(time.Hour).Unix(), LaunchedAt: now.Unix(), LaunchTemplateVersion: d.pool.LaunchTemplateVersion,
				InstanceType: "c7i.large", UsageClass: "on-demand", Uses: 1, Version: 1, Signals: map[string]state.Signal{}}
			switch k := start + i; {
			case k%10 == 0: // running a job
				rec.State, rec.RunID = state.Running, fmt.Sprintf("run-%d", k)
				d.fake.AddRunner(owner, state.RunnerName(1, id), true, rec.RunID)
			default:
				rec.State = state.Idle
				rec.Signals[state.SignalRemoveRegOK] = state.Signal{Assignment: rec.Assignment, At: now.Unix()}
				if k%10 == 1 { // its last run's runner is still registered
					d.fake.SetOnline(d.fake.AddRunner(owner, state.RunnerName(1, id), false, "old-run"), false)
				}
			}
			rec.PoolState = state.PoolState(rec.Pool, rec.State)
			item, err := attributevalue.MarshalMap(rec)
			must(b, err)
			items = append(items, item)
		}
	}
	b.Logf("%d instances launched in %.0fs", n, time.Since(now).Seconds())
	written := time.Now()
	for start := 0; start < len(items); start += 25 {
		req := map[string][]ddbtypes.WriteRequest{d.name: {}}
		for _, item := range items[start:min(start+25, len(items))] {
			req[d.name] = append(req[d.name], ddbtypes.WriteRequest{PutRequest: &ddbtypes.PutRequest{Item: item}})
		}
		for len(req) > 0 {
			out, err := d.aws.DynamoDB().BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: req})
			must(b, err)
			req = out.UnprocessedItems
		}
	}
	b.Logf("%d records written in %.0fs", n, time.Since(written).Seconds())
	time.Sleep(1100 * time.Millisecond) // past the minimum running time
	return d, launched
}

// benchCalls counts the calls a run makes.
func (d *deployment) benchCalls() map[string]float64 {
	return map[string]float64{
		"ddb-write-calls":     float64(env.Calls("DynamoDB_20120810.UpdateItem")),
		"ddb-batchget-calls":  float64(env.Calls("DynamoDB_20120810.BatchGetItem")),
		"ec2-describe-calls":  float64(env.Calls("DescribeInstances")),
		"ec2-terminate-calls": float64(env.Calls("TerminateInstances")),
		"github-list-calls":   float64(d.fake.Count("GET /orgs/{org}/actions/runners") + d.fake.Count("GET /repos/{org}/{repo}/actions/runners")),
		"github-delete-calls": float64(d.fake.Count("DELETE /orgs/{org}/actions/runners/{id}") + d.fake.Count("DELETE /repos/{org}/{repo}/actions/runners/{id}")),
	}
}

// report checks and reports one run's output.
func report(b *testing.B, out *scaledown.Output, elapsed time.Duration, before, after map[string]float64) {
	if len(out.Errors) != 0 {
		b.Errorf("errors: %.5q", out.Errors)
	}
	if elapsed >= functionTimeout {
		b.Errorf("took %s, beyond the function's timeout", elapsed)
	}
	b.ReportMetric(elapsed.Seconds(), "run-s")
	b.ReportMetric(out.GatherSeconds, "gather-s")
	b.ReportMetric(float64(len(out.Kept)+len(out.Terminated)+len(out.Orphaned)+len(out.Deferred)), "instances")
	b.ReportMetric(float64(len(out.Terminated)), "terminated")
	b.ReportMetric(float64(len(out.Kept)), "kept")
	b.ReportMetric(float64(len(out.Deferred)), "deferred")
	for name, v := range after {
		b.ReportMetric(v-before[name], name)
	}
}

// timedScaleDown invokes scale-down once through a function host with the
// production timeout.
func (d *deployment) timedScaleDown(b *testing.B, n int) {
	spec := d.fnSpec(bundle.HandlerScaleDown)
	spec.Timeout = functionTimeout
	h, err := lambdart.New(spec)
	must(b, err)
	defer h.Close()
	before := d.benchCalls()
	start := time.Now()
	res, err := h.Invoke(ctx, []byte(`{}`))
	elapsed := time.Since(start)
	must(b, err)
	if res.FunctionError != "" {
		b.Fatalf("scale-down over %d failed after %s: %s", n, elapsed, res.Payload)
	}
	var out scaledown.Output
	must(b, json.Unmarshal(res.Payload, &out))
	report(b, &out, elapsed, before, d.benchCalls())
}

// listedEC2 is the fleet with its listing answered from memory.
type listedEC2 struct {
	*fleet.Fleet
	instances []fleet.Instance
}

func (l listedEC2) List(context.Context, fleet.Filter) ([]fleet.Instance, error) {
	return l.instances, nil
}

// scaleDownListedFromMemory runs scale-down in this process with the
// function's timeout and the EC2 listing from memory.
func (d *deployment) scaleDownListedFromMemory(b *testing.B, launched []fleet.Instance) {
	c, cancel := context.WithTimeout(ctx, functionTimeout)
	defer cancel()
	deps := &controlplane.Deps{Store: d.store, SQS: d.aws.SQS(), GitHub: d.gitHub(), Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	before := d.benchCalls()
	start := time.Now()
	out, err := scaledown.Handle(c, scaledown.Deps{Deps: deps, EC2: listedEC2{d.fleet, launched}}, nil)
	elapsed := time.Since(start)
	must(b, err)
	report(b, out, elapsed, before, d.benchCalls())
}
