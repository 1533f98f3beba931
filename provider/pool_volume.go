package provider

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The pool's root volume: its IOPS and throughput, checked at plan against
// what EC2 takes for the volume type, and its size against the image's
// root snapshot. EC2 refuses every launch that breaks one of these rules
// (issue 37, items 2 and 3), found only at the first provision otherwise.

// volumeLimits are EC2's ranges per volume type: the Iops and Throughput of
// LaunchTemplateEbsBlockDeviceRequest in the EC2 API Reference (and the
// aws-sdk-go-v2 model of it, service/ec2 types.go: gp3 3,000-80,000 IOPS,
// io1 100-64,000, io2 100-256,000; throughput 125-2,000 MiB/s, gp3 only;
// Iops "required for io1 and io2", supported for io1, io2 and gp3 only),
// and the ratios of the EBS User Guide's volume types (gp3 at most 500 IOPS
// per GiB and 0.25 MiB/s of throughput per IOPS; io1 at most 50 IOPS per
// GiB, io2 1,000).
var volumeLimits = map[string]struct {
	minIOPS, maxIOPS, iopsPerGiB int64
	iopsRequired                 bool
}{
	"gp3": {3000, 80000, 500, false},
	"io1": {100, 64000, 50, true},
	"io2": {100, 256000, 1000, true},
}

const minThroughput, maxThroughput = 125, 2000

var (
	rootVolumeIOPSAttribute = schema.Int64Attribute{Optional: true,
		Description: "Provisioned IOPS of the root volume: gp3 3000-80000 (unset: EC2's 3000), io1 100-64000 and io2 100-256000 (required for both), " +
			"at most 500 (gp3), 50 (io1) or 1000 (io2) per GiB of `root_volume_size`. gp2 takes none.",
		Validators: []validator.Int64{int64validator.Between(100, 256000)}}
	rootVolumeThroughputAttribute = schema.Int64Attribute{Optional: true,
		Description: "Throughput of a gp3 root volume in MiB/s, 125-2000 and at most a quarter of its IOPS (3000 when `root_volume_iops` is unset). Unset: EC2's 125. Other volume types take none.",
		Validators:  []validator.Int64{int64validator.Between(minThroughput, maxThroughput)}}
)

// validateRootVolume checks the root volume's IOPS and throughput against
// its type and size; unknown values are checked when they are known.
func validateRootVolume(m poolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if m.RootVolumeType.IsUnknown() || m.RootVolumeSize.IsUnknown() || m.RootVolumeIOPS.IsUnknown() || m.RootVolumeMiBps.IsUnknown() {
		return diags
	}
	typ := m.RootVolumeType.ValueString()
	if m.RootVolumeType.IsNull() {
		typ = "gp3"
	}
	size := effective(m.RootVolumeSize, 30)
	limits, provisioned := volumeLimits[typ]
	iops, throughput := m.RootVolumeIOPS, m.RootVolumeMiBps
	at := path.Root("root_volume_iops")
	switch {
	case iops.IsNull() && limits.iopsRequired:
		diags.AddAttributeError(at, "IOPS required for "+typ,
			fmt.Sprintf("root_volume_iops must be set for root_volume_type %s (%d-%d): EC2 refuses an io1 or io2 volume without IOPS (InvalidParameterCombination)", typ, limits.minIOPS, limits.maxIOPS))
	case !iops.IsNull() && !provisioned:
		diags.AddAttributeError(at, "No IOPS for "+typ, fmt.Sprintf("root_volume_iops applies to gp3, io1 and io2 volumes only, not %s: remove it", typ))
	case !iops.IsNull() && (iops.ValueInt64() < limits.minIOPS || iops.ValueInt64() > limits.maxIOPS):
		diags.AddAttributeError(at, "IOPS out of range", fmt.Sprintf("root_volume_iops (%d) must be %d-%d for root_volume_type %s", iops.ValueInt64(), limits.minIOPS, limits.maxIOPS, typ))
	case !iops.IsNull() && iops.ValueInt64() > limits.iopsPerGiB*size:
		diags.AddAttributeError(at, "IOPS too high for the volume's size",
			fmt.Sprintf("root_volume_iops (%d) must be at most %d per GiB of root_volume_size for %s: %d for %d GiB", iops.ValueInt64(), limits.iopsPerGiB, typ, limits.iopsPerGiB*size, size))
	}
	if throughput.IsNull() {
		return diags
	}
	at = path.Root("root_volume_throughput")
	if typ != "gp3" {
		diags.AddAttributeError(at, "No throughput for "+typ, fmt.Sprintf("root_volume_throughput applies to gp3 volumes only, not %s: remove it", typ))
		return diags
	}
	if most := effective(iops, 3000) / 4; throughput.ValueInt64() > most {
		diags.AddAttributeError(at, "Throughput too high for the volume's IOPS",
			fmt.Sprintf("root_volume_throughput (%d MiB/s) must be at most a quarter of the volume's IOPS (%d): %d MiB/s", throughput.ValueInt64(), effective(iops, 3000), most))
	}
	return diags
}

