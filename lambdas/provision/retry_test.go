package provision

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

func TestOnlyALaunchShortForCapacityQuotaOrAddressesIsRetried(t *testing.T) {
	short := func(codes ...string) error {
		e := &shortLaunch{got: 0, asked: 2}
		for _, c := range codes {
			e.why.Errors = append(e.why.Errors, LaunchError{Code: c})
		}
		return fmt.Errorf("wrapped: %w", e)
	}
	api := func(code string) error {
		return fmt.Errorf("launch 2 instances: %w", &smithy.GenericAPIError{Code: code, Message: "injected"})
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{short("InsufficientInstanceCapacity", "VcpuLimitExceeded"), true},
		{short("MaxSpotInstanceCountExceeded", "UnfulfillableCapacity", "InsufficientFreeAddressesInSubnet"), true},
		{short("InsufficientInstanceCapacity", "InvalidParameterValue"), false}, // the template is wrong too
		{short(), false}, // short without a reason: nothing says waiting helps
		{api("InsufficientInstanceCapacity"), true},
		{api("UnauthorizedOperation"), false},
		{&state.CapacityError{Pool: "linux", Max: 2, Asked: 1, Live: 2}, false}, // the pool's cap: its queue waits
		{errors.New("record instance i-1: boom"), false},
		{nil, false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestTheRunsErrorNamesTheTypesAZsClassesCodesAndLaunchesTried(t *testing.T) {
	pool := &state.PoolConfig{SubnetZones: map[string]string{"subnet-a": "us-east-1a", "subnet-b": "us-east-1b"}}
	l := newLaunchLog(pool, []string{"c7i.large", "m7i.large"})
	quota := "You have requested more vCPU capacity than your current vCPU limit of 8 allows"
	for range 3 {
		l.note(0, LaunchErrors{Errors: []LaunchError{
			{Code: "InsufficientInstanceCapacity", Message: "no capacity", InstanceType: "c7i.large", SubnetID: "subnet-a", UsageClass: "spot"},
			{Code: "VcpuLimitExceeded", Message: quota, InstanceType: "m7i.large", SubnetID: "subnet-b", UsageClass: "on-demand"},
		}}, nil)
	}
	last := &shortLaunch{got: 0, asked: 2}
	err := l.failure(2, 2, last)
	for _, want := range []string{"did not give 2 of 2 instances", "3 launches", "c7i.large, m7i.large", "us-east-1a, us-east-1b", "on-demand, spot",
		"InsufficientInstanceCapacity (c7i.large in us-east-1a, spot) ×3", "VcpuLimitExceeded (m7i.large in us-east-1b, on-demand) ×3", "vCPU limit of 8"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "no capacity") {
		t.Errorf("a capacity code's message repeated: %v", err)
	}
	if !errors.Is(err, last) {
		t.Errorf("the error does not wrap the last launch's: %v", err)
	}
}
