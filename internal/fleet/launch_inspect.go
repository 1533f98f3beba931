package fleet

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// After a launch: describing the new instances (retried while EC2 does not
// know them yet) to complete what CreateFleet left out and tag their volumes.

// inspectLaunched completes what CreateFleet left out (the AZ, and the subnet
// when no override named one) and tags the instances' EBS volumes. Failures
// only warn: the instances run, and volume tags are bookkeeping.
func (f *Fleet) inspectLaunched(ctx context.Context, res *LaunchResult, tags map[string]string) {
	described, err := f.describeNew(ctx, res.ids())
	if err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("volume tags: describe the new instances: %v", err))
		return
	}
	byID := make(map[string]types.Instance, len(described))
	for _, inst := range described {
		byID[aws.ToString(inst.InstanceId)] = inst
	}
	var volumes []string
	for i := range res.Instances {
		got := &res.Instances[i]
		inst, ok := byID[got.InstanceID]
		if !ok {
			continue
		}
		if got.SubnetID == "" {
			got.SubnetID = aws.ToString(inst.SubnetId)
		}
		if got.AZ == "" && inst.Placement != nil {
			got.AZ = aws.ToString(inst.Placement.AvailabilityZone)
		}
		for _, bd := range inst.BlockDeviceMappings {
			if bd.Ebs != nil && aws.ToString(bd.Ebs.VolumeId) != "" {
				volumes = append(volumes, aws.ToString(bd.Ebs.VolumeId))
			}
		}
	}
	if len(volumes) == 0 {
		return // instance-store only, or EC2 has not attached them yet: nothing to tag
	}
	if _, err := f.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: volumes, Tags: ec2Tags(tags)}); err != nil {
		res.Warnings = append(res.Warnings, fmt.Sprintf("volume tags on %d volumes: %v", len(volumes), err))
	}
}

// describeNew describes instances launched a moment ago. EC2 is eventually
// consistent: it may answer InvalidInstanceID.NotFound for ids it has just
// returned, so NotFound is retried a bounded number of times, with a
// doubling wait.
func (f *Fleet) describeNew(ctx context.Context, ids []string) ([]types.Instance, error) {
	attempts, wait := max(f.DescribeAttempts, 1), f.DescribeBackoff
	for attempt := 1; ; attempt++ {
		insts, err := f.describeByID(ctx, ids)
		if err == nil || !awserr.IsNotFound(err) || attempt == attempts {
			return insts, err
		}
		if err := f.Sleep(ctx, wait); err != nil {
			return nil, err
		}
		wait *= 2
	}
}

func (f *Fleet) describeByID(ctx context.Context, ids []string) ([]types.Instance, error) {
	var insts []types.Instance
	// No MaxResults: EC2 refuses it together with InstanceIds.
	pages := ec2.NewDescribeInstancesPaginator(f.ec2, &ec2.DescribeInstancesInput{InstanceIds: ids})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeInstances: %w", err)
		}
		for _, r := range page.Reservations {
			insts = append(insts, r.Instances...)
		}
	}
	return insts, nil
}
