package ec2capacity

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

var ctx = context.Background()

// front is a Model before moto, with a template and two subnets in two AZs.
type front struct {
	model    *Model
	ec       *ec2.Client // through the model
	moto     *ec2.Client
	template string
	subnetA  string // us-east-1a
	subnetB  string // us-east-1b
	url      string // the model's front
}

var third int

func startFront(t *testing.T) front {
	t.Helper()
	cfg := env.Config(t)
	f := front{model: New(cfg.EC2()), moto: cfg.EC2()}
	target, _ := url.Parse(env.URL)
	srv := httptest.NewServer(f.model.Front(httputil.NewSingleHostReverseProxy(target)))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	through, err := awsconf.Load(ctx, awsconf.Options{Region: awstest.Region, Endpoint: srv.URL, AccessKeyID: "testing", SecretAccessKey: "testing", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	f.ec = through.EC2()
	third++
	vpc, err := f.moto.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String(fmt.Sprintf("10.%d.0.0/16", 100+third))})
	if err != nil {
		t.Fatal(err)
	}
	subnet := func(az string, n int) string {
		sn, err := f.moto.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, AvailabilityZone: aws.String(az), CidrBlock: aws.String(fmt.Sprintf("10.%d.%d.0/24", 100+third, n))})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(sn.Subnet.SubnetId)
	}
	f.subnetA, f.subnetB = subnet("us-east-1a", 1), subnet("us-east-1b", 2)
	lt, err := f.moto.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(awstest.Name(t, "cap")),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(env.Network(t).AMI)}})
	if err != nil {
		t.Fatal(err)
	}
	f.template = aws.ToString(lt.LaunchTemplate.LaunchTemplateId)
	return f
}

// launch is an instant fleet of n instances of class with every type in
// both subnets, as the product asks.
func (f front) launch(t *testing.T, class string, n int, instanceTypes ...string) *ec2.CreateFleetOutput {
	t.Helper()
	var overrides []types.FleetLaunchTemplateOverridesRequest
	for _, it := range instanceTypes {
		for _, s := range []string{f.subnetA, f.subnetB} {
			overrides = append(overrides, types.FleetLaunchTemplateOverridesRequest{InstanceType: types.InstanceType(it), SubnetId: aws.String(s)})
		}
	}
	out, err := f.ec.CreateFleet(ctx, &ec2.CreateFleetInput{Type: types.FleetTypeInstant,
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String(f.template), Version: aws.String("$Latest")},
			Overrides:                   overrides}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(int32(n)), DefaultTargetCapacityType: types.DefaultTargetCapacityType(class)},
	})
	if err != nil {
		t.Fatalf("CreateFleet: %v (EC2 answers a short instant fleet with Errors, not an API error)", err)
	}
	return out
}

// got counts the fleet's instances by "type@subnet" and its errors by
// "code type@subnet class".
func got(out *ec2.CreateFleetOutput) (instances map[string]int, errs map[string]int) {
	instances, errs = map[string]int{}, map[string]int{}
	for _, g := range out.Instances {
		subnet := ""
		if g.LaunchTemplateAndOverrides != nil && g.LaunchTemplateAndOverrides.Overrides != nil {
			subnet = aws.ToString(g.LaunchTemplateAndOverrides.Overrides.SubnetId)
		}
		instances[string(g.InstanceType)+"@"+subnet] += len(g.InstanceIds)
	}
	for _, e := range out.Errors {
		o := e.LaunchTemplateAndOverrides.Overrides
		errs[fmt.Sprintf("%s %s@%s %s", aws.ToString(e.ErrorCode), o.InstanceType, aws.ToString(o.SubnetId), e.Lifecycle)]++
	}
	return instances, errs
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func TestAModelWithNoLimitsLaunchesWhatMotoLaunches(t *testing.T) {
	f := startFront(t)
	insts, errs := got(f.launch(t, OnDemand, 3, "c7i.large", "m7i.large"))
	if total(insts) != 3 || len(errs) != 0 {
		t.Fatalf("instances %v, errors %v; want 3 instances and no error", insts, errs)
	}
}

// Checked: with the type-and-AZ limit taken out of allocate, the fleet gets
// all three c7i.large in us-east-1a and this test fails.
func TestAFleetBeyondATypesCapacityInAnAZGetsTheRestElsewhereAndAnErrorForThatPool(t *testing.T) {
	f := startFront(t)
	f.model.SetAvailable("c7i.large", "us-east-1a", 1)
	insts, errs := got(f.launch(t, OnDemand, 3, "c7i.large", "m7i.large"))
	if insts["c7i.large@"+f.subnetA] != 1 || insts["c7i.large@"+f.subnetB] != 2 || total(insts) != 3 {
		t.Fatalf("instances %v: want 1 c7i.large in us-east-1a (its capacity) and 2 in us-east-1b", insts)
	}
	if want := "InsufficientInstanceCapacity c7i.large@" + f.subnetA + " on-demand"; errs[want] != 1 || len(errs) != 1 {
		t.Fatalf("errors %v, want one %s", errs, want)
	}
	// Nothing left anywhere: no instance, an error for every pool tried.
	for _, it := range []string{"c7i.large", "m7i.large"} {
		for _, az := range []string{"us-east-1a", "us-east-1b"} {
			f.model.SetAvailable(it, az, 0)
		}
	}
	out := f.launch(t, Spot, 2, "c7i.large", "m7i.large")
	insts, errs = got(out)
	if total(insts) != 0 || len(errs) != 4 {
		t.Fatalf("instances %v, errors %v; want none and 4 errors", insts, errs)
	}
	if msg := aws.ToString(out.Errors[0].ErrorMessage); !strings.Contains(msg, "no Spot capacity") {
		t.Fatalf("spot error message %q", msg)
	}
	// Capacity comes back.
	f.model.SetAvailable("m7i.large", "us-east-1b", -1)
	if insts, _ = got(f.launch(t, OnDemand, 2, "c7i.large", "m7i.large")); insts["m7i.large@"+f.subnetB] != 2 {
		t.Fatalf("instances %v once m7i.large came back in us-east-1b", insts)
	}
}

// Checked: with the quota taken out of allocate, three c7i.large launch
// and this test fails.
func TestAnOnDemandFleetBeyondTheVCPUQuotaGetsVcpuLimitExceeded(t *testing.T) {
	f := startFront(t)
	f.model.SetQuota(OnDemand, "Standard", 4) // two c7i.large (2 vCPUs each)
	out := f.launch(t, OnDemand, 3, "c7i.large")
	insts, errs := got(out)
	if total(insts) != 2 {
		t.Fatalf("instances %v, want 2 within a 4-vCPU quota", insts)
	}
	if len(out.Errors) == 0 || aws.ToString(out.Errors[0].ErrorCode) != "VcpuLimitExceeded" || !strings.Contains(aws.ToString(out.Errors[0].ErrorMessage), "vCPU limit of 4") {
		t.Fatalf("errors %v, want VcpuLimitExceeded naming the limit of 4", errs)
	}
	// Running instances hold the quota; ended ones free it.
	if insts, _ := got(f.launch(t, OnDemand, 1, "c7i.large")); total(insts) != 0 {
		t.Fatalf("a launch at the quota got %v", insts)
	}
	var ids []string
	for _, g := range out.Instances {
		ids = append(ids, g.InstanceIds...)
	}
	if _, err := f.moto.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
		t.Fatal(err)
	}
	if insts, _ := got(f.launch(t, OnDemand, 2, "c7i.large")); total(insts) != 2 {
		t.Fatalf("after the instances ended a launch got %v, want 2", insts)
	}
	// Another group has its own quota; spot has its own too.
	if insts, _ := got(f.launch(t, OnDemand, 1, "g5.xlarge")); total(insts) != 1 {
		t.Fatalf("a G instance under a Standard quota got %v", insts)
	}
}

