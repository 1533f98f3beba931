package fleet

import (
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
)

// ErrorCode is the API error code in err's chain, or "" when err did not
// come from an AWS API answer.
func ErrorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// IsNotFound reports an error saying EC2 does not know a resource, such as
// InvalidInstanceID.NotFound. For instances that is either "already gone for
// good" or "too new to be visible yet"; the caller knows which.
func IsNotFound(err error) bool {
	code := ErrorCode(err)
	return strings.HasSuffix(code, ".NotFound") || strings.HasSuffix(code, "NotFoundException")
}

// IsThrottling reports EC2 (or another AWS API) refusing a call for its rate.
// The SDK already retried such a call; seeing it here means "back off longer".
func IsThrottling(err error) bool {
	code := ErrorCode(err)
	if _, ok := retry.DefaultThrottleErrorCodes[code]; ok {
		return true
	}
	return code == "EC2ThrottledException"
}

// IsCapacity reports an API error saying EC2 has no capacity for the request
// now; see IsCapacityCode.
func IsCapacity(err error) bool { return IsCapacityCode(ErrorCode(err)) }

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
