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

// IsEC2CapacityShortage reports an API error saying EC2 has no capacity for
// the request now (not the pool's cap: state.IsPoolAtCap); see
// IsEC2CapacityShortageCode.
func IsEC2CapacityShortage(err error) bool { return IsEC2CapacityShortageCode(awserr.Code(err)) }

// capacityCodes are the documented EC2 error codes meaning "not enough
// capacity for this request right now" — the failures another usage class,
// or the same request a little later, can overcome. They come back both as
// API errors and in CreateFleet's per-override Errors.
//
// Left out on purpose: InsufficientFreeAddressesInSubnet (an on-demand retry
// lands in the same subnets and fails the same way) and the account quotas
// InstanceLimitExceeded / VcpuLimitExceeded (on-demand quotas: no fallback to
// on-demand can help; waiting may, as the account's other instances end:
// IsRetryableCode).
var capacityCodes = map[string]bool{
	"InsufficientInstanceCapacity":         true, // no capacity for the type in the AZ
	"InsufficientCapacity":                 true,
	"InsufficientHostCapacity":             true, // dedicated hosts
	"InsufficientReservedInstanceCapacity": true,
	"UnfulfillableCapacity":                true, // no spare spot capacity for the request
	"MaxSpotInstanceCountExceeded":         true, // the account's spot limit
	"SpotMaxPriceTooLow":                   true, // spot price above the maximum price
}

// IsEC2CapacityShortageCode reports a capacity error code (see capacityCodes).
func IsEC2CapacityShortageCode(code string) bool { return capacityCodes[code] }

// IsProfilePropagation reports EC2 refusing an instance profile as invalid,
// as it does for several seconds after IAM made it (IAM is eventually
// consistent with EC2: GetInstanceProfile already finds it). It comes back
// as an API error of RunInstances and in CreateFleet's per-override Errors:
// "InvalidParameterValue: Value (…) for parameter iamInstanceProfile.arn is
// invalid. Invalid IAM Instance Profile ARN" (or .name / name).
func IsProfilePropagation(code, message string) bool {
	return code == "InvalidParameterValue" && strings.Contains(strings.ToLower(message), "invalid iam instance profile")
}

// quotaCodes are the account's limits on running instances: On-Demand
// vCPUs per instance family group (VcpuLimitExceeded) and the older
// instance count (InstanceLimitExceeded). No usage class or subnet helps,
// but the account's other instances end: the same launch a little later
// may pass.
var quotaCodes = map[string]bool{
	"VcpuLimitExceeded":     true,
	"InstanceLimitExceeded": true,
}

// IsQuotaCode reports an account quota error code (see quotaCodes).
func IsQuotaCode(code string) bool { return quotaCodes[code] }

// IsRetryableCode reports a launch error that the same launch may not meet
// a little later: capacity (IsEC2CapacityShortageCode), the account's quotas
// (IsQuotaCode) and a subnet out of free addresses. EC2's error reference
// says of InsufficientInstanceCapacity to wait a few minutes and try
// again, or to try other instance types or Availability Zones; a
// provision does both within its deadline (lambdas/provision/retry.go).
func IsRetryableCode(code string) bool {
	return IsEC2CapacityShortageCode(code) || IsQuotaCode(code) || code == "InsufficientFreeAddressesInSubnet"
}