// Checked: with the spot quota taken out, both launch and this test fails.
func TestASpotFleetBeyondTheSpotVCPUQuotaGetsMaxSpotInstanceCountExceeded(t *testing.T) {
	f := startFront(t)
	f.model.SetQuota(Spot, "Standard", 2)
	out := f.launch(t, Spot, 2, "c7i.large")
	insts, _ := got(out)
	if total(insts) != 1 || len(out.Errors) == 0 || aws.ToString(out.Errors[0].ErrorCode) != "MaxSpotInstanceCountExceeded" || out.Errors[0].Lifecycle != types.InstanceLifecycleSpot {
		t.Fatalf("instances %v, errors %+v; want 1 and MaxSpotInstanceCountExceeded (spot)", insts, out.Errors)
	}
}

func TestInstanceTypesFallInTheirQuotaGroups(t *testing.T) {
	for it, want := range map[string]string{"c7i.large": "Standard", "m7g.xlarge": "Standard", "t3.micro": "Standard", "z1d.large": "Standard",
		"g5.xlarge": "G and VT", "vt1.3xlarge": "G and VT", "p4d.24xlarge": "P", "inf2.xlarge": "Inf", "trn1.2xlarge": "Trn", "x2idn.16xlarge": "X",
		"f1.2xlarge": "F", "dl1.24xlarge": "DL", "hpc6a.48xlarge": "HPC", "u-6tb1.metal": "High Memory"} {
		if got := Group(it); got != want {
			t.Errorf("Group(%s) = %s, want %s", it, got, want)
		}
	}
}

// Checked: without serveQuota in Front, moto answers NoSuchResourceException
// and this test fails.
func TestServiceQuotasAnswersTheStandardVCPUQuotasATestSet(t *testing.T) {
	f := startFront(t)
	through, err := awsconf.Load(ctx, awsconf.Options{Region: awstest.Region, Endpoint: f.url, AccessKeyID: "testing", SecretAccessKey: "testing", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	sq := through.ServiceQuotas()
	get := func(code string) (float64, error) {
		out, err := sq.GetServiceQuota(ctx, &servicequotas.GetServiceQuotaInput{ServiceCode: aws.String("ec2"), QuotaCode: aws.String(code)})
		if err != nil {
			return 0, err
		}
		return aws.ToFloat64(out.Quota.Value), nil
	}
	f.model.SetQuota(OnDemand, "Standard", 64)
	f.model.SetQuota(Spot, "Standard", 32)
	if v, err := get("L-1216C47A"); err != nil || v != 64 {
		t.Fatalf("On-Demand Standard quota = %v, %v; want 64", v, err)
	}
	if v, err := get("L-34B43A08"); err != nil || v != 32 {
		t.Fatalf("Spot Standard quota = %v, %v; want 32", v, err)
	}
	f.model.SetQuota(Spot, "Standard", -1)
	if _, err := get("L-34B43A08"); err == nil {
		t.Fatal("a quota no test set was answered (moto knows none of EC2's)")
	}
}
