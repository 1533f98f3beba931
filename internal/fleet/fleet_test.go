package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awstest"
)

var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

var ctx = context.Background()

// network creates a VPC with two subnets and a launch template in moto.
type network struct {
	client   *ec2.Client
	subnets  []string
	template string
}

func newNetwork(t testing.TB) network {
	t.Helper()
	c := env.Config(t).EC2()
	vpc, err := c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	must(t, err)
	var subnets []string
	for i, az := range []string{"us-east-1a", "us-east-1b"} {
		sn, err := c.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.0.%d.0/24", i)), AvailabilityZone: aws.String(az)})
		must(t, err)
		subnets = append(subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	images, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{})
	must(t, err)
	if len(images.Images) == 0 {
		t.Fatal("moto has no AMI")
	}
	lt, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(awstest.Name(t, "lt")),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: images.Images[0].ImageId, InstanceType: types.InstanceTypeT3Micro},
	})
	must(t, err)
	return network{client: c, subnets: subnets, template: aws.ToString(lt.LaunchTemplate.LaunchTemplateId)}
}

func (n network) request(count int, usage string) LaunchRequest {
	return LaunchRequest{LaunchTemplateID: n.template, LaunchTemplateVersion: "$Latest", InstanceTypes: []string{"c7i.large", "m7i.large", "c6i.large"},
		SubnetIDs: n.subnets, Count: count, UsageClass: usage, Pool: "linux", Owner: "acme", Assignment: "a1", Tags: map[string]string{"team": "ci"}}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// recorder wraps the real client, keeping the CreateFleet requests and
// letting a test replace answers.
type recorder struct {
	EC2API
	mu       sync.Mutex
	fleets   []*ec2.CreateFleetInput
	onFleet  func(in *ec2.CreateFleetInput, out *ec2.CreateFleetOutput) (*ec2.CreateFleetOutput, error)
	onTerm   func(in *ec2.TerminateInstancesInput) error
	describe func(in *ec2.DescribeInstancesInput) (*ec2.DescribeInstancesOutput, error)
	terms    int
}

func (r *recorder) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	r.mu.Lock()
	r.fleets = append(r.fleets, in)
	r.mu.Unlock()
	out, err := r.EC2API.CreateFleet(ctx, in, opts...)
	if err == nil && r.onFleet != nil {
		return r.onFleet(in, out)
	}
	return out, err
}

func (r *recorder) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	r.mu.Lock()
	r.terms++
	r.mu.Unlock()
	if r.onTerm != nil {
		if err := r.onTerm(in); err != nil {
			return nil, err
		}
	}
	return r.EC2API.TerminateInstances(ctx, in, opts...)
}

func (r *recorder) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	if r.describe != nil && len(in.InstanceIds) > 0 {
		return r.describe(in)
	}
	return r.EC2API.DescribeInstances(ctx, in, opts...)
}

func TestLaunchOverTypesAndSubnets(t *testing.T) {
	n := newNetwork(t)
	rec := &recorder{EC2API: n.client}
	f := New(rec, awstest.Name(t, "env"))
	res, err := f.Launch(ctx, n.request(3, "on-demand"))
	must(t, err)
	if len(res.Instances) != 3 || len(rec.fleets) != 1 {
		t.Fatalf("launched %d instances with %d CreateFleet calls, want 3 with 1", len(res.Instances), len(rec.fleets))
	}
	in := rec.fleets[0]
	if in.Type != types.FleetTypeInstant || aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity) != 3 ||
		in.TargetCapacitySpecification.DefaultTargetCapacityType != types.DefaultTargetCapacityTypeOnDemand {
		t.Fatalf("request = %+v", in.TargetCapacitySpecification)
	}
	var pairs []string
	for _, o := range in.LaunchTemplateConfigs[0].Overrides {
		pairs = append(pairs, string(o.InstanceType)+"@"+aws.ToString(o.SubnetId))
	}
	if len(pairs) != 6 {
		t.Fatalf("overrides = %v, want 3 types × 2 subnets", pairs)
	}
	listed, err := f.List(ctx, Filter{Pool: "linux"})
	must(t, err)
	if len(listed) != 3 {
		t.Fatalf("List found %d", len(listed))
	}
	for _, i := range listed {
		if i.Tags[TagEnvironment] != f.Environment() || i.Tags[TagPool] != "linux" || i.Tags[TagOwner] != "acme" || i.Tags[TagAssignment] != "a1" || i.Tags["team"] != "ci" {
			t.Fatalf("tags of %s = %v", i.ID, i.Tags)
		}
	}
}

