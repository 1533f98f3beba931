package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// Launch: one CreateFleet instant request per usage class (spot, then
// on-demand for what spot capacity could not give), its input, and the
// launched instances' tags. What a launch got is in launch_result.go, the
// look at the launched instances afterwards in launch_inspect.go.

// LaunchRequest is one launch of Count instances from a launch template.
type LaunchRequest struct {
	// The launch template, by id or by name (exactly one of the two), and
	// its version: a number, "$Latest" or "$Default".
	LaunchTemplateID      string
	LaunchTemplateName    string
	LaunchTemplateVersion string
	// Every type is offered in one subnet of each Availability Zone
	// (subnets.go); EC2 picks among the pairs.
	InstanceTypes []string
	SubnetIDs     []string
	// SubnetZones is the AZ of each subnet; a subnet it leaves out counts
	// as an AZ of its own.
	SubnetZones map[string]string
	Count       int
	UsageClass  string // Spot or OnDemand
	// OnDemandFallback launches the missing count on demand when a spot
	// launch came back short because EC2 lacked spot capacity.
	OnDemandFallback bool
	// Pool, Owner and Assignment become the instances' ghr: tags, so that
	// refresh can reconcile an instance whose state record was never written.
	Pool       string
	Owner      string
	Assignment string
	// Tags are added to the instances and their volumes.
	Tags map[string]string
}

// Launch starts req.Count instances with one CreateFleet `instant` request
// and, for a spot launch that came back short for lack of capacity, a second
// on-demand one for the missing count only. The instances are tagged at
// launch; their EBS volumes are tagged afterwards, since an instant fleet
// cannot tag volumes.
//
// When a CreateFleet call fails, the error is returned together with the
// instances already started: the caller must record them, or they leak.
func (f *Fleet) Launch(ctx context.Context, req LaunchRequest) (LaunchResult, error) {
	if f.environment == "" {
		return LaunchResult{}, invalid("environment", "the fleet has no environment")
	}
	if err := req.Validate(); err != nil {
		return LaunchResult{}, err
	}
	tags := req.instanceTags(f.environment)
	rounds := subnetRounds(req.SubnetIDs, req.SubnetZones, int(f.rotation.Add(1)-1))
	res, err := f.launchClass(ctx, req, rounds, req.UsageClass, req.Count, tags)
	if err == nil && req.UsageClass == Spot && req.OnDemandFallback && res.Missing(req.Count) > 0 && res.capacityShort() {
		missing := res.Missing(req.Count)
		var more LaunchResult
		more, err = f.launchClass(ctx, req, rounds, OnDemand, missing, tags)
		res.Instances = append(res.Instances, more.Instances...)
		res.Errors = append(res.Errors, more.Errors...)
		if err != nil {
			err = fmt.Errorf("on-demand fallback for %d instances: %w", missing, err)
		}
	}
	if len(res.Instances) > 0 {
		f.inspectLaunched(ctx, &res, tags)
	}
	return res, err
}

// instanceTags are the tags of every instance and volume of the launch.
// Validate has made sure the caller's tags cannot replace ours.
func (r LaunchRequest) instanceTags(environment string) map[string]string {
	tags := make(map[string]string, len(r.Tags)+4)
	for k, v := range r.Tags {
		tags[k] = v
	}
	tags[TagEnvironment] = environment
	tags[TagPool] = r.Pool
	tags[TagOwner] = r.Owner
	tags[TagAssignment] = r.Assignment
	return tags
}

// launchClass launches count instances of one usage class in the first
// round of subnets, and what is still missing in the next round while a
// round comes back short for capacity or addresses (subnets.go). The
// instances of earlier rounds come back with an error of a later one.
func (f *Fleet) launchClass(ctx context.Context, req LaunchRequest, rounds [][]string, class string, count int, tags map[string]string) (LaunchResult, error) {
	var res LaunchResult
	for _, subnets := range rounds {
		more, err := f.createFleet(ctx, req, subnets, class, res.Missing(count), tags)
		res.Instances = append(res.Instances, more.Instances...)
		res.Errors = append(res.Errors, more.Errors...)
		if err != nil || res.Missing(count) == 0 || !more.shortOfPlace() {
			return res, err
		}
	}
	return res, nil
}

// createFleet makes one CreateFleet request in subnets, again while EC2 refuses the
// template's instance profile as one it does not know yet (a pool applied a
// moment ago), for up to ProfileWait. A refused request launched nothing, so
// repeating it cannot launch twice.
func (f *Fleet) createFleet(ctx context.Context, req LaunchRequest, subnets []string, class string, count int, tags map[string]string) (LaunchResult, error) {
	var waited time.Duration
	// Every 2 s at most: the delay is about ten seconds, and a later try
	// only makes the first runner later.
	for wait := time.Second; ; wait = min(wait*2, 2*time.Second) {
		res, err := f.createFleetOnce(ctx, req, subnets, class, count, tags)
		if !res.profileRefused(err) || waited+wait > f.ProfileWait {
			return res, err
		}
		if err := f.Sleep(ctx, wait); err != nil {
			return res, err
		}
		waited += wait
	}
}

