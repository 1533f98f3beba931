package fleet

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

// pairsSent lists the type@subnet overrides of a CreateFleet request, sorted.
func pairsSent(in *ec2.CreateFleetInput) []string {
	var pairs []string
	for _, cfg := range in.LaunchTemplateConfigs {
		for _, o := range cfg.Overrides {
			pairs = append(pairs, string(o.InstanceType)+"@"+aws.ToString(o.SubnetId))
		}
	}
	sort.Strings(pairs)
	return pairs
}

func product(types, subnets []string) []string {
	var pairs []string
	for _, it := range types {
		for _, s := range subnets {
			pairs = append(pairs, it+"@"+s)
		}
	}
	sort.Strings(pairs)
	return pairs
}

func TestLaunchOffersEveryTypeInEverySubnet(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	f, _ := newFleet(t, w)
	before := env.Calls("CreateFleet")

	res, err := f.Launch(ctx, n.request(3, OnDemand))
	must(t, err)

	if got := env.Calls("CreateFleet") - before; got != 1 || len(w.fleets) != 1 {
		t.Fatalf("%d CreateFleet calls reached moto (%d sent), want 1", got, len(w.fleets))
	}
	in := w.fleets[0]
	if got, want := pairsSent(in), product(testTypes, n.subnets); !reflect.DeepEqual(got, want) {
		t.Errorf("overrides sent %v, want types × subnets %v", got, want)
	}
	capacity := in.TargetCapacitySpecification
	if in.Type != types.FleetTypeInstant || aws.ToInt32(capacity.TotalTargetCapacity) != 3 || aws.ToInt32(capacity.OnDemandTargetCapacity) != 3 ||
		capacity.DefaultTargetCapacityType != types.DefaultTargetCapacityTypeOnDemand {
		t.Errorf("request type %s, capacity %+v; want instant, 3 on-demand", in.Type, *capacity)
	}
	if in.OnDemandOptions == nil || in.OnDemandOptions.AllocationStrategy != types.FleetOnDemandAllocationStrategyLowestPrice || in.SpotOptions != nil {
		t.Errorf("on-demand options %+v, spot options %+v", in.OnDemandOptions, in.SpotOptions)
	}
	spec := in.LaunchTemplateConfigs[0].LaunchTemplateSpecification
	if aws.ToString(spec.LaunchTemplateId) != n.templateID || spec.LaunchTemplateName != nil || aws.ToString(spec.Version) != "$Latest" {
		t.Errorf("launch template sent %+v", *spec)
	}
	if len(in.TagSpecifications) != 2 || in.TagSpecifications[0].ResourceType != types.ResourceTypeFleet || in.TagSpecifications[1].ResourceType != types.ResourceTypeInstance {
		t.Errorf("tag specifications %+v, want the fleet's and the instances'", in.TagSpecifications)
	}

	if len(res.Instances) != 3 || len(res.Errors) != 0 || len(res.Warnings) != 0 {
		t.Fatalf("result %+v, want 3 instances and no errors or warnings", res)
	}
	// moto puts every instance on the first override, in the first subnet,
	// and its answer names no AZ: the AZ comes from DescribeInstances.
	for _, got := range res.Instances {
		want := Launched{InstanceID: got.InstanceID, InstanceType: testTypes[0], SubnetID: n.subnets[0], AZ: n.azs[0], UsageClass: OnDemand}
		if got != want {
			t.Errorf("launched %+v, want %+v", got, want)
		}
	}
	wantTags := map[string]string{TagEnvironment: f.Environment(), TagPool: "linux", TagOwner: "acme", TagAssignment: "as-1", "team": "ci"}
	for _, inst := range describeByID(t, n.client, res.ids()) {
		if got := tagsOf(inst.Tags); !reflect.DeepEqual(got, wantTags) {
			t.Errorf("tags on %s = %v, want %v", aws.ToString(inst.InstanceId), got, wantTags)
		}
	}
}

