package sandbox

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// The endpoint's EC2 rules (ec2rules.go, ec2fleetconfig.go, ec2volumes.go)
// in front of a moto of their own, without the rest of a sandbox: what a
// CreateFleet through the endpoint gets, and what a launch of the product's
// fleet gets.

type ec2Front struct {
	ec    *ec2.Client // through the endpoint's rules
	moto  *ec2.Client // moto itself, to set things up
	ami   string
	vpc   string
	front string // the endpoint's URL
}

func startEC2Front(t *testing.T) ec2Front {
	t.Helper()
	moto, err := awstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(moto.Stop)
	cfg := moto.Config(t)
	s := &Sandbox{Moto: moto, AWS: cfg}
	target, _ := url.Parse(moto.URL)
	srv := httptest.NewServer(s.withIAMLag(httputil.NewSingleHostReverseProxy(target)))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	front, err := awsconf.Load(ctx, awsconf.Options{Region: Region, Endpoint: srv.URL, AccessKeyID: "rules", SecretAccessKey: "rules", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := ec2Front{ec: front.EC2(), moto: cfg.EC2(), ami: moto.Network(t).AMI, front: srv.URL}
	vpc, err := f.moto.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.20.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	f.vpc = aws.ToString(vpc.Vpc.VpcId)
	return f
}

func (f ec2Front) subnet(t *testing.T, az string, third int) string {
	t.Helper()
	sn, err := f.moto.CreateSubnet(context.Background(), &ec2.CreateSubnetInput{VpcId: aws.String(f.vpc), CidrBlock: aws.String(fmt.Sprintf("10.20.%d.0/24", third)), AvailabilityZone: aws.String(az)})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(sn.Subnet.SubnetId)
}

func (f ec2Front) template(t *testing.T, name string, data *ec2types.RequestLaunchTemplateData) string {
	t.Helper()
	if data.ImageId == nil {
		data.ImageId = aws.String(f.ami)
	}
	lt, err := f.moto.CreateLaunchTemplate(context.Background(), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: data})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(lt.LaunchTemplate.LaunchTemplateId)
}

// launch makes an instant on-demand CreateFleet of one c7i.large in each
// subnet (none: no subnet override).
func (f ec2Front) launch(template string, subnets ...string) (*ec2.CreateFleetOutput, error) {
	overrides := []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeC7iLarge}}
	if len(subnets) > 0 {
		overrides = nil
		for _, s := range subnets {
			overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: ec2types.InstanceTypeC7iLarge, SubnetId: aws.String(s)})
		}
	}
	return f.ec.CreateFleet(context.Background(), &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String(template), Version: aws.String("$Latest")},
			Overrides:                   overrides}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
	})
}

// Issue 37 item 1. A CreateFleet naming two subnets of one AZ is refused
// as a whole, with EC2's code and message; subnets of different AZs are
// not. Checked: with the rule taken out of withIAMLag (no
// fleetConfigRefusal call), moto launches the first request and this test
// fails.
func TestEC2RefusesAFleetWithTwoSubnetsOfOneAZ(t *testing.T) {
	f := startEC2Front(t)
	a1, a2, b1 := f.subnet(t, "us-east-1a", 1), f.subnet(t, "us-east-1a", 2), f.subnet(t, "us-east-1b", 3)
	lt := f.template(t, "rule-subnets", &ec2types.RequestLaunchTemplateData{})

	out, err := f.launch(lt, a1, b1, a2)
	if awserr.Code(err) != "InvalidFleetConfig" || !strings.Contains(awserr.Message(err), "The fleet configuration contains duplicate instance pools.") {
		t.Errorf("two subnets of us-east-1a in one CreateFleet: %v (answer %+v), want EC2's InvalidFleetConfig", err, out)
	}
	if out, err := f.launch(lt, a1, b1); err != nil || len(out.Instances) != 1 {
		t.Errorf("subnets of two AZs: %v (answer %+v), want one instance", err, out)
	}
}

