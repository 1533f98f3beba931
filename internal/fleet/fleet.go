// Package fleet is the EC2 layer of ghrunner: one CreateFleet `instant`
// request per launch (instance types × one subnet per AZ as overrides, the
// AZs' other subnets for what capacity left missing, spot with an on-demand
// fallback for the missing count), tag-filtered listing, batched
// termination and the scale-down tags.
//
// EC2 is reached through EC2API, which holds only the calls made here, so
// tests can put a fault-injecting wrapper around a real client.
package fleet

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// EC2 tag keys (docs/design.md). Every instance of a deployment carries
// TagEnvironment; that tag is what List filters on, so one account can hold
// several deployments.
const (
	TagEnvironment    = "ghr:environment"
	TagPool           = "ghr:pool"
	TagOwner          = "ghr:owner"
	TagAssignment     = "ghr:assignment"
	TagOrphan         = "ghr:orphan" // value: the assignment when tagged
	TagGithubRunnerID = "ghr:github_runner_id"
	TagBypassRemoval  = "ghr:bypass-removal"
)

// Usage classes of an instance: the pool's (state.UsageClasses).
const (
	Spot     = state.UsageClassSpot
	OnDemand = state.UsageClassOnDemand
)

// EC2API is the part of *ec2.Client the fleet uses.
type EC2API interface {
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	StopInstances(context.Context, *ec2.StopInstancesInput, ...func(*ec2.Options)) (*ec2.StopInstancesOutput, error)
	StartInstances(context.Context, *ec2.StartInstancesInput, ...func(*ec2.Options)) (*ec2.StartInstancesOutput, error)
	CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
	DeleteTags(context.Context, *ec2.DeleteTagsInput, ...func(*ec2.Options)) (*ec2.DeleteTagsOutput, error)
}

// Defaults of the tunables.
const (
	DefaultPageSize         = 1000 // EC2's largest MaxResults: fewest calls
	DefaultTerminateBatch   = 100
	DefaultDescribeAttempts = 5
	DefaultDescribeBackoff  = 200 * time.Millisecond
	// DefaultProfileWait: EC2 takes about ten seconds, sometimes more, to
	// accept an instance profile IAM has just made.
	DefaultProfileWait = 45 * time.Second
)

// Fleet launches and manages the instances of one deployment. Change the
// exported fields before first use only; a Fleet is then safe for concurrent use.
type Fleet struct {
	ec2         EC2API
	environment string

	// PageSize is DescribeInstances' MaxResults. EC2 accepts 5 to 1000;
	// values outside are clamped.
	PageSize int32
	// TerminateBatch is how many ids go into one TerminateInstances call.
	TerminateBatch int
	// DescribeAttempts bounds the DescribeInstances calls made to find the
	// volumes of new instances: right after a launch EC2 may not know the
	// ids yet (eventual consistency) and answers InvalidInstanceID.NotFound.
	DescribeAttempts int
	// DescribeBackoff is the wait after the first NotFound; it doubles after each.
	DescribeBackoff time.Duration
	// ProfileWait bounds how long a launch retries while EC2 refuses the
	// launch template's instance profile as invalid: IAM has made it, EC2
	// does not know it yet (IsProfilePropagation). 0 does not retry.
	ProfileWait time.Duration
	// Sleep waits between those attempts; tests replace it to run without delay.
	Sleep func(context.Context, time.Duration) error

	rotation atomic.Uint64 // which subnet of each AZ a launch starts at (subnets.go)
}

// New returns the fleet of a deployment; environment is the value of its
// ghr:environment tag.
func New(client EC2API, environment string) *Fleet {
	return &Fleet{
		ec2:              client,
		environment:      environment,
		PageSize:         DefaultPageSize,
		TerminateBatch:   DefaultTerminateBatch,
		DescribeAttempts: DefaultDescribeAttempts,
		DescribeBackoff:  DefaultDescribeBackoff,
		ProfileWait:      DefaultProfileWait,
		Sleep:            sleep,
	}
}

// Environment is the deployment's ghr:environment tag value.
func (f *Fleet) Environment() string { return f.environment }

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