// profileRefused says whether a CreateFleet launched nothing because EC2
// refused the instance profile (IsProfilePropagation), by its API error or
// by every one of its per-override errors.
func (r LaunchResult) profileRefused(err error) bool {
	if err != nil {
		return IsProfilePropagation(awserr.Code(err), awserr.Message(err))
	}
	if len(r.Instances) > 0 || len(r.Errors) == 0 {
		return false
	}
	for _, e := range r.Errors {
		if !IsProfilePropagation(e.Code, e.Message) {
			return false
		}
	}
	return true
}

func (f *Fleet) createFleetOnce(ctx context.Context, req LaunchRequest, subnets []string, class string, count int, tags map[string]string) (LaunchResult, error) {
	out, err := f.ec2.CreateFleet(ctx, fleetInput(req, subnets, class, count, tags))
	if err != nil {
		return LaunchResult{}, fmt.Errorf("CreateFleet (%d %s): %w", count, class, err)
	}
	var res LaunchResult
	for _, group := range out.Instances {
		got := Launched{InstanceType: string(group.InstanceType), UsageClass: usageClass(string(group.Lifecycle), class)}
		if o := overridesOf(group.LaunchTemplateAndOverrides); o != nil {
			got.SubnetID, got.AZ = aws.ToString(o.SubnetId), aws.ToString(o.AvailabilityZone)
		}
		for _, id := range group.InstanceIds {
			got.InstanceID = id
			res.Instances = append(res.Instances, got)
		}
	}
	for _, e := range out.Errors {
		le := LaunchError{Code: aws.ToString(e.ErrorCode), Message: aws.ToString(e.ErrorMessage), UsageClass: usageClass(string(e.Lifecycle), class)}
		if o := overridesOf(e.LaunchTemplateAndOverrides); o != nil {
			le.InstanceType, le.SubnetID = string(o.InstanceType), aws.ToString(o.SubnetId)
		}
		res.Errors = append(res.Errors, le)
	}
	return res, nil
}

// fleetInput is the CreateFleet request: every instance type in each of
// subnets (one per AZ: subnetRounds), the whole count in one usage class. ClientToken stays empty: the
// SDK fills it once per call, so its own retries of a timed-out CreateFleet
// cannot launch twice.
func fleetInput(req LaunchRequest, subnets []string, class string, count int, tags map[string]string) *ec2.CreateFleetInput {
	var overrides []types.FleetLaunchTemplateOverridesRequest
	for _, it := range req.InstanceTypes {
		for _, subnet := range subnets {
			overrides = append(overrides, types.FleetLaunchTemplateOverridesRequest{InstanceType: types.InstanceType(it), SubnetId: aws.String(subnet)})
		}
	}
	template := &types.FleetLaunchTemplateSpecificationRequest{Version: aws.String(req.LaunchTemplateVersion)}
	if req.LaunchTemplateID != "" {
		template.LaunchTemplateId = aws.String(req.LaunchTemplateID)
	} else {
		template.LaunchTemplateName = aws.String(req.LaunchTemplateName)
	}
	in := &ec2.CreateFleetInput{
		Type:                  types.FleetTypeInstant,
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: template, Overrides: overrides}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(int32(count)),
		},
		// The fleet is tagged too: IAM authorizes CreateFleet on the fleet
		// itself, and the deployment's policy requires its tag on all
		// that a launch creates (the launch template tags volumes,
		// network interfaces; never spot requests).
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeFleet, Tags: ec2Tags(tags)}, {ResourceType: types.ResourceTypeInstance, Tags: ec2Tags(tags)}},
	}
	capacity := in.TargetCapacitySpecification
	if class == Spot {
		capacity.DefaultTargetCapacityType = types.DefaultTargetCapacityTypeSpot
		capacity.SpotTargetCapacity = aws.Int32(int32(count))
		// Cheap pools that are also deep: fewer interruptions than lowest-price.
		in.SpotOptions = &types.SpotOptionsRequest{AllocationStrategy: types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		capacity.DefaultTargetCapacityType = types.DefaultTargetCapacityTypeOnDemand
		capacity.OnDemandTargetCapacity = aws.Int32(int32(count))
		in.OnDemandOptions = &types.OnDemandOptionsRequest{AllocationStrategy: types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return in
}

func overridesOf(lt *types.LaunchTemplateAndOverridesResponse) *types.FleetLaunchTemplateOverrides {
	if lt == nil {
		return nil
	}
	return lt.Overrides
}

// usageClass maps EC2's lifecycle ("spot", "on-demand", or empty when EC2
// does not say) to ours; requested stands in when EC2 is silent.
func usageClass(lifecycle, requested string) string {
	switch lifecycle {
	case "":
		return requested
	case Spot:
		return Spot
	default: // on-demand, and the reserved-capacity flavours of it
		return OnDemand
	}
}
