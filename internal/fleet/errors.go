package fleet

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// Not-found and the error code come from internal/awserr, the vocabulary
// every AWS caller shares; what is EC2's alone — throttling and capacity —
// is here.

// IsThrottling reports EC2 (or another AWS API) refusing a call for its rate.
// The SDK already retried such a call; seeing it here means "back off longer".
func IsThrottling(err error) bool {
	code := awserr.Code(err)
	if _, ok := retry.DefaultThrottleErrorCodes[code]; ok {
		return true
	}
	return code == "EC2ThrottledException"
}

// IsCapacity reports an API error saying EC2 has no capacity for the request
// now; see IsCapacityCode.
func IsCapacity(err error) bool { return IsCapacityCode(awserr.Code(err)) }

// capacityCodes are the documented EC2 error codes meaning "not enough
// capacity for this request right now" — the failures another usage class,
// or the same request a little later, can overcome. They come back both as
// API errors and in CreateFleet's per-override Errors.
//
// Left out on purpose: InsufficientFreeAddressesInSubnet (an on-demand retry
// lands in the same subnets and fails the same way) and the account quotas
// InstanceLimitExceeded / VcpuLimitExceeded (on-demand quotas: no fallback to
// on-demand can help, and waiting does not either).
var capacityCodes = map[string]bool{
	"InsufficientInstanceCapacity":         true, // no capacity for the type in the AZ
	"InsufficientCapacity":                 true,
	"InsufficientHostCapacity":             true, // dedicated hosts
	"InsufficientReservedInstanceCapacity": true,
	"UnfulfillableCapacity":                true, // no spare spot capacity for the request
	"MaxSpotInstanceCountExceeded":         true, // the account's spot limit
	"SpotMaxPriceTooLow":                   true, // spot price above the maximum price
}

// IsCapacityCode reports a capacity error code (see capacityCodes).
func IsCapacityCode(code string) bool { return capacityCodes[code] }

// IsProfilePropagation reports EC2 refusing an instance profile as invalid,
// as it does for several seconds after IAM made it (IAM is eventually
// consistent with EC2: GetInstanceProfile already finds it). It comes back
// as an API error of RunInstances and in CreateFleet's per-override Errors:
// "InvalidParameterValue: Value (…) for parameter iamInstanceProfile.arn is
// invalid. Invalid IAM Instance Profile ARN" (or .name / name).
func IsProfilePropagation(code, message string) bool {
	return code == "InvalidParameterValue" && strings.Contains(strings.ToLower(message), "invalid iam instance profile")
}
