package sandbox

import (
	"context"
	"net/url"

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
	return "", ""
}
