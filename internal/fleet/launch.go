package fleet

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// LaunchRequest is one launch of Count instances from a launch template.
type LaunchRequest struct {
	LaunchTemplateID      string
	LaunchTemplateVersion string
	InstanceTypes         []string
	SubnetIDs             []string
	Count                 int
	UsageClass            string // "spot" or "on-demand"
	// OnDemandFallback launches the missing count on demand when spot
	// capacity ran out.
	OnDemandFallback bool
	Pool             string
	Owner            string
	Assignment       string
	Tags             map[string]string // more tags for instances and volumes
}

// Launched is one instance EC2 started.
type Launched struct {
	InstanceID   string
	InstanceType string
	SubnetID     string
	AZ           string
	UsageClass   string
}

// LaunchError is one error EC2 reported for an override.
type LaunchError struct {
	Code, Message, InstanceType, SubnetID, UsageClass string
}

// LaunchResult is what a launch got.
type LaunchResult struct {
	Instances []Launched
	Errors    []LaunchError
	// Warnings are problems that did not stop the launch (volume tags).
	Warnings []string
}

// Missing is how many of count the launch did not get.
func (r LaunchResult) Missing(count int) int { return max(count-len(r.Instances), 0) }

// Detail summarises the EC2 errors for a message.
func (r LaunchResult) Detail() string {
	seen := map[string]bool{}
	var parts []string
	for _, e := range r.Errors {
		s := fmt.Sprintf("%s (%s in %s, %s)", e.Code, e.InstanceType, e.SubnetID, e.UsageClass)
		if !seen[s] {
			seen[s] = true
			parts = append(parts, s)
		}
	}
	sort.Strings(parts)
	return fmt.Sprint(parts)
}

// Validate reports the first invalid field.
func (r LaunchRequest) Validate() error {
	switch {
	case r.LaunchTemplateID == "":
		return fmt.Errorf("launchTemplateId: required")
	case r.LaunchTemplateVersion == "":
		return fmt.Errorf("launchTemplateVersion: required")
	case len(r.InstanceTypes) == 0:
		return fmt.Errorf("instanceTypes: at least one is required")
	case len(r.SubnetIDs) == 0:
		return fmt.Errorf("subnetIds: at least one is required")
	case r.Count < 1:
		return fmt.Errorf("count: must be at least 1, got %d", r.Count)
	case r.UsageClass != "spot" && r.UsageClass != "on-demand":
		return fmt.Errorf("usageClass: %q must be spot or on-demand", r.UsageClass)
	case r.Pool == "" || r.Owner == "" || r.Assignment == "":
		return fmt.Errorf("pool, owner and assignment tags are required")
	}
	return nil
}

// Launch starts the instances with one CreateFleet instant request (a
// second, on-demand one for the missing count after a spot capacity error),
// tagged so that refresh can reconcile an instance whose record was never
// written. It returns what it got; fewer instances than asked is not an error.
func (f *Fleet) Launch(ctx context.Context, req LaunchRequest) (LaunchResult, error) {
	if err := req.Validate(); err != nil {
		return LaunchResult{}, err
	}
	res, err := f.createFleet(ctx, req, req.UsageClass, req.Count)
	if err != nil {
		return res, err
	}
	if missing := res.Missing(req.Count); missing > 0 && req.UsageClass == "spot" && req.OnDemandFallback && capacityShort(res.Errors) {
		more, err := f.createFleet(ctx, req, "on-demand", missing)
		res.Instances = append(res.Instances, more.Instances...)
		res.Errors = append(res.Errors, more.Errors...)
		if err != nil {
			res.Warnings = append(res.Warnings, "on-demand fallback: "+err.Error())
		}
	}
	if len(res.Instances) > 0 {
		if err := f.tagVolumes(ctx, res.Instances, req.tags(f.environment)); err != nil {
			res.Warnings = append(res.Warnings, "volume tags: "+err.Error())
		}
	}
	return res, nil
}

func capacityShort(errs []LaunchError) bool {
	for _, e := range errs {
		if IsCapacityCode(e.Code) {
			return true
		}
	}
	return false
}

