package provider

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// A pool without image_id: the latest AMI of image_family for the
// architecture of its instance types, read from the public SSM parameter
// the image's publisher keeps current, once, at create (state keeps it; a
// later apply does not move the pool to a newer image by itself — set
// image_id, or replace the pool, to move).

// imageFamilies maps image_family to its public parameter, by architecture
// (amd64, arm64).
var imageFamilies = map[string]map[string]string{
	"ubuntu-24.04": {
		"amd64": "/aws/service/canonical/ubuntu/server/24.04/stable/current/amd64/hvm/ebs-gp3/ami-id",
		"arm64": "/aws/service/canonical/ubuntu/server/24.04/stable/current/arm64/hvm/ebs-gp3/ami-id",
	},
	"al2023": {
		"amd64": "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64",
		"arm64": "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64",
	},
}

const defaultImageFamily = "ubuntu-24.04"

// resolveImage sets plan's image_id, when it has none, to the latest image
// of its image_family for its instance types' architecture.
func (r *poolResource) resolveImage(ctx context.Context, plan *poolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if !plan.ImageID.IsUnknown() && plan.ImageID.ValueString() != "" {
		return diags
	}
	var instanceTypes []string
	if diags.Append(plan.InstanceTypes.ElementsAs(ctx, &instanceTypes, false)...); diags.HasError() {
		return diags
	}
	arch, err := r.instanceArchitecture(ctx, instanceTypes)
	if err != nil {
		diags.AddAttributeError(path.Root("instance_types"), "No image for the pool", err.Error())
		return diags
	}
	id, err := r.latestImage(ctx, plan.ImageFamily.ValueString(), arch)
	if err != nil {
		diags.AddAttributeError(path.Root("image_family"), "No image for the pool", err.Error()+"; or set image_id")
		return diags
	}
	plan.ImageID = types.StringValue(id)
	return diags
}

// sameArchitecture refuses an image whose architecture the pool's instance
// types do not run: EC2 would refuse every launch of the pool (each
// override with InvalidParameterValue), found only at the first provision.
func (r *poolResource) sameArchitecture(ctx context.Context, plan poolModel, imageArch string) diag.Diagnostics {
	var diags diag.Diagnostics
	var instanceTypes []string
	if diags.Append(plan.InstanceTypes.ElementsAs(ctx, &instanceTypes, false)...); diags.HasError() {
		return diags
	}
	arch, err := r.instanceArchitecture(ctx, instanceTypes)
	if err != nil {
		diags.AddAttributeError(path.Root("instance_types"), "Instance types not usable", err.Error())
		return diags
	}
	if arch != imageArch {
		diags.AddAttributeError(path.Root("image_id"), "Image and instance types differ in architecture",
			fmt.Sprintf("image %s is %s, but instance_types %v are %s: EC2 would refuse every launch. Choose an image of %s (or omit image_id to get the latest of image_family), or instance types of %s.",
				plan.ImageID.ValueString(), imageArch, instanceTypes, arch, arch, imageArch))
	}
	return diags
}

// instanceArchitecture is the one architecture (amd64 or arm64) that every
// instance type supports.
func (r *poolResource) instanceArchitecture(ctx context.Context, instanceTypes []string) (string, error) {
	its := make([]ec2types.InstanceType, len(instanceTypes))
	for i, t := range instanceTypes {
		its[i] = ec2types.InstanceType(t)
	}
	out, err := r.c.aws.EC2().DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: its})
	if err != nil {
		return "", fmt.Errorf("describe the instance types: %w", err)
	}
	arch := ""
	for _, it := range out.InstanceTypes {
		a := ""
		if it.ProcessorInfo != nil {
			for _, s := range it.ProcessorInfo.SupportedArchitectures {
				switch s {
				case ec2types.ArchitectureTypeX8664:
					a = "amd64"
				case ec2types.ArchitectureTypeArm64:
					a = "arm64"
				}
			}
		}
		if a == "" || (arch != "" && a != arch) {
			return "", fmt.Errorf("instance_types mix architectures or include one that is neither x86_64 nor arm64 (%s): a pool's types share one", it.InstanceType)
		}
		arch = a
	}
	if arch == "" {
		return "", fmt.Errorf("none of instance_types %v is offered in this region", instanceTypes)
	}
	return arch, nil
}

// latestImage reads the AMI id family's parameter names for arch.
func (r *poolResource) latestImage(ctx context.Context, family, arch string) (string, error) {
	name := imageFamilies[family][arch]
	if name == "" {
		return "", fmt.Errorf("image_family %q has no %s image", family, arch)
	}
	out, err := r.c.aws.SSM().GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("image_family %s: the latest image (parameter %s) could not be read: %w", family, name, err)
	}
	return aws.ToString(out.Parameter.Value), nil
}