func TestSpotFallsBackToOnDemandForTheMissingCount(t *testing.T) {
	n := newNetwork(t)
	rec := &recorder{EC2API: n.client}
	// moto never runs out: keep 1 of 4 spot instances, terminate the rest
	// and report a capacity error, as EC2 does when spot capacity is short.
	rec.onFleet = func(in *ec2.CreateFleetInput, out *ec2.CreateFleetOutput) (*ec2.CreateFleetOutput, error) {
		if in.TargetCapacitySpecification.DefaultTargetCapacityType != types.DefaultTargetCapacityTypeSpot {
			return out, nil
		}
		keepOne(n.client, out)
		out.Errors = []types.CreateFleetError{{ErrorCode: aws.String("InsufficientInstanceCapacity"), ErrorMessage: aws.String("no spot capacity"),
			LaunchTemplateAndOverrides: &types.LaunchTemplateAndOverridesResponse{Overrides: &types.FleetLaunchTemplateOverrides{InstanceType: "c7i.large", SubnetId: aws.String(n.subnets[0])}}}}
		return out, nil
	}
	f := New(rec, awstest.Name(t, "env"))
	req := n.request(4, "spot")
	req.OnDemandFallback = true
	res, err := f.Launch(ctx, req)
	must(t, err)
	if len(rec.fleets) != 2 {
		t.Fatalf("%d CreateFleet calls, want spot then on-demand", len(rec.fleets))
	}
	second := rec.fleets[1].TargetCapacitySpecification
	if second.DefaultTargetCapacityType != types.DefaultTargetCapacityTypeOnDemand || aws.ToInt32(second.TotalTargetCapacity) != 3 {
		t.Fatalf("fallback request = %+v, want 3 on-demand", second)
	}
	classes := map[string]int{}
	for _, i := range res.Instances {
		classes[i.UsageClass]++
	}
	if len(res.Instances) != 4 || classes["spot"] != 1 || classes["on-demand"] != 3 {
		t.Fatalf("got %v", classes)
	}
	if !strings.Contains(res.Detail(), "InsufficientInstanceCapacity") {
		t.Fatalf("detail = %s", res.Detail())
	}

	// No fallback when not asked for, or when the error is not about capacity.
	for _, c := range []struct {
		fallback bool
		code     string
	}{{false, "InsufficientInstanceCapacity"}, {true, "InvalidParameterValue"}} {
		rec.fleets = nil
		code := c.code
		rec.onFleet = func(in *ec2.CreateFleetInput, out *ec2.CreateFleetOutput) (*ec2.CreateFleetOutput, error) {
			keepOne(n.client, out)
			out.Errors = []types.CreateFleetError{{ErrorCode: aws.String(code)}}
			return out, nil
		}
		req.OnDemandFallback = c.fallback
		res, err := f.Launch(ctx, req)
		must(t, err)
		if len(rec.fleets) != 1 || res.Missing(4) != 3 {
			t.Fatalf("fallback=%v code=%s: %d calls, missing %d", c.fallback, code, len(rec.fleets), res.Missing(4))
		}
	}
}

// keepOne turns a fleet answer into one that got a single instance: the
// others are terminated in moto and left out of the answer.
func keepOne(c *ec2.Client, out *ec2.CreateFleetOutput) {
	var ids []string
	for _, g := range out.Instances {
		ids = append(ids, g.InstanceIds...)
	}
	c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids[1:]})
	out.Instances = out.Instances[:1]
	out.Instances[0].InstanceIds = ids[:1]
}