// rootVolumeFits refuses a root volume smaller than the image's root
// snapshot: EC2 would refuse every launch (InvalidBlockDeviceMapping,
// "Volume of size … is smaller than snapshot …"). The size stays what is
// configured (30 GiB when unset): the plan does not grow it to the image's.
func rootVolumeFits(m poolModel, img imageInfo) diag.Diagnostics {
	var diags diag.Diagnostics
	if m.RootVolumeSize.IsUnknown() || img.rootSnapshotSize == 0 {
		return diags
	}
	if size := effective(m.RootVolumeSize, 30); size < img.rootSnapshotSize {
		diags.AddAttributeError(path.Root("root_volume_size"), "Root volume smaller than the image's",
			fmt.Sprintf("root_volume_size (%d GiB; 30 when unset) is smaller than the root snapshot %s of image %s (%d GiB): EC2 would refuse every launch. Set root_volume_size to at least %d.",
				size, img.rootSnapshot, m.ImageID.ValueString(), img.rootSnapshotSize, img.rootSnapshotSize))
	}
	return diags
}

// checkRootVolumeAtPlan reads the image of a plan that names one and
// refuses a root volume smaller than its snapshot. An image it cannot read
// is left to the apply, which reports it.
func (r *poolResource) checkRootVolumeAtPlan(ctx context.Context, plan poolModel) diag.Diagnostics {
	if r.c == nil || plan.ImageID.IsUnknown() || plan.ImageID.ValueString() == "" {
		return nil
	}
	img, err := r.image(ctx, plan.ImageID.ValueString())
	if err != nil {
		return nil
	}
	return rootVolumeFits(plan, img)
}

// rootSnapshot is the snapshot and size of an image's root device.
func rootSnapshot(img ec2types.Image, root string) (string, int64) {
	for _, bd := range img.BlockDeviceMappings {
		if aws.ToString(bd.DeviceName) == root && bd.Ebs != nil {
			return aws.ToString(bd.Ebs.SnapshotId), int64(aws.ToInt32(bd.Ebs.VolumeSize))
		}
	}
	return "", 0
}

// ebsPerformance sets a launch template volume's IOPS and throughput when
// the pool sets them.
func ebsPerformance(ebs *ec2types.LaunchTemplateEbsBlockDeviceRequest, m poolModel) {
	if !m.RootVolumeIOPS.IsNull() && !m.RootVolumeIOPS.IsUnknown() {
		ebs.Iops = aws.Int32(int32(m.RootVolumeIOPS.ValueInt64()))
	}
	if !m.RootVolumeMiBps.IsNull() && !m.RootVolumeMiBps.IsUnknown() {
		ebs.Throughput = aws.Int32(int32(m.RootVolumeMiBps.ValueInt64()))
	}
}

// optionalInt32 reads a template's optional number back.
func optionalInt32(v *int32) types.Int64 {
	if v == nil {
		return types.Int64Null()
	}
	return types.Int64Value(int64(*v))
}