func TestLaunchSpotByTemplateName(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	f, _ := newFleet(t, w)
	req := n.request(2, Spot)
	req.LaunchTemplateID, req.LaunchTemplateName, req.LaunchTemplateVersion = "", n.templateName, "1"

	res, err := f.Launch(ctx, req)
	must(t, err)

	in := w.fleets[0]
	spec := in.LaunchTemplateConfigs[0].LaunchTemplateSpecification
	if aws.ToString(spec.LaunchTemplateName) != n.templateName || spec.LaunchTemplateId != nil || aws.ToString(spec.Version) != "1" {
		t.Errorf("launch template sent %+v", *spec)
	}
	capacity := in.TargetCapacitySpecification
	if capacity.DefaultTargetCapacityType != types.DefaultTargetCapacityTypeSpot || aws.ToInt32(capacity.SpotTargetCapacity) != 2 || aws.ToInt32(capacity.TotalTargetCapacity) != 2 {
		t.Errorf("capacity %+v, want 2 spot", *capacity)
	}
	if in.SpotOptions == nil || in.SpotOptions.AllocationStrategy != types.SpotAllocationStrategyPriceCapacityOptimized || in.OnDemandOptions != nil {
		t.Errorf("spot options %+v, on-demand options %+v", in.SpotOptions, in.OnDemandOptions)
	}
	listed, err := f.List(ctx, Filter{})
	must(t, err)
	if got, want := idsOf(listed, instanceID), idsOf(res.Instances, launchedID); !reflect.DeepEqual(got, want) || len(want) != 2 {
		t.Fatalf("listed %v, launched %v", got, want)
	}
	for i := range listed {
		if res.Instances[i].UsageClass != Spot || listed[i].UsageClass != Spot {
			t.Errorf("usage class launched %s, listed %s; want spot", res.Instances[i].UsageClass, listed[i].UsageClass)
		}
	}
}

// moto creates a root EBS volume for each fleet instance but tags none:
// the fleet's own CreateTags must put the instance tags on them.
func TestLaunchTagsTheVolumes(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	f, waits := newFleet(t, w)

	res, err := f.Launch(ctx, n.request(2, OnDemand))
	must(t, err)
	if len(res.Warnings) != 0 || w.count("CreateTags") != 1 {
		t.Fatalf("warnings %v, %d CreateTags calls; want none and 1", res.Warnings, w.count("CreateTags"))
	}
	assertVolumeTags(t, n, f, res)
	if len(*waits) != 0 {
		t.Errorf("waited %v though moto knew the instances at once", *waits)
	}
}

func assertVolumeTags(t *testing.T, n network, f *Fleet, res LaunchResult) {
	t.Helper()
	var volumes []string
	for _, inst := range describeByID(t, n.client, res.ids()) {
		for _, bd := range inst.BlockDeviceMappings {
			volumes = append(volumes, aws.ToString(bd.Ebs.VolumeId))
		}
	}
	if len(volumes) != len(res.Instances) {
		t.Fatalf("moto gave %d volumes to %d instances", len(volumes), len(res.Instances))
	}
	out, err := n.client.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: volumes})
	must(t, err)
	for _, v := range out.Volumes {
		tags := tagsOf(v.Tags)
		if tags[TagEnvironment] != f.Environment() || tags[TagPool] != "linux" || tags[TagOwner] != "acme" || tags[TagAssignment] != "as-1" || tags["team"] != "ci" {
			t.Errorf("volume %s tags %v", aws.ToString(v.VolumeId), tags)
		}
	}
}

// notFoundFirst makes the describe of new instances miss them k times, as
// EC2 may right after a launch.
func notFoundFirst(k int) hook[ec2.DescribeInstancesInput, ec2.DescribeInstancesOutput] {
	misses := 0
	return func(ctx context.Context, in *ec2.DescribeInstancesInput, next func(context.Context, *ec2.DescribeInstancesInput) (*ec2.DescribeInstancesOutput, error)) (*ec2.DescribeInstancesOutput, error) {
		if misses < k {
			misses++
			return nil, apiError("InvalidInstanceID.NotFound")
		}
		return next(ctx, in)
	}
}

