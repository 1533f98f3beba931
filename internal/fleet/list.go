package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Instance is an EC2 instance of the deployment.
type Instance struct {
	ID           string
	InstanceType string
	State        string // pending, running, stopping, stopped, shutting-down, terminated
	// StateReason is why EC2 moved it to its state, when it says
	// ("Client.InternalError: Client error on launch" for a root volume
	// whose KMS key the launch could not use, say).
	StateReason string
	LaunchTime  time.Time
	SubnetID    string
	AZ          string
	UsageClass  string // Spot or OnDemand, from the instance's lifecycle
	Tags        map[string]string
}

// ReasonSpotTermination is the state reason code of an instance EC2 ended
// to take its spot capacity back (EC2 API Reference, StateReason:
// "Server.SpotInstanceTermination"). EC2 keeps showing a terminated
// instance, with its reason, for about an hour.
const ReasonSpotTermination = "Server.SpotInstanceTermination"

// Reclaimed says whether EC2 ended the instance to take its spot capacity
// back: EC2's own word, whatever the instance's agent said or did not.
func (i Instance) Reclaimed() bool {
	return strings.HasPrefix(i.StateReason, ReasonSpotTermination)
}

// Orphan returns the ghr:orphan tag's value (the assignment the instance
// had when it was tagged) and whether the tag is there.
func (i Instance) Orphan() (string, bool) {
	v, ok := i.Tags[TagOrphan]
	return v, ok
}

// OrphanFilter selects instances by their ghr:orphan tag.
type OrphanFilter int

const (
	OrphansIncluded OrphanFilter = iota // tagged or not
	OrphansOnly                         // only instances tagged ghr:orphan
	OrphansExcluded                     // only instances without the tag
)

// Filter narrows List. The zero Filter lists every live instance of the
// deployment.
type Filter struct {
	Pool    string // ghr:pool
	Owner   string // ghr:owner
	Orphans OrphanFilter
	// IDs, when set, limits the listing to these instances. Unknown ids are
	// left out, not an error.
	IDs []string
	// States defaults to LiveStates.
	States []string
}

// LiveStates are the states of an instance that may still cost money.
var LiveStates = []string{"pending", "running", "stopping", "stopped"}

var knownStates = map[string]bool{"pending": true, "running": true, "stopping": true, "stopped": true, "shutting-down": true, "terminated": true}

// idsPerCall bounds the instance ids in one instance-id filter: EC2 caps the
// filter values of one request at 200, and the other filters use a few.
const idsPerCall = 150

// List returns the deployment's instances that match the filter, reading
// every page. Ids are matched with an instance-id filter rather than
// InstanceIds, so an id EC2 no longer knows is simply absent instead of
// failing the whole call, and pages stay bounded by PageSize.
func (f *Fleet) List(ctx context.Context, flt Filter) ([]Instance, error) {
	if f.environment == "" {
		return nil, invalid("environment", "the fleet has no environment")
	}
	filters, err := f.filters(flt)
	if err != nil {
		return nil, err
	}
	if len(flt.IDs) == 0 {
		return f.describe(ctx, filters, flt.Orphans)
	}
	var out []Instance
	for start := 0; start < len(flt.IDs); start += idsPerCall {
		ids := flt.IDs[start:min(start+idsPerCall, len(flt.IDs))]
		withIDs := slices.Concat(filters, []types.Filter{{Name: aws.String("instance-id"), Values: ids}})
		insts, err := f.describe(ctx, withIDs, flt.Orphans)
		if err != nil {
			return nil, err
		}
		out = append(out, insts...)
	}
	return out, nil
}

// filters turns a Filter into EC2 filters (all of which must match).
func (f *Fleet) filters(flt Filter) ([]types.Filter, error) {
	states := flt.States
	if len(states) == 0 {
		states = LiveStates
	}
	for i, s := range states {
		if !knownStates[s] {
			return nil, invalid(fmt.Sprintf("States[%d]", i), "unknown instance state %q", s)
		}
	}
	filters := []types.Filter{
		{Name: aws.String("tag:" + TagEnvironment), Values: []string{f.environment}},
		{Name: aws.String("instance-state-name"), Values: states},
	}
	if flt.Pool != "" {
		filters = append(filters, types.Filter{Name: aws.String("tag:" + TagPool), Values: []string{flt.Pool}})
	}
	if flt.Owner != "" {
		filters = append(filters, types.Filter{Name: aws.String("tag:" + TagOwner), Values: []string{flt.Owner}})
	}
	if flt.Orphans == OrphansOnly {
		filters = append(filters, types.Filter{Name: aws.String("tag-key"), Values: []string{TagOrphan}})
	}
	// EC2 has no "tag absent" filter: OrphansExcluded is applied to the answer.
	return filters, nil
}

func (f *Fleet) describe(ctx context.Context, filters []types.Filter, orphans OrphanFilter) ([]Instance, error) {
	in := &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(min(max(f.PageSize, 5), 1000))}
	var out []Instance
	pages := ec2.NewDescribeInstancesPaginator(f.ec2, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("DescribeInstances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				inst := fromEC2(i)
				if _, tagged := inst.Orphan(); tagged && orphans == OrphansExcluded {
					continue
				}
				out = append(out, inst)
			}
		}
	}
	return out, nil
}

func fromEC2(i types.Instance) Instance {
	inst := Instance{
		ID:           aws.ToString(i.InstanceId),
		InstanceType: string(i.InstanceType),
		LaunchTime:   aws.ToTime(i.LaunchTime),
		SubnetID:     aws.ToString(i.SubnetId),
		UsageClass:   OnDemand, // EC2 leaves the lifecycle out for on-demand
		Tags:         make(map[string]string, len(i.Tags)),
	}
	if i.State != nil {
		inst.State = string(i.State.Name)
	}
	if r := i.StateReason; r != nil {
		inst.StateReason = strings.TrimPrefix(aws.ToString(r.Code)+": "+aws.ToString(r.Message), ": ")
	}
	if i.Placement != nil {
		inst.AZ = aws.ToString(i.Placement.AvailabilityZone)
	}
	if i.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
		inst.UsageClass = Spot
	}
	for _, t := range i.Tags {
		inst.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return inst
}
