package fleet

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// The tests share one moto and count its calls package-wide (env.Calls), so
// none of them runs in parallel.
var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

var ctx = context.Background()

// network is a VPC with two subnets in two AZs and a launch template, in moto.
type network struct {
	client       *ec2.Client
	subnets      []string
	azs          []string
	templateID   string
	templateName string
}

func newNetwork(t testing.TB) network {
	t.Helper()
	c := env.Config(t).EC2()
	vpc, err := c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	must(t, err)
	n := network{client: c, azs: []string{"us-east-1a", "us-east-1b"}}
	for i, az := range n.azs {
		sn, err := c.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.0.%d.0/24", i)), AvailabilityZone: aws.String(az)})
		must(t, err)
		n.subnets = append(n.subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	n.templateName = awstest.Name(t, "lt")
	lt, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(n.templateName),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(env.Network(t).AMI), InstanceType: types.InstanceTypeT3Micro},
	})
	must(t, err)
	n.templateID = aws.ToString(lt.LaunchTemplate.LaunchTemplateId)
	return n
}

var testTypes = []string{"c7i.large", "m7i.large", "c6i.large"}

func (n network) request(count int, class string) LaunchRequest {
	return LaunchRequest{
		LaunchTemplateID: n.templateID, LaunchTemplateVersion: "$Latest",
		InstanceTypes: testTypes, SubnetIDs: n.subnets, Count: count, UsageClass: class,
		Pool: "linux", Owner: "acme", Assignment: "as-1", Tags: map[string]string{"team": "ci"},
	}
}

// newFleet returns a fleet of its own environment over the wrapped client,
// with waits recorded instead of slept.
func newFleet(t testing.TB, w *wrapped) (*Fleet, *[]time.Duration) {
	f := New(w, awstest.Name(t, "env"))
	var waits []time.Duration
	f.Sleep = func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}
	return f, &waits
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wrapped is the real moto client behind the fleet's narrow interface. It
// counts calls, keeps the CreateFleet requests the fleet sent, and lets a
// test change an answer through a hook that may or may not call the real one.
type wrapped struct {
	EC2API
	mu     sync.Mutex
	calls  map[string]int
	fleets []*ec2.CreateFleetInput

	createFleet hook[ec2.CreateFleetInput, ec2.CreateFleetOutput]
	describe    hook[ec2.DescribeInstancesInput, ec2.DescribeInstancesOutput]
	terminate   hook[ec2.TerminateInstancesInput, ec2.TerminateInstancesOutput]
	createTags  hook[ec2.CreateTagsInput, ec2.CreateTagsOutput]
}

type hook[I, O any] func(ctx context.Context, in *I, next func(context.Context, *I) (*O, error)) (*O, error)

func wrap(c EC2API) *wrapped { return &wrapped{EC2API: c, calls: map[string]int{}} }

// pass counts the call and runs the hook, if any, with the real call as next.
func pass[I, O any](w *wrapped, name string, h hook[I, O], next func(context.Context, *I) (*O, error), ctx context.Context, in *I) (*O, error) {
	w.mu.Lock()
	w.calls[name]++
	w.mu.Unlock()
	if h == nil {
		return next(ctx, in)
	}
	return h(ctx, in, next)
}

func (w *wrapped) count(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[name]
}

func (w *wrapped) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	w.mu.Lock()
	w.fleets = append(w.fleets, in)
	w.mu.Unlock()
	return pass(w, "CreateFleet", w.createFleet, func(ctx context.Context, in *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error) {
		return w.EC2API.CreateFleet(ctx, in, opts...)
	}, ctx, in)
}

func (w *wrapped) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return pass(w, "DescribeInstances", w.describe, func(ctx context.Context, in *ec2.DescribeInstancesInput) (*ec2.DescribeInstancesOutput, error) {
		return w.EC2API.DescribeInstances(ctx, in, opts...)
	}, ctx, in)
}

func (w *wrapped) TerminateInstances(ctx context.Context, in *ec2.TerminateInstancesInput, opts ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	return pass(w, "TerminateInstances", w.terminate, func(ctx context.Context, in *ec2.TerminateInstancesInput) (*ec2.TerminateInstancesOutput, error) {
		return w.EC2API.TerminateInstances(ctx, in, opts...)
	}, ctx, in)
}

func (w *wrapped) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, opts ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	return pass(w, "CreateTags", w.createTags, func(ctx context.Context, in *ec2.CreateTagsInput) (*ec2.CreateTagsOutput, error) {
		return w.EC2API.CreateTags(ctx, in, opts...)
	}, ctx, in)
}

func (w *wrapped) DeleteTags(ctx context.Context, in *ec2.DeleteTagsInput, opts ...func(*ec2.Options)) (*ec2.DeleteTagsOutput, error) {
	return pass(w, "DeleteTags", hook[ec2.DeleteTagsInput, ec2.DeleteTagsOutput](nil), func(ctx context.Context, in *ec2.DeleteTagsInput) (*ec2.DeleteTagsOutput, error) {
		return w.EC2API.DeleteTags(ctx, in, opts...)
	}, ctx, in)
}

// apiError is an error as the SDK returns it for an EC2 error answer.
func apiError(code string) error {
	return &smithy.OperationError{ServiceID: "EC2", OperationName: "Test", Err: &smithy.GenericAPIError{Code: code, Message: code + " (injected)"}}
}

func tagsOf(tags []types.Tag) map[string]string {
	m := map[string]string{}
	for _, t := range tags {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}

func idsOf[T any](items []T, id func(T) string) []string {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = id(it)
	}
	sort.Strings(ids)
	return ids
}

func launchedID(l Launched) string { return l.InstanceID }
func instanceID(i Instance) string { return i.ID }

// describeByID reads instances straight from moto, bypassing the fleet.
func describeByID(t testing.TB, c *ec2.Client, ids []string) []types.Instance {
	t.Helper()
	out, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	must(t, err)
	var insts []types.Instance
	for _, r := range out.Reservations {
		insts = append(insts, r.Instances...)
	}
	return insts
}
