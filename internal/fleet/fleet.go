// Package fleet is the EC2 layer: one CreateFleet `instant` request per
// launch (instance types × subnets as overrides, spot with on-demand
// fallback), tag-filtered listing, batched termination and orphan tags.
// EC2 is reached through a narrow interface holding only the calls used.
package fleet

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
)

// Tag keys of DESIGN.md §9.
const (
	TagEnvironment    = "ghr:environment"
	TagPool           = "ghr:pool"
	TagOwner          = "ghr:owner"
	TagAssignment     = "ghr:assignment"
	TagOrphan         = "ghr:orphan"
	TagGithubRunnerID = "ghr:github_runner_id"
	TagBypassRemoval  = "ghr:bypass-removal"
)

// EC2API holds the EC2 calls the fleet makes.
type EC2API interface {
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
	CreateTags(context.Context, *ec2.CreateTagsInput, ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error)
	DeleteTags(context.Context, *ec2.DeleteTagsInput, ...func(*ec2.Options)) (*ec2.DeleteTagsOutput, error)
}

// Fleet launches and manages one deployment's instances.
type Fleet struct {
	ec2         EC2API
	environment string
	// PageSize is DescribeInstances' MaxResults (5-1000; 0: EC2's default).
	PageSize int32
	// TerminateBatch is the ids per TerminateInstances call.
	TerminateBatch int
	// DescribeRetry is how long tagging waits for new instances to become
	// visible to DescribeInstances (eventual consistency).
	DescribeRetry time.Duration
}

// New returns the fleet of a deployment (its ghr:environment tag value).
func New(client EC2API, environment string) *Fleet {
	return &Fleet{ec2: client, environment: environment, TerminateBatch: 100, DescribeRetry: 10 * time.Second}
}

// Environment is the deployment's tag value.
func (f *Fleet) Environment() string { return f.environment }

// IsNotFound reports an instance (or other resource) EC2 does not know.
func IsNotFound(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && strings.HasSuffix(ae.ErrorCode(), ".NotFound")
}

// IsThrottling reports EC2 refusing a call for its rate.
func IsThrottling(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException", "RequestThrottled":
		return true
	}
	return false
}

// IsCapacity reports an error that says EC2 has no capacity for the request
// (an API error or a CreateFleet per-override error code).
func IsCapacity(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && IsCapacityCode(ae.ErrorCode())
}

// capacityCodes are the EC2 error codes that mean "no capacity here now",
// after which another capacity type may succeed.
var capacityCodes = map[string]bool{
	"InsufficientInstanceCapacity":         true,
	"InsufficientCapacity":                 true,
	"InsufficientHostCapacity":             true,
	"InsufficientReservedInstanceCapacity": true,
	"UnfulfillableCapacity":                true,
	"MaxSpotInstanceCountExceeded":         true,
	"SpotMaxPriceTooLow":                   true,
	"InsufficientFreeAddressesInSubnet":    true,
	"capacity-not-available":               true,
	"price-too-low":                        true,
}

// IsCapacityCode reports a capacity error code.
func IsCapacityCode(code string) bool { return capacityCodes[code] }