func (r LaunchRequest) tags(environment string) map[string]string {
	t := map[string]string{TagEnvironment: environment, TagPool: r.Pool, TagOwner: r.Owner, TagAssignment: r.Assignment}
	for k, v := range r.Tags {
		if _, ours := t[k]; !ours {
			t[k] = v
		}
	}
	return t
}

func (f *Fleet) createFleet(ctx context.Context, req LaunchRequest, usage string, count int) (LaunchResult, error) {
	var overrides []types.FleetLaunchTemplateOverridesRequest
	for _, subnet := range req.SubnetIDs {
		for _, it := range req.InstanceTypes {
			overrides = append(overrides, types.FleetLaunchTemplateOverridesRequest{InstanceType: types.InstanceType(it), SubnetId: aws.String(subnet)})
		}
	}
	in := &ec2.CreateFleetInput{
		Type: types.FleetTypeInstant,
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateId: aws.String(req.LaunchTemplateID),
				Version:          aws.String(req.LaunchTemplateVersion),
			},
			Overrides: overrides,
		}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(int32(count)),
		},
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: ec2Tags(req.tags(f.environment))}},
	}
	if usage == "spot" {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = types.DefaultTargetCapacityTypeSpot
		in.TargetCapacitySpecification.SpotTargetCapacity = aws.Int32(int32(count))
		in.SpotOptions = &types.SpotOptionsRequest{AllocationStrategy: types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = types.DefaultTargetCapacityTypeOnDemand
		in.TargetCapacitySpecification.OnDemandTargetCapacity = aws.Int32(int32(count))
		in.OnDemandOptions = &types.OnDemandOptionsRequest{AllocationStrategy: types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	out, err := f.ec2.CreateFleet(ctx, in)
	if err != nil {
		return LaunchResult{}, fmt.Errorf("CreateFleet (%s, %d): %w", usage, count, err)
	}
	var res LaunchResult
	for _, group := range out.Instances {
		var subnet, az string
		if o := group.LaunchTemplateAndOverrides; o != nil && o.Overrides != nil {
			subnet, az = aws.ToString(o.Overrides.SubnetId), aws.ToString(o.Overrides.AvailabilityZone)
		}
		class := usage
		if group.Lifecycle != "" {
			class = map[types.InstanceLifecycle]string{types.InstanceLifecycleSpot: "spot", types.InstanceLifecycleOnDemand: "on-demand"}[group.Lifecycle]
		}
		for _, id := range group.InstanceIds {
			res.Instances = append(res.Instances, Launched{InstanceID: id, InstanceType: string(group.InstanceType), SubnetID: subnet, AZ: az, UsageClass: class})
		}
	}
	for _, e := range out.Errors {
		le := LaunchError{Code: aws.ToString(e.ErrorCode), Message: aws.ToString(e.ErrorMessage), UsageClass: usage}
		if o := e.LaunchTemplateAndOverrides; o != nil && o.Overrides != nil {
			le.InstanceType, le.SubnetID = string(o.Overrides.InstanceType), aws.ToString(o.Overrides.SubnetId)
		}
		res.Errors = append(res.Errors, le)
	}
	return res, nil
}

// tagVolumes tags the EBS volumes of new instances: an instant fleet can tag
// only the fleet and its instances, not their volumes.
func (f *Fleet) tagVolumes(ctx context.Context, insts []Launched, tags map[string]string) error {
	ids := make([]string, len(insts))
	for i, inst := range insts {
		ids[i] = inst.InstanceID
	}
	var volumes []string
	deadline := time.Now().Add(f.DescribeRetry)
	for attempt := 1; ; attempt++ {
		out, err := f.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
		if err == nil {
			volumes = volumes[:0]
			for _, r := range out.Reservations {
				for _, i := range r.Instances {
					for _, bd := range i.BlockDeviceMappings {
						if bd.Ebs != nil && bd.Ebs.VolumeId != nil {
							volumes = append(volumes, *bd.Ebs.VolumeId)
						}
					}
				}
			}
			break
		}
		if !IsNotFound(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
	if len(volumes) == 0 {
		return nil
	}
	_, err := f.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: volumes, Tags: ec2Tags(tags)})
	return err
}

func ec2Tags(m map[string]string) []types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tags := make([]types.Tag, len(keys))
	for i, k := range keys {
		tags[i] = types.Tag{Key: aws.String(k), Value: aws.String(m[k])}
	}
	return tags
}