// Issue 37 item 1: the product's launch in a pool listing two subnets of
// one AZ gets its instances through the rule above. Checked: with the
// fleet offering every subnet in each request (subnetRounds returning one
// round of all subnets), EC2's refusal comes back and this test fails.
func TestTheFleetLaunchesInAPoolWithTwoSubnetsOfOneAZ(t *testing.T) {
	f := startEC2Front(t)
	a1, a2, b1 := f.subnet(t, "us-east-1a", 1), f.subnet(t, "us-east-1a", 2), f.subnet(t, "us-east-1b", 3)
	lt := f.template(t, "pool-subnets", &ec2types.RequestLaunchTemplateData{})
	fl := fleet.New(f.ec, "rules")
	req := fleet.LaunchRequest{LaunchTemplateID: lt, LaunchTemplateVersion: "$Latest", InstanceTypes: []string{"c7i.large", "m7i.large"},
		SubnetIDs: []string{a1, a2, b1}, SubnetZones: map[string]string{a1: "us-east-1a", a2: "us-east-1a", b1: "us-east-1b"},
		Count: 2, UsageClass: fleet.OnDemand, Pool: "linux", Owner: "acme", Assignment: "as-1"}
	for i := range 2 { // from each of us-east-1a's subnets in turn
		res, err := fl.Launch(context.Background(), req)
		if err != nil || len(res.Instances) != 2 {
			t.Fatalf("launch %d in subnets %v (two in us-east-1a): %d instances, %v; %s", i+1, req.SubnetIDs, len(res.Instances), err, res.Detail())
		}
	}
}

// rootDevice is the root device name of the front's image.
func (f ec2Front) rootDevice(t *testing.T) string {
	t.Helper()
	img, err := f.moto.DescribeImages(context.Background(), &ec2.DescribeImagesInput{ImageIds: []string{f.ami}})
	if err != nil || len(img.Images) != 1 {
		t.Fatalf("image %s: %v", f.ami, err)
	}
	return aws.ToString(img.Images[0].RootDeviceName)
}

// refusedWith asserts a launch launched nothing and got code for its
// override, with a message holding what.
func refusedWith(t *testing.T, name string, out *ec2.CreateFleetOutput, err error, code, what string) {
	t.Helper()
	if err != nil || len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != code ||
		!strings.Contains(aws.ToString(out.Errors[0].ErrorMessage), what) {
		t.Errorf("%s: %v, answer %+v; want no instance and %s (%q)", name, err, out, code, what)
	}
}

func launched(t *testing.T, name string, out *ec2.CreateFleetOutput, err error) {
	t.Helper()
	if err != nil || len(out.Instances) != 1 || len(out.Errors) != 0 {
		t.Errorf("%s: %v, answer %+v; want one instance", name, err, out)
	}
}

// Issue 37 item 2. A root volume smaller than the image's root snapshot
// (moto's images have 15 GiB ones) is refused for each override, as EC2
// refuses it; one of the snapshot's size launches. Checked: with
// rootSnapshotRefusal answering "" the 10 GiB launch succeeds and this
// test fails.
func TestEC2RefusesARootVolumeSmallerThanTheImagesSnapshot(t *testing.T) {
	f := startEC2Front(t)
	root := f.rootDevice(t)
	for _, c := range []struct {
		size   int32
		refuse bool
	}{{10, true}, {15, false}} {
		lt := f.template(t, fmt.Sprintf("rule-root-%d", c.size), &ec2types.RequestLaunchTemplateData{BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{
			DeviceName: aws.String(root), Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(c.size), VolumeType: ec2types.VolumeTypeGp3}}}})
		out, err := f.launch(lt)
		name := fmt.Sprintf("a %d GiB root volume from a 15 GiB snapshot", c.size)
		if c.refuse {
			refusedWith(t, name, out, err, "InvalidBlockDeviceMapping", fmt.Sprintf("Volume of size %dGB is smaller than snapshot 'snap-", c.size))
		} else {
			launched(t, name, out, err)
		}
	}
}

// Issue 37 item 3. An io1 or io2 volume without Iops is refused, as EC2
// refuses it; with Iops it launches. Checked: with the io1/io2 rule taken
// out of volumeRefusal both launches without Iops succeed and this test
// fails.
func TestEC2RefusesIo1AndIo2WithoutIops(t *testing.T) {
	f := startEC2Front(t)
	root := f.rootDevice(t)
	for _, c := range []struct {
		typ  ec2types.VolumeType
		iops int32
	}{{ec2types.VolumeTypeIo1, 0}, {ec2types.VolumeTypeIo2, 0}, {ec2types.VolumeTypeIo2, 3000}} {
		ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(30), VolumeType: c.typ}
		if c.iops > 0 {
			ebs.Iops = aws.Int32(c.iops)
		}
		lt := f.template(t, fmt.Sprintf("rule-%s-%d", c.typ, c.iops), &ec2types.RequestLaunchTemplateData{BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{
			DeviceName: aws.String(root), Ebs: ebs}}})
		out, err := f.launch(lt)
		name := fmt.Sprintf("an %s root volume with iops %d", c.typ, c.iops)
		if c.iops == 0 {
			refusedWith(t, name, out, err, "InvalidParameterCombination", fmt.Sprintf("The parameter iops must be specified for %s volumes.", c.typ))
		} else {
			launched(t, name, out, err)
		}
	}
}