func TestLaunchValidates(t *testing.T) {
	f := New(&recorder{}, "env")
	n := network{subnets: []string{"subnet-1"}, template: "lt-1"}
	cases := map[string]func(*LaunchRequest){
		"launchTemplateId":      func(r *LaunchRequest) { r.LaunchTemplateID = "" },
		"launchTemplateVersion": func(r *LaunchRequest) { r.LaunchTemplateVersion = "" },
		"instanceTypes":         func(r *LaunchRequest) { r.InstanceTypes = nil },
		"subnetIds":             func(r *LaunchRequest) { r.SubnetIDs = nil },
		"count":                 func(r *LaunchRequest) { r.Count = 0 },
		"usageClass":            func(r *LaunchRequest) { r.UsageClass = "reserved" },
		"assignment":            func(r *LaunchRequest) { r.Assignment = "" },
	}
	for field, change := range cases {
		req := n.request(1, "spot")
		change(&req)
		if _, err := f.Launch(ctx, req); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: Launch = %v", field, err)
		}
	}
}

func TestVolumesAreTagged(t *testing.T) {
	n := newNetwork(t)
	rec := &recorder{EC2API: n.client}
	f := New(rec, "env-vol")
	// moto's CreateFleet instances carry no block devices: answer the
	// describe with one volume per instance, and check the tags landed on them.
	var volumes []string
	rec.describe = func(in *ec2.DescribeInstancesInput) (*ec2.DescribeInstancesOutput, error) {
		var insts []types.Instance
		for _, id := range in.InstanceIds {
			vol, err := n.client.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(8)})
			if err != nil {
				return nil, err
			}
			volumes = append(volumes, aws.ToString(vol.VolumeId))
			insts = append(insts, types.Instance{InstanceId: aws.String(id), BlockDeviceMappings: []types.InstanceBlockDeviceMapping{{Ebs: &types.EbsInstanceBlockDevice{VolumeId: vol.VolumeId}}}})
		}
		return &ec2.DescribeInstancesOutput{Reservations: []types.Reservation{{Instances: insts}}}, nil
	}
	res, err := f.Launch(ctx, n.request(2, "on-demand"))
	must(t, err)
	if len(res.Warnings) != 0 || len(volumes) != 2 {
		t.Fatalf("warnings %v, volumes %v", res.Warnings, volumes)
	}
	out, err := n.client.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: volumes})
	must(t, err)
	for _, v := range out.Volumes {
		tags := map[string]string{}
		for _, tg := range v.Tags {
			tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		if tags[TagEnvironment] != "env-vol" || tags[TagPool] != "linux" || tags[TagAssignment] != "a1" {
			t.Fatalf("volume %s tags %v", aws.ToString(v.VolumeId), tags)
		}
	}
	// A describe that keeps failing does not fail the launch: it warns.
	rec.describe = func(*ec2.DescribeInstancesInput) (*ec2.DescribeInstancesOutput, error) {
		return nil, &smithy.GenericAPIError{Code: "UnauthorizedOperation", Message: "no"}
	}
	res, err = f.Launch(ctx, n.request(1, "on-demand"))
	must(t, err)
	if len(res.Instances) != 1 || len(res.Warnings) != 1 {
		t.Fatalf("instances %d warnings %v", len(res.Instances), res.Warnings)
	}
}

