package sandbox

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// volumeRefusal says why EC2 would refuse to launch from a template's block
// device mappings ("" when it would not); moto launches all of these.
func (s *Sandbox) volumeRefusal(ctx context.Context, data *types.ResponseLaunchTemplateData) (code, msg string) {
	for _, bd := range data.BlockDeviceMappings {
		ebs := bd.Ebs
		if ebs == nil {
			continue
		}
		// Iops "is required for io1 and io2 volumes" (EC2 API Reference,
		// LaunchTemplateEbsBlockDeviceRequest and EbsBlockDevice); EC2's
		// refusal is InvalidParameterCombination, "The parameter iops must
		// be specified for io1 volumes." (as users quote it:
		// kubermatic/machine-controller #538).
		if (ebs.VolumeType == types.VolumeTypeIo1 || ebs.VolumeType == types.VolumeTypeIo2) && aws.ToInt32(ebs.Iops) == 0 {
			return "InvalidParameterCombination", fmt.Sprintf("The parameter iops must be specified for %s volumes.", ebs.VolumeType)
		}
	}
	return s.rootSnapshotRefusal(ctx, data)
}

// rootSnapshotRefusal: a volume made from a snapshot cannot be smaller than
// the snapshot (EC2 User Guide, block device mappings: the volume size must
// be at least the snapshot's); EC2 refuses the launch with
// InvalidBlockDeviceMapping, "Volume of size 10GB is smaller than snapshot
// 'snap-…', expect size >= 15GB" (as users quote it: karpenter-provider-aws
// #3302 from a CreateFleet's errors, scylladb #6999, openshift
// origin-ci-tool #153). Checked for the image's root device, the volume
// the pools size.
func (s *Sandbox) rootSnapshotRefusal(ctx context.Context, data *types.ResponseLaunchTemplateData) (code, msg string) {
	img, err := s.AWS.EC2().DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(data.ImageId)}})
	if err != nil || len(img.Images) != 1 {
		return "", ""
	}
	root := aws.ToString(img.Images[0].RootDeviceName)
	var snapshot string
	var snapshotSize int32
	for _, bd := range img.Images[0].BlockDeviceMappings {
		if aws.ToString(bd.DeviceName) == root && bd.Ebs != nil {
			snapshot, snapshotSize = aws.ToString(bd.Ebs.SnapshotId), aws.ToInt32(bd.Ebs.VolumeSize)
		}
	}
	for _, bd := range data.BlockDeviceMappings {
		if aws.ToString(bd.DeviceName) != root || bd.Ebs == nil || bd.Ebs.VolumeSize == nil {
			continue
		}
		if size := aws.ToInt32(bd.Ebs.VolumeSize); size < snapshotSize {
			return "InvalidBlockDeviceMapping", fmt.Sprintf("Volume of size %dGB is smaller than snapshot '%s', expect size >= %dGB", size, snapshot, snapshotSize)
		}
	}
	return "", ""
}
