package sandbox

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Rules EC2 applies to a launch that moto does not, played by the endpoint
// on every instant CreateFleet (not on a DryRun, whose checks are not
// documented here). Each names its source; a launch one refuses gets an
// error for each override and no instance, as from EC2.

// launchRefusal says why EC2 would refuse the fleet's launches ("" when it
// would not).
func (s *Sandbox) launchRefusal(ctx context.Context, form url.Values) (code, msg string) {
	ltv, err := s.fleetTemplate(ctx, form)
	if err != nil || ltv.LaunchTemplateData == nil {
		return "", "" // moto answers the request as it would
	}
	data := ltv.LaunchTemplateData
	onDemand := form.Get("TargetCapacitySpecification.DefaultTargetCapacityType") != "spot"
	for _, ts := range data.TagSpecifications {
		// A template may tag spot-instances-request, but a launch that
		// creates none (on-demand) is refused: EC2's answer quoted in
		// karpenter-provider-aws #5850 (CreateFleet's errorSet, code
		// InvalidParameterValue, lifecycle on-demand) and
		// terraform-aws-github-runner #4561, the same failure our
		// on-demand pools had.
		if onDemand && ts.ResourceType == types.ResourceTypeSpotInstancesRequest {
			return "InvalidParameterValue", "You cannot specify tags for Spot instances requests if there are no Spot instances requests being created by the request."
		}
	}
	// With instance tags in the instance metadata, EC2 allows only keys
	// of letters, digits and + - = . , _ : @, never "." or ".." or
	// "_index" (EC2 User Guide, tags in instance metadata). That a launch
	// breaking the rule is refused is what users report (issue 30); the
	// exact error EC2 answers with is not documented: the sandbox answers
	// InvalidParameterValue.
	if md := data.MetadataOptions; md != nil && md.InstanceMetadataTags == types.LaunchTemplateInstanceMetadataTagsStateEnabled {
		for _, key := range instanceTagKeys(form, data) {
			if !metadataTagKeyRE.MatchString(key) || key == "." || key == ".." || key == "_index" {
				return "InvalidParameterValue", fmt.Sprintf("The tag key '%s' is not valid for an instance with instance metadata tags enabled: use letters, numbers and + - = . , _ : @ only.", key)
			}
		}
	}
	// An instance type must run the image's architecture: EC2's
	// RunInstances error for it is InvalidParameterValue, "The
	// architecture '<type's>' of the specified instance type does not
	// match the architecture '<image's>' of the specified AMI" (as users
	// quote it). A fleet whose overrides all mismatch is refused; one
	// with some matching is left to moto (our pools share one
	// architecture, the provider checks it).
	if mismatch := s.archMismatch(ctx, form, data); mismatch != "" {
		return "InvalidParameterValue", mismatch
	}
	// The root volume's size and IOPS (ec2volumes.go).
	return s.volumeRefusal(ctx, data)
}

// archMismatch says how every override's instance type differs from the
// image's architecture ("" when one matches, or either is unknown).
func (s *Sandbox) archMismatch(ctx context.Context, form url.Values, data *types.ResponseLaunchTemplateData) string {
	img, ok := s.image(ctx, aws.ToString(data.ImageId))
	if !ok {
		return ""
	}
	want := img.Architecture
	var asked []types.InstanceType
	for i := 1; form.Has(fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.InstanceType", i)); i++ {
		asked = append(asked, types.InstanceType(form.Get(fmt.Sprintf("LaunchTemplateConfigs.1.Overrides.%d.InstanceType", i))))
	}
	if len(asked) == 0 {
		return ""
	}
	its, err := s.AWS.EC2().DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: asked})
	if err != nil {
		return ""
	}
	msg := ""
	for _, it := range its.InstanceTypes {
		if it.ProcessorInfo == nil || len(it.ProcessorInfo.SupportedArchitectures) == 0 {
			return ""
		}
		if slices.Contains(it.ProcessorInfo.SupportedArchitectures, types.ArchitectureType(want)) {
			return ""
		}
		msg = fmt.Sprintf("The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI. Specify an instance type and an AMI that have matching architectures, and try again.",
			it.ProcessorInfo.SupportedArchitectures[0], want)
	}
	return msg
}

var metadataTagKeyRE = regexp.MustCompile(`^[A-Za-z0-9+\-=.,_:@]+$`)

// instanceTagKeys are the keys of the tags a fleet's instances get: the
// request's, then the template's.
func instanceTagKeys(form url.Values, data *types.ResponseLaunchTemplateData) []string {
	var keys []string
	for i := 1; form.Has(fmt.Sprintf("TagSpecification.%d.ResourceType", i)); i++ {
		if form.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i)) != "instance" {
			continue
		}
		for j := 1; form.Has(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j)); j++ {
			keys = append(keys, form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j)))
		}
	}
	for _, ts := range data.TagSpecifications {
		if ts.ResourceType == types.ResourceTypeInstance {
			for _, t := range ts.Tags {
				keys = append(keys, aws.ToString(t.Key))
			}
		}
	}
	return keys
}