func TestLaunchVolumeTagsRetryOrWarn(t *testing.T) {
	n := newNetwork(t)

	t.Run("describe misses the new instances twice", func(t *testing.T) {
		w := wrap(n.client)
		w.describe = notFoundFirst(2)
		f, waits := newFleet(t, w)
		res, err := f.Launch(ctx, n.request(2, OnDemand))
		must(t, err)
		if len(res.Warnings) != 0 || w.count("DescribeInstances") != 3 {
			t.Fatalf("warnings %v after %d describes; want none after 3", res.Warnings, w.count("DescribeInstances"))
		}
		if want := []time.Duration{DefaultDescribeBackoff, 2 * DefaultDescribeBackoff}; !reflect.DeepEqual(*waits, want) {
			t.Errorf("waits %v, want %v", *waits, want)
		}
		assertVolumeTags(t, n, f, res)
	})

	t.Run("describe never finds them", func(t *testing.T) {
		w := wrap(n.client)
		w.describe = notFoundFirst(1000)
		f, waits := newFleet(t, w)
		res, err := f.Launch(ctx, n.request(2, OnDemand))
		must(t, err)
		if len(res.Instances) != 2 || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "InvalidInstanceID.NotFound") {
			t.Fatalf("result %+v: want the 2 instances and one warning", res)
		}
		if w.count("DescribeInstances") != DefaultDescribeAttempts || len(*waits) != DefaultDescribeAttempts-1 || w.count("CreateTags") != 0 {
			t.Errorf("%d describes, %d waits, %d CreateTags; want %d, %d, 0",
				w.count("DescribeInstances"), len(*waits), w.count("CreateTags"), DefaultDescribeAttempts, DefaultDescribeAttempts-1)
		}
	})

	t.Run("describe refused: no retry", func(t *testing.T) {
		w := wrap(n.client)
		w.describe = func(context.Context, *ec2.DescribeInstancesInput, func(context.Context, *ec2.DescribeInstancesInput) (*ec2.DescribeInstancesOutput, error)) (*ec2.DescribeInstancesOutput, error) {
			return nil, apiError("UnauthorizedOperation")
		}
		f, _ := newFleet(t, w)
		res, err := f.Launch(ctx, n.request(1, OnDemand))
		must(t, err)
		if len(res.Instances) != 1 || len(res.Warnings) != 1 || w.count("DescribeInstances") != 1 {
			t.Fatalf("result %+v after %d describes", res, w.count("DescribeInstances"))
		}
	})

	t.Run("volume tagging refused", func(t *testing.T) {
		w := wrap(n.client)
		w.createTags = func(context.Context, *ec2.CreateTagsInput, func(context.Context, *ec2.CreateTagsInput) (*ec2.CreateTagsOutput, error)) (*ec2.CreateTagsOutput, error) {
			return nil, apiError("UnauthorizedOperation")
		}
		f, _ := newFleet(t, w)
		res, err := f.Launch(ctx, n.request(1, OnDemand))
		must(t, err)
		if len(res.Instances) != 1 || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "UnauthorizedOperation") {
			t.Fatalf("result %+v: want the instance and a warning", res)
		}
	})
}

// shortSpot makes a spot CreateFleet deliver only `deliver` instances and
// report an error with code for an override, as EC2 does when spot capacity
// runs out. On-demand requests pass untouched.
func shortSpot(n network, deliver int, code string) hook[ec2.CreateFleetInput, ec2.CreateFleetOutput] {
	return short(n, types.DefaultTargetCapacityTypeSpot, deliver, code)
}

