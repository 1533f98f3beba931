package fleet

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

func TestErrorClassifiers(t *testing.T) {
	wrapped := func(code string) error { return fmt.Errorf("launch: %w", apiError(code)) }
	cases := []struct {
		err                         error
		notFound, capacity, throttl bool
	}{
		{wrapped("InvalidInstanceID.NotFound"), true, false, false},
		{wrapped("InvalidLaunchTemplateId.NotFound"), true, false, false},
		{wrapped("InvalidLaunchTemplateName.NotFoundException"), true, false, false},
		{wrapped("InvalidInstanceID.Malformed"), false, false, false},
		{wrapped("InsufficientInstanceCapacity"), false, true, false},
		{wrapped("UnfulfillableCapacity"), false, true, false},
		{wrapped("MaxSpotInstanceCountExceeded"), false, true, false},
		{wrapped("SpotMaxPriceTooLow"), false, true, false},
		{wrapped("InsufficientFreeAddressesInSubnet"), false, false, false},
		{wrapped("VcpuLimitExceeded"), false, false, false},
		{wrapped("RequestLimitExceeded"), false, false, true},
		{wrapped("Throttling"), false, false, true},
		{wrapped("ThrottlingException"), false, false, true},
		{wrapped("EC2ThrottledException"), false, false, true},
		{errors.Join(errors.New("other"), wrapped("RequestLimitExceeded")), false, false, true},
		{errors.New("InsufficientInstanceCapacity"), false, false, false}, // not an API error
		{nil, false, false, false},
	}
	for _, c := range cases {
		if awserr.IsNotFound(c.err) != c.notFound || IsEC2CapacityShortage(c.err) != c.capacity || IsThrottling(c.err) != c.throttl {
			t.Errorf("%v: IsNotFound %v, IsEC2CapacityShortage %v, IsThrottling %v; want %v, %v, %v",
				c.err, awserr.IsNotFound(c.err), IsEC2CapacityShortage(c.err), IsThrottling(c.err), c.notFound, c.capacity, c.throttl)
		}
	}
	for _, code := range []string{"InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
		"InsufficientReservedInstanceCapacity", "UnfulfillableCapacity", "MaxSpotInstanceCountExceeded", "SpotMaxPriceTooLow"} {
		if !IsEC2CapacityShortageCode(code) {
			t.Errorf("IsEC2CapacityShortageCode(%s) = false", code)
		}
	}
	if IsEC2CapacityShortageCode("") || IsEC2CapacityShortageCode("insufficientinstancecapacity") {
		t.Error("IsEC2CapacityShortageCode accepts a code EC2 does not send")
	}
}

func TestAProfileRefusalIsKnownByItsCodeAndMessage(t *testing.T) {
	refused := &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "Value (ghr-x) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"}
	other := &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "Value (x) for parameter instanceType is invalid."}
	for _, c := range []struct {
		res  LaunchResult
		err  error
		want bool
	}{
		{err: fmt.Errorf("CreateFleet: %w", refused), want: true},
		{err: other},
		{res: LaunchResult{Errors: []LaunchError{{Code: refused.Code, Message: refused.Message}, {Code: refused.Code, Message: refused.Message}}}, want: true},
		{res: LaunchResult{Errors: []LaunchError{{Code: refused.Code, Message: refused.Message}, {Code: "InsufficientInstanceCapacity"}}}},
		{res: LaunchResult{Instances: []Launched{{InstanceID: "i-1"}}, Errors: []LaunchError{{Code: refused.Code, Message: refused.Message}}}},
		{res: LaunchResult{}},
	} {
		if got := c.res.profileRefused(c.err); got != c.want {
			t.Errorf("profileRefused(%+v, %v) = %v, want %v", c.res, c.err, got, c.want)
		}
	}
}

func TestCapacityQuotaAndAddressCodesAreWorthALaterLaunchAndOthersAreNot(t *testing.T) {
	for code, want := range map[string]bool{
		"InsufficientInstanceCapacity": true, "UnfulfillableCapacity": true, "MaxSpotInstanceCountExceeded": true,
		"VcpuLimitExceeded": true, "InstanceLimitExceeded": true, "InsufficientFreeAddressesInSubnet": true,
		"InvalidParameterValue": false, "InvalidFleetConfig": false, "UnauthorizedOperation": false, "": false,
	} {
		if IsRetryableCode(code) != want {
			t.Errorf("IsRetryableCode(%q) = %v, want %v", code, !want, want)
		}
	}
}
