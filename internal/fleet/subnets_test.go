package fleet

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Issue 37 item 1: EC2 refuses a CreateFleet naming two subnets of one AZ
// (InvalidFleetConfig, duplicate instance pools). The sandbox refuses it
// too (internal/sandbox/ec2rules_test.go, which also launches through this
// package against that rule).

func TestSubnetRoundsTakeOneSubnetOfEachAZ(t *testing.T) {
	zones := map[string]string{"a1": "az-a", "a2": "az-a", "a3": "az-a", "b1": "az-b", "c1": "az-c", "c2": "az-c"}
	subnets := []string{"a1", "b1", "a2", "c1", "a3", "c2"}
	for _, c := range []struct {
		start int
		want  [][]string
	}{
		{0, [][]string{{"a1", "b1", "c1"}, {"a2", "b1", "c2"}, {"a3", "b1", "c1"}}},
		{1, [][]string{{"a2", "b1", "c2"}, {"a3", "b1", "c1"}, {"a1", "b1", "c2"}}},
	} {
		if got := subnetRounds(subnets, zones, c.start); !reflect.DeepEqual(got, c.want) {
			t.Errorf("rounds from %d = %v, want %v", c.start, got, c.want)
		}
	}
	// Zones unknown (a pool config from before they were kept): every
	// subnet is its own AZ, one round of all.
	if got, want := subnetRounds([]string{"s1", "s2"}, nil, 5), [][]string{{"s1", "s2"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("rounds without zones = %v, want %v", got, want)
	}
}

// threeSubnets adds a second subnet in the network's first AZ: the pool
// lists subnets[0] and the new one (us-east-1a) and subnets[1] (us-east-1b).
func threeSubnets(t *testing.T, n network) ([]string, map[string]string) {
	t.Helper()
	sn, err := n.client.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: n.subnets[:1]})
	must(t, err)
	more, err := n.client.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: sn.Subnets[0].VpcId, CidrBlock: aws.String("10.0.9.0/24"), AvailabilityZone: aws.String(n.azs[0])})
	must(t, err)
	extra := aws.ToString(more.Subnet.SubnetId)
	return []string{n.subnets[0], extra, n.subnets[1]}, map[string]string{n.subnets[0]: n.azs[0], extra: n.azs[0], n.subnets[1]: n.azs[1]}
}

func subnetsSent(in *ec2.CreateFleetInput) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range in.LaunchTemplateConfigs[0].Overrides {
		if s := aws.ToString(o.SubnetId); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// Each request names one subnet per AZ; the next launch starts at the AZ's
// next subnet; a request short of addresses in its subnets asks the AZ's
// other subnet for the missing count.
func TestALaunchNamesOneSubnetPerAZAndTriesTheOthers(t *testing.T) {
	n := newNetwork(t)
	subnets, zones := threeSubnets(t, n)
	w := wrap(n.client)
	f, _ := newFleet(t, w)
	req := n.request(2, OnDemand)
	req.SubnetIDs, req.SubnetZones = subnets, zones

	res, err := f.Launch(ctx, req)
	must(t, err)
	res2, err := f.Launch(ctx, req)
	must(t, err)
	if len(res.Instances) != 2 || len(res2.Instances) != 2 || len(w.fleets) != 2 {
		t.Fatalf("two launches: %d and %d instances in %d requests, want 2, 2 in 2", len(res.Instances), len(res2.Instances), len(w.fleets))
	}
	if got, want := subnetsSent(w.fleets[0]), []string{subnets[0], subnets[2]}; !reflect.DeepEqual(got, want) {
		t.Errorf("first launch's subnets %v, want %v (one per AZ)", got, want)
	}
	if got, want := subnetsSent(w.fleets[1]), []string{subnets[1], subnets[2]}; !reflect.DeepEqual(got, want) {
		t.Errorf("second launch's subnets %v, want %v (the AZ's next subnet)", got, want)
	}

	// Short of addresses: the AZ's other subnet for the one missing.
	w.fleets = nil
	first := true
	w.createFleet = func(ctx context.Context, in *ec2.CreateFleetInput, next func(context.Context, *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error)) (*ec2.CreateFleetOutput, error) {
		if !first {
			return next(ctx, in)
		}
		first = false
		out, err := short(n, types.DefaultTargetCapacityTypeOnDemand, 1, "InsufficientFreeAddressesInSubnet")(ctx, in, next)
		if err == nil {
			out.Errors[len(out.Errors)-1].LaunchTemplateAndOverrides.Overrides.SubnetId = aws.String(subnets[0])
		}
		return out, err
	}
	res, err = f.Launch(ctx, req)
	must(t, err)
	if len(res.Instances) != 2 || len(w.fleets) != 2 {
		t.Fatalf("a launch short of addresses: %d instances in %d requests, want 2 in 2", len(res.Instances), len(w.fleets))
	}
	if got, want := subnetsSent(w.fleets[1]), []string{subnets[1], subnets[2]}; !reflect.DeepEqual(got, want) ||
		aws.ToInt32(w.fleets[1].TargetCapacitySpecification.TotalTargetCapacity) != 1 {
		t.Errorf("the second request: subnets %v for %d, want %v for the 1 missing", got, aws.ToInt32(w.fleets[1].TargetCapacitySpecification.TotalTargetCapacity), want)
	}
	if fmt.Sprint(subnetsSent(w.fleets[0])) != fmt.Sprint([]string{subnets[0], subnets[2]}) {
		t.Errorf("the first request's subnets %v", subnetsSent(w.fleets[0]))
	}
}