// short cuts requests of one usage class to `deliver` instances plus an
// error entry. moto never runs out, so the request that reaches it asks for
// `deliver`; the fleet's own request is left untouched for the test to inspect.
func short(n network, class types.DefaultTargetCapacityType, deliver int, code string) hook[ec2.CreateFleetInput, ec2.CreateFleetOutput] {
	return func(ctx context.Context, in *ec2.CreateFleetInput, next func(context.Context, *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error)) (*ec2.CreateFleetOutput, error) {
		if in.TargetCapacitySpecification.DefaultTargetCapacityType != class {
			return next(ctx, in)
		}
		reduced := *in
		capacity := *in.TargetCapacitySpecification
		capacity.TotalTargetCapacity = aws.Int32(int32(deliver))
		if class == types.DefaultTargetCapacityTypeSpot {
			capacity.SpotTargetCapacity = aws.Int32(int32(deliver))
		} else {
			capacity.OnDemandTargetCapacity = aws.Int32(int32(deliver))
		}
		reduced.TargetCapacitySpecification = &capacity
		out := &ec2.CreateFleetOutput{}
		if deliver > 0 {
			var err error
			if out, err = next(ctx, &reduced); err != nil {
				return nil, err
			}
		}
		out.Errors = append(out.Errors, types.CreateFleetError{
			ErrorCode: aws.String(code), ErrorMessage: aws.String("no capacity (injected)"), Lifecycle: types.InstanceLifecycle(class),
			LaunchTemplateAndOverrides: &types.LaunchTemplateAndOverridesResponse{Overrides: &types.FleetLaunchTemplateOverrides{InstanceType: types.InstanceType(testTypes[1]), SubnetId: aws.String(n.subnets[1])}},
		})
		return out, nil
	}
}

func TestSpotFallsBackOnDemandForTheMissingCount(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	w.createFleet = shortSpot(n, 1, "InsufficientInstanceCapacity")
	f, _ := newFleet(t, w)
	req := n.request(4, Spot)
	req.OnDemandFallback = true

	res, err := f.Launch(ctx, req)
	must(t, err)

	if len(w.fleets) != 2 {
		t.Fatalf("%d CreateFleet calls, want spot then on-demand", len(w.fleets))
	}
	second := w.fleets[1]
	if c := second.TargetCapacitySpecification; c.DefaultTargetCapacityType != types.DefaultTargetCapacityTypeOnDemand ||
		aws.ToInt32(c.TotalTargetCapacity) != 3 || aws.ToInt32(c.OnDemandTargetCapacity) != 3 || c.SpotTargetCapacity != nil {
		t.Errorf("fallback capacity %+v, want the 3 missing on demand", *c)
	}
	if !reflect.DeepEqual(pairsSent(second), pairsSent(w.fleets[0])) || !reflect.DeepEqual(second.TagSpecifications, w.fleets[0].TagSpecifications) {
		t.Error("the fallback offers other overrides or tags than the spot request")
	}
	classes := map[string]int{}
	for _, i := range res.Instances {
		classes[i.UsageClass]++
	}
	if len(res.Instances) != 4 || classes[Spot] != 1 || classes[OnDemand] != 3 {
		t.Errorf("launched %d instances by class %v, want 1 spot and 3 on-demand", len(res.Instances), classes)
	}
	want := LaunchError{Code: "InsufficientInstanceCapacity", Message: "no capacity (injected)", InstanceType: testTypes[1], SubnetID: n.subnets[1], UsageClass: Spot}
	if len(res.Errors) != 1 || res.Errors[0] != want {
		t.Errorf("errors %+v, want [%+v]", res.Errors, want)
	}
	if !strings.Contains(res.Detail(), "InsufficientInstanceCapacity (m7i.large in "+n.subnets[1]+", spot)") {
		t.Errorf("detail %q", res.Detail())
	}
	// moto agrees on the lifecycle of each instance.
	listed, err := f.List(ctx, Filter{IDs: res.ids()})
	must(t, err)
	byID := map[string]string{}
	for _, i := range listed {
		byID[i.ID] = i.UsageClass
	}
	for _, l := range res.Instances {
		if byID[l.InstanceID] != l.UsageClass {
			t.Errorf("%s: launched as %s, EC2 says %q", l.InstanceID, l.UsageClass, byID[l.InstanceID])
		}
	}
}

