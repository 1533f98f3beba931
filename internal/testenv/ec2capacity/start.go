package ec2capacity

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// StartRefusal says whether EC2 would refuse to start the stopped
// instances ids for want of capacity or quota, and otherwise takes their
// capacity. Starting a stopped instance draws on the same capacity and
// vCPU quota as a launch: EC2 answers InsufficientInstanceCapacity when it
// has no capacity of the instance's type in its Availability Zone (EC2 User
// Guide, "Troubleshoot instance launch issues", Insufficient instance
// capacity; that a start meets it too is what users report and issue 41
// states) and VcpuLimitExceeded past the quota. The whole request is
// refused (StartInstances has no partial answer). A model with no limits refuses nothing.
func (m *Model) StartRefusal(ctx context.Context, ids []string) (code, msg string, err error) {
	if !m.limited() || len(ids) == 0 {
		return "", "", nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out, err := m.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		return "", "", fmt.Errorf("describe the instances to start: %w", err)
	}
	var starting []types.Instance
	for _, r := range out.Reservations {
		starting = append(starting, r.Instances...)
	}
	var asked []override
	for _, inst := range starting {
		asked = append(asked, override{instanceType: string(inst.InstanceType), zone: zoneOf(inst)})
	}
	vcpus, err := m.vcpus(ctx, asked)
	if err != nil {
		return "", "", err
	}
	used, err := m.used(ctx)
	if err != nil {
		return "", "", err
	}
	take := map[string]int{}
	for i, inst := range starting {
		o, class := asked[i], OnDemand
		if inst.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
			class = Spot
		}
		k := o.instanceType + "@" + o.zone
		if avail, ok := m.available[k]; ok && avail-take[k] < 1 {
			return "InsufficientInstanceCapacity", insufficientMessage(class, o), nil
		}
		take[k]++
		g := class + "/" + Group(o.instanceType)
		if quota, ok := m.quotas[g]; ok && used[g]+vcpus[o.instanceType] > quota {
			code, msg := quotaError(class, quota)
			return code, msg, nil
		}
		used[g] += vcpus[o.instanceType]
	}
	for k, n := range take {
		if _, ok := m.available[k]; ok {
			m.available[k] -= n
		}
	}
	for i, inst := range starting {
		class := OnDemand
		if inst.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
			class = Spot
		}
		m.launched[aws.ToString(inst.InstanceId)] = launchedInstance{class: class, group: Group(asked[i].instanceType), vcpus: vcpus[asked[i].instanceType]}
	}
	return "", "", nil
}

func zoneOf(inst types.Instance) string {
	if inst.Placement != nil {
		return aws.ToString(inst.Placement.AvailabilityZone)
	}
	return ""
}
