package fleet

import (
	"context"
	"errors"
	"fmt"
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
	LaunchTime   time.Time
	SubnetID     string
	UsageClass   string // spot or on-demand
	Platform     string // "windows" or "" (Linux)
	Tags         map[string]string
}

// Orphan reports the ghr:orphan tag's value (the assignment when tagged).
func (i Instance) Orphan() (string, bool) {
	v, ok := i.Tags[TagOrphan]
	return v, ok
}

// Filter narrows List.
type Filter struct {
	Pool  string
	Owner string
	// Orphan: nil any, true only tagged ghr:orphan, false only untagged.
	Orphan *bool
	// IDs limits the listing to these instances.
	IDs []string
	// States defaults to every state but shutting-down and terminated.
	States []string
}

// LiveStates are the states of an instance that still costs money.
var LiveStates = []string{"pending", "running", "stopping", "stopped"}

// List returns the deployment's instances matching the filter, every page.
func (f *Fleet) List(ctx context.Context, flt Filter) ([]Instance, error) {
	states := flt.States
	if len(states) == 0 {
		states = LiveStates
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
	if flt.Orphan != nil && *flt.Orphan {
		filters = append(filters, types.Filter{Name: aws.String("tag-key"), Values: []string{TagOrphan}})
	}
	in := &ec2.DescribeInstancesInput{Filters: filters}
	if len(flt.IDs) > 0 {
		in.InstanceIds = flt.IDs
	} else if f.PageSize > 0 {
		in.MaxResults = aws.Int32(f.PageSize) // EC2 refuses MaxResults together with ids
	}
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
				if flt.Orphan != nil && !*flt.Orphan {
					if _, tagged := inst.Orphan(); tagged {
						continue
					}
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
		UsageClass:   "on-demand",
		Platform:     strings.ToLower(string(i.Platform)),
		Tags:         map[string]string{},
	}
	if i.State != nil {
		inst.State = string(i.State.Name)
	}
	if i.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
		inst.UsageClass = "spot"
	}
	for _, t := range i.Tags {
		inst.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return inst
}

// TerminateResult says what Terminate did.
type TerminateResult struct {
	Terminated []string
	Gone       []string // EC2 did not know them: nothing to do
}

// Terminate terminates instances in batches of TerminateBatch. EC2 refuses a
// whole batch when one id is unknown; such a batch is retried id by id so
// the others are still terminated.
func (f *Fleet) Terminate(ctx context.Context, ids []string) (TerminateResult, error) {
	var res TerminateResult
	batch := max(f.TerminateBatch, 1)
	var errs []error
	for start := 0; start < len(ids); start += batch {
		part := ids[start:min(start+batch, len(ids))]
		_, err := f.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: part})
		switch {
		case err == nil:
			res.Terminated = append(res.Terminated, part...)
		case IsNotFound(err) && len(part) > 1:
			for _, id := range part {
				_, err := f.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
				switch {
				case err == nil:
					res.Terminated = append(res.Terminated, id)
				case IsNotFound(err):
					res.Gone = append(res.Gone, id)
				default:
					errs = append(errs, fmt.Errorf("terminate %s: %w", id, err))
				}
			}
		case IsNotFound(err):
			res.Gone = append(res.Gone, part...)
		default:
			errs = append(errs, fmt.Errorf("terminate %d instances: %w", len(part), err))
		}
	}
	return res, errors.Join(errs...)
}

// SetTags sets tags on instances.
func (f *Fleet) SetTags(ctx context.Context, ids []string, tags map[string]string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := f.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: ids, Tags: ec2Tags(tags)}); err != nil {
		return fmt.Errorf("tag %v: %w", ids, err)
	}
	return nil
}

// RemoveTags removes tag keys from instances.
func (f *Fleet) RemoveTags(ctx context.Context, ids []string, keys ...string) error {
	if len(ids) == 0 {
		return nil
	}
	tags := make([]types.Tag, len(keys))
	for i, k := range keys {
		tags[i] = types.Tag{Key: aws.String(k)}
	}
	if _, err := f.ec2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: ids, Tags: tags}); err != nil {
		return fmt.Errorf("untag %v: %w", ids, err)
	}
	return nil
}

// TagOrphan marks an instance as an orphan candidate, noting the assignment
// it had, so phase 1 of scale-down terminates only that assignment.
func (f *Fleet) TagOrphan(ctx context.Context, id, assignment string) error {
	return f.SetTags(ctx, []string{id}, map[string]string{TagOrphan: assignment})
}

// UntagOrphan removes the orphan mark (a false positive).
func (f *Fleet) UntagOrphan(ctx context.Context, id string) error {
	return f.RemoveTags(ctx, []string{id}, TagOrphan)
}