func TestEveryCapacityCodeTriggersTheFallback(t *testing.T) {
	n := newNetwork(t)
	for code := range capacityCodes {
		w := wrap(n.client)
		w.createFleet = shortSpot(n, 0, code)
		f, _ := newFleet(t, w)
		req := n.request(2, Spot)
		req.OnDemandFallback = true
		res, err := f.Launch(ctx, req)
		must(t, err)
		if len(w.fleets) != 2 || len(res.Instances) != 2 {
			t.Errorf("%s: %d CreateFleet calls, %d instances; want 2 and 2", code, len(w.fleets), len(res.Instances))
		}
	}
}

func TestNoFallback(t *testing.T) {
	n := newNetwork(t)
	cases := []struct {
		name     string
		class    string
		fallback bool
		deliver  int
		code     string
	}{
		{"fallback off", Spot, false, 1, "InsufficientInstanceCapacity"},
		{"not a capacity error", Spot, true, 1, "InvalidParameterValue"},
		{"quota, not capacity", Spot, true, 1, "VcpuLimitExceeded"},
		{"spot delivered everything", Spot, true, 3, "InsufficientInstanceCapacity"},
		{"on-demand request", OnDemand, true, 1, "InsufficientInstanceCapacity"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := wrap(n.client)
			w.createFleet = short(n, types.DefaultTargetCapacityType(c.class), c.deliver, c.code)
			f, _ := newFleet(t, w)
			req := n.request(3, c.class)
			req.OnDemandFallback = c.fallback
			res, err := f.Launch(ctx, req)
			must(t, err)
			if len(w.fleets) != 1 || len(res.Instances) != c.deliver || res.Missing(3) != 3-c.deliver || len(res.Errors) != 1 {
				t.Errorf("%d CreateFleet calls, %d instances, %d errors; want 1, %d, 1", len(w.fleets), len(res.Instances), len(res.Errors), c.deliver)
			}
		})
	}
}

func TestFailedFallbackStillReturnsTheSpotInstances(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	spot := shortSpot(n, 1, "UnfulfillableCapacity")
	w.createFleet = func(ctx context.Context, in *ec2.CreateFleetInput, next func(context.Context, *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error)) (*ec2.CreateFleetOutput, error) {
		if in.TargetCapacitySpecification.DefaultTargetCapacityType == types.DefaultTargetCapacityTypeOnDemand {
			return nil, apiError("InternalError")
		}
		return spot(ctx, in, next)
	}
	f, _ := newFleet(t, w)
	req := n.request(3, Spot)
	req.OnDemandFallback = true

	res, err := f.Launch(ctx, req)

	if err == nil || awserr.Code(err) != "InternalError" || !strings.Contains(err.Error(), "fallback for 2") {
		t.Errorf("error %v, want the fallback's InternalError", err)
	}
	if len(res.Instances) != 1 || res.Instances[0].UsageClass != Spot {
		t.Fatalf("instances %+v, want the spot one the caller must record", res.Instances)
	}
	assertVolumeTags(t, n, f, res)
}

func TestLaunchErrorFromEC2(t *testing.T) {
	n := newNetwork(t)
	f, _ := newFleet(t, wrap(n.client))
	req := n.request(1, OnDemand)
	req.LaunchTemplateID = "lt-0123456789abcdef0"
	res, err := f.Launch(ctx, req)
	if err == nil || len(res.Instances) != 0 {
		t.Fatalf("Launch from a template moto does not know = %+v, %v", res, err)
	}
}