func TestListPagesAndFilters(t *testing.T) {
	n := newNetwork(t)
	f := New(n.client, awstest.Name(t, "env"))
	f.PageSize = 5
	for i := 0; i < 7; i++ { // moto pages by reservation: one launch, one reservation
		req := n.request(2, "on-demand")
		if i%2 == 1 {
			req.Owner = "acme/api"
		}
		_, err := f.Launch(ctx, req)
		must(t, err)
	}
	before := env.Calls("DescribeInstances")
	all, err := f.List(ctx, Filter{})
	must(t, err)
	pages := env.Calls("DescribeInstances") - before
	if len(all) != 14 || pages < 2 {
		t.Fatalf("List: %d instances in %d pages, want 14 over several pages", len(all), pages)
	}
	repo, err := f.List(ctx, Filter{Owner: "acme/api"})
	must(t, err)
	if len(repo) != 6 {
		t.Fatalf("owner filter: %d, want 6", len(repo))
	}
	must(t, f.TagOrphan(ctx, all[0].ID, "a1"))
	yes, no := true, false
	orphans, err := f.List(ctx, Filter{Orphan: &yes})
	must(t, err)
	others, err := f.List(ctx, Filter{Orphan: &no})
	must(t, err)
	if len(orphans) != 1 || orphans[0].ID != all[0].ID || len(others) != 13 {
		t.Fatalf("orphans %d others %d", len(orphans), len(others))
	}
	if v, _ := orphans[0].Orphan(); v != "a1" {
		t.Fatalf("orphan tag value %q", v)
	}
	must(t, f.UntagOrphan(ctx, all[0].ID))
	orphans, err = f.List(ctx, Filter{Orphan: &yes})
	must(t, err)
	if len(orphans) != 0 {
		t.Fatal("orphan tag not removed")
	}
	other, err := New(n.client, "another-env").List(ctx, Filter{})
	must(t, err)
	if len(other) != 0 {
		t.Fatalf("another environment sees %d instances", len(other))
	}
}

func TestTerminateBatchesAndSkipsGone(t *testing.T) {
	n := newNetwork(t)
	rec := &recorder{EC2API: n.client}
	f := New(rec, awstest.Name(t, "env"))
	f.TerminateBatch = 4
	res, err := f.Launch(ctx, n.request(10, "on-demand"))
	must(t, err)
	var ids []string
	for _, i := range res.Instances {
		ids = append(ids, i.InstanceID)
	}
	sort.Strings(ids)
	out, err := f.Terminate(ctx, ids)
	must(t, err)
	if rec.terms != 3 || len(out.Terminated) != 10 {
		t.Fatalf("%d TerminateInstances calls for 10 ids in batches of 4 (want 3), terminated %d", rec.terms, len(out.Terminated))
	}
	live, err := f.List(ctx, Filter{})
	must(t, err)
	if len(live) != 0 {
		t.Fatalf("%d still live", len(live))
	}

	// EC2 refuses a whole batch when one id is unknown.
	more, err := f.Launch(ctx, n.request(3, "on-demand"))
	must(t, err)
	ghost := "i-0123456789abcdef0"
	rec.onTerm = func(in *ec2.TerminateInstancesInput) error {
		for _, id := range in.InstanceIds {
			if id == ghost {
				return &smithy.GenericAPIError{Code: "InvalidInstanceID.NotFound", Message: "The instance ID '" + ghost + "' does not exist"}
			}
		}
		return nil
	}
	ids = []string{more.Instances[0].InstanceID, ghost, more.Instances[1].InstanceID, more.Instances[2].InstanceID}
	out, err = f.Terminate(ctx, ids)
	must(t, err)
	if len(out.Terminated) != 3 || len(out.Gone) != 1 || out.Gone[0] != ghost {
		t.Fatalf("result %+v", out)
	}
}

func TestErrorClassifiers(t *testing.T) {
	api := func(code string) error { return fmt.Errorf("wrapped: %w", &smithy.GenericAPIError{Code: code}) }
	if !IsNotFound(api("InvalidInstanceID.NotFound")) || IsNotFound(api("InvalidInstanceID.Malformed")) || IsNotFound(errors.New("x")) {
		t.Error("IsNotFound")
	}
	if !IsThrottling(api("RequestLimitExceeded")) || IsThrottling(api("InvalidParameterValue")) {
		t.Error("IsThrottling")
	}
	if !IsCapacity(api("InsufficientInstanceCapacity")) || IsCapacity(api("InvalidParameterValue")) || !IsCapacityCode("UnfulfillableCapacity") {
		t.Error("IsCapacity")
	}
}
