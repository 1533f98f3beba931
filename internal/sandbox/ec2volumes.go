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
	img, ok := s.image(ctx, aws.ToString(data.ImageId))
	if !ok {
		return "", ""
	}
	root := aws.ToString(img.RootDeviceName)
	var snapshot string
	var snapshotSize int32
	for _, bd := range img.BlockDeviceMappings {
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

// image reads an image once: an AMI's architecture, root device and block
// device mappings are fixed when it is registered (ModifyImageAttribute
// changes none of them), and moto reads every image it holds to answer for
// one (about a tenth of a CPU-second a launch).
func (s *Sandbox) image(ctx context.Context, id string) (types.Image, bool) {
	if img, ok := s.images.Load(id); ok {
		return img.(types.Image), true
	}
	out, err := s.AWS.EC2().DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil || len(out.Images) != 1 {
		return types.Image{}, false
	}
	s.images.Store(id, out.Images[0])
	return out.Images[0], true
}