func TestLaunchValidates(t *testing.T) {
	long := strings.Repeat("x", 129)
	manyTags := map[string]string{}
	for i := 0; i < 47; i++ {
		manyTags[fmt.Sprint("k", i)] = "v"
	}
	cases := []struct {
		field  string
		change func(*LaunchRequest)
	}{
		{"LaunchTemplateID", func(r *LaunchRequest) { r.LaunchTemplateID = "" }},
		{"LaunchTemplateName", func(r *LaunchRequest) { r.LaunchTemplateName = "lt" }},
		{"LaunchTemplateVersion", func(r *LaunchRequest) { r.LaunchTemplateVersion = "" }},
		{"InstanceTypes", func(r *LaunchRequest) { r.InstanceTypes = nil }},
		{"InstanceTypes[1]", func(r *LaunchRequest) { r.InstanceTypes = []string{"c7i.large", " "} }},
		{"InstanceTypes[2]", func(r *LaunchRequest) { r.InstanceTypes = []string{"c7i.large", "m7i.large", "c7i.large"} }},
		{"SubnetIDs", func(r *LaunchRequest) { r.SubnetIDs = []string{} }},
		{"SubnetIDs[1]", func(r *LaunchRequest) { r.SubnetIDs = []string{"subnet-1", "subnet-1"} }},
		{"Count", func(r *LaunchRequest) { r.Count = 0 }},
		{"Count", func(r *LaunchRequest) { r.Count = -2 }},
		{"UsageClass", func(r *LaunchRequest) { r.UsageClass = "reserved" }},
		{"UsageClass", func(r *LaunchRequest) { r.UsageClass = "" }},
		{"Pool", func(r *LaunchRequest) { r.Pool = "" }},
		{"Owner", func(r *LaunchRequest) { r.Owner = "" }},
		{"Assignment", func(r *LaunchRequest) { r.Assignment = "" }},
		{`Tags["ghr:pool"]`, func(r *LaunchRequest) { r.Tags = map[string]string{TagPool: "other"} }},
		{`Tags["aws:x"]`, func(r *LaunchRequest) { r.Tags = map[string]string{"aws:x": "y"} }},
		{`Tags[""]`, func(r *LaunchRequest) { r.Tags = map[string]string{"": "y"} }},
		{fmt.Sprintf("Tags[%q]", long), func(r *LaunchRequest) { r.Tags = map[string]string{long: "y"} }},
		{"Tags", func(r *LaunchRequest) { r.Tags = manyTags }},
	}
	valid := LaunchRequest{LaunchTemplateID: "lt-1", LaunchTemplateVersion: "1", InstanceTypes: testTypes, SubnetIDs: []string{"subnet-1"},
		Count: 1, UsageClass: Spot, Pool: "linux", Owner: "acme", Assignment: "as-1"}
	w := wrap(nil) // a call to EC2 would panic: validation must come first
	f := New(w, "env")
	if err := valid.Validate(); err != nil {
		t.Fatalf("the valid request is refused: %v", err)
	}
	for _, c := range cases {
		req := valid
		c.change(&req)
		_, err := f.Launch(ctx, req)
		var ve *fielderr.Error
		if !errors.As(err, &ve) || ve.Field != c.field || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: Launch = %v, want a *fielderr.Error naming the field", c.field, err)
		}
	}
	_, err := New(w, "").Launch(ctx, valid)
	var ve *fielderr.Error
	if !errors.As(err, &ve) || ve.Field != "environment" {
		t.Errorf("a fleet without environment launched: %v", err)
	}
	if len(w.fleets) != 0 {
		t.Errorf("%d CreateFleet calls for invalid requests", len(w.fleets))
	}
}

func TestDetailIsStableAndDeduplicated(t *testing.T) {
	e1 := LaunchError{Code: "UnfulfillableCapacity", InstanceType: "m7i.large", SubnetID: "subnet-2", UsageClass: Spot}
	e2 := LaunchError{Code: "InsufficientInstanceCapacity", InstanceType: "c7i.large", SubnetID: "subnet-1", UsageClass: Spot}
	got := LaunchResult{Errors: []LaunchError{e1, e2, e1}}.Detail()
	want := "InsufficientInstanceCapacity (c7i.large in subnet-1, spot); UnfulfillableCapacity (m7i.large in subnet-2, spot)"
	if got != want {
		t.Errorf("Detail = %q, want %q", got, want)
	}
	if d := (LaunchResult{}).Detail(); d != "" {
		t.Errorf("Detail of no errors = %q", d)
	}
}

// profileRefusal answers the first `times` CreateFleet requests as EC2 does
// while the launch template's instance profile is a few seconds old: nothing
// launched, an InvalidParameterValue for each override.
func profileRefusal(times int) hook[ec2.CreateFleetInput, ec2.CreateFleetOutput] {
	n := 0
	return func(ctx context.Context, in *ec2.CreateFleetInput, next func(context.Context, *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error)) (*ec2.CreateFleetOutput, error) {
		if n++; n > times {
			return next(ctx, in)
		}
		out := &ec2.CreateFleetOutput{}
		for _, o := range in.LaunchTemplateConfigs[0].Overrides {
			out.Errors = append(out.Errors, types.CreateFleetError{ErrorCode: aws.String("InvalidParameterValue"),
				ErrorMessage:               aws.String("Value (arn:aws:iam::123456789012:instance-profile/ghr-x) for parameter iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN"),
				LaunchTemplateAndOverrides: &types.LaunchTemplateAndOverridesResponse{Overrides: &types.FleetLaunchTemplateOverrides{InstanceType: o.InstanceType, SubnetId: o.SubnetId}}})
		}
		return out, nil
	}
}

func TestALaunchWaitsForEC2ToKnowANewInstanceProfile(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	w.createFleet = profileRefusal(3)
	f, waits := newFleet(t, w)
	res, err := f.Launch(ctx, n.request(2, OnDemand))
	must(t, err)
	if len(res.Instances) != 2 || len(w.fleets) != 4 {
		t.Fatalf("launched %d instances in %d CreateFleet requests, want 2 in 4 (3 refused)", len(res.Instances), len(w.fleets))
	}
	if !reflect.DeepEqual(*waits, []time.Duration{time.Second, 2 * time.Second, 2 * time.Second}) {
		t.Errorf("waits %v, want 1s, 2s, 2s", *waits)
	}
}

func TestALaunchGivesUpOnAnInstanceProfileEC2NeverKnows(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	w.createFleet = profileRefusal(1000)
	f, waits := newFleet(t, w)
	res, err := f.Launch(ctx, n.request(1, OnDemand))
	must(t, err)
	var total time.Duration
	for _, d := range *waits {
		total += d
	}
	if len(res.Instances) != 0 || total > f.ProfileWait || total < f.ProfileWait/2 || !strings.Contains(res.Detail(), "Invalid IAM Instance Profile ARN (EC2 does not know") {
		t.Fatalf("after %v of waits in %d requests: %d instances, %q; want none and the refusal, within ProfileWait %v", total, len(w.fleets), len(res.Instances), res.Detail(), f.ProfileWait)
	}
	// Without the wait (ProfileWait 0) the first refusal is the answer.
	w2 := wrap(n.client)
	w2.createFleet = profileRefusal(1)
	f2, _ := newFleet(t, w2)
	f2.ProfileWait = 0
	if res, _ := f2.Launch(ctx, n.request(1, OnDemand)); len(res.Instances) != 0 || len(w2.fleets) != 1 {
		t.Fatalf("ProfileWait 0: %d requests, %d instances", len(w2.fleets), len(res.Instances))
	}
}

func TestOtherInvalidParameterErrorsAreNotWaitedFor(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	w.createFleet = short(n, types.DefaultTargetCapacityTypeOnDemand, 0, "InvalidParameterValue")
	f, waits := newFleet(t, w)
	if res, _ := f.Launch(ctx, n.request(1, OnDemand)); len(res.Instances) != 0 || len(w.fleets) != 1 || len(*waits) != 0 {
		t.Fatalf("an InvalidParameterValue about something else: %d requests, %d waits", len(w.fleets), len(*waits))
	}
}
