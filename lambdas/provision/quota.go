package provision

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The account's vCPU quotas, read by preflight: a pool whose maxInstances
// of its largest type would pass its usage class's quota is warned about
// (a launch beyond the quota fails with VcpuLimitExceeded or
// MaxSpotInstanceCountExceeded; provision retries it within its deadline,
// retry.go, but a pool sized past the quota never reaches its maximum).
// Only the Standard group (A, C, D, H, I, M, R, T, Z families) is checked:
// Service Quotas, service code ec2, quota codes L-1216C47A "Running
// On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" and
// L-34B43A08 "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance
// Requests", both in vCPUs (EC2 User Guide, "Amazon EC2 instance type
// quotas").
const (
	QuotaOnDemandStandard = "L-1216C47A"
	QuotaSpotStandard     = "L-34B43A08"
)

// Quotas reads what preflight compares: a quota's value and the instance
// types' vCPUs.
type Quotas interface {
	// VCPUQuota is the value of an EC2 quota (quota code) in vCPUs.
	VCPUQuota(ctx context.Context, code string) (float64, error)
	// VCPUs is the default vCPUs of each instance type.
	VCPUs(ctx context.Context, instanceTypes []string) (map[string]int, error)
}

// AWSQuotas reads them from Service Quotas and EC2.
type AWSQuotas struct {
	ServiceQuotas *servicequotas.Client
	EC2           *ec2.Client
}

func (q AWSQuotas) VCPUQuota(ctx context.Context, code string) (float64, error) {
	out, err := q.ServiceQuotas.GetServiceQuota(ctx, &servicequotas.GetServiceQuotaInput{ServiceCode: aws.String("ec2"), QuotaCode: aws.String(code)})
	if err != nil {
		return 0, fmt.Errorf("GetServiceQuota ec2 %s: %w", code, err)
	}
	if out.Quota == nil || out.Quota.Value == nil {
		return 0, fmt.Errorf("GetServiceQuota ec2 %s: no value", code)
	}
	return *out.Quota.Value, nil
}

func (q AWSQuotas) VCPUs(ctx context.Context, instanceTypes []string) (map[string]int, error) {
	in := &ec2.DescribeInstanceTypesInput{}
	for _, it := range instanceTypes {
		in.InstanceTypes = append(in.InstanceTypes, ec2types.InstanceType(it))
	}
	out, err := q.EC2.DescribeInstanceTypes(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("DescribeInstanceTypes: %w", err)
	}
	vcpus := map[string]int{}
	for _, it := range out.InstanceTypes {
		if it.VCpuInfo != nil {
			vcpus[string(it.InstanceType)] = int(aws.ToInt32(it.VCpuInfo.DefaultVCpus))
		}
	}
	return vcpus, nil
}

// standard says whether an instance type counts against the Standard
// group's quotas: families A, C, D, H, I, M, R, T, Z, but not DL, HPC,
// Inf or Trn.
func standard(instanceType string) bool {
	family, _, _ := strings.Cut(strings.ToLower(instanceType), ".")
	for _, other := range []string{"dl", "hpc", "inf", "trn"} {
		if strings.HasPrefix(family, other) {
			return false
		}
	}
	return family != "" && strings.ContainsRune("acdhimrtz", rune(family[0]))
}

// quotaCheck compares a pool's maximum, maxInstances of its largest type,
// with its usage class's vCPU quota. It never fails preflight: a pool
// past the quota, or a quota that could not be read, is a warning.
func quotaCheck(ctx context.Context, q Quotas, p *state.PoolConfig) Check {
	c := Check{Check: "quota", Pool: p.Name, OK: true}
	for _, it := range p.InstanceTypes {
		if !standard(it) {
			c.Detail = fmt.Sprintf("not checked: %s is not in the Standard (A, C, D, H, I, M, R, T, Z) quota group", it)
			return c
		}
	}
	code, name := QuotaOnDemandStandard, "Running On-Demand Standard instances"
	if p.UsageClass == state.UsageClassSpot {
		code, name = QuotaSpotStandard, "All Standard Spot Instance Requests"
	}
	quota, err := q.VCPUQuota(ctx, code)
	if err == nil {
		var vcpus map[string]int
		if vcpus, err = q.VCPUs(ctx, p.InstanceTypes); err == nil {
			largest, which := 0, ""
			for _, it := range p.InstanceTypes {
				if vcpus[it] > largest {
					largest, which = vcpus[it], it
				}
			}
			need := p.MaxInstances * largest
			c.Detail = fmt.Sprintf("maxInstances %d × %d vCPUs (%s) = %d vCPUs within the account's quota %s (%s) of %g vCPUs", p.MaxInstances, largest, which, need, code, name, quota)
			if float64(need) > quota {
				c.Warning = true
				c.Detail = fmt.Sprintf("maxInstances %d × %d vCPUs (%s) = %d vCPUs passes the account's quota %s (%s) of %g vCPUs, shared with every other instance of the region: launches beyond it fail with %s until instances end; raise the quota or lower max_instances",
					p.MaxInstances, largest, which, need, code, name, quota, map[bool]string{true: "MaxSpotInstanceCountExceeded (on demand with on_demand_fallback)", false: "VcpuLimitExceeded"}[p.UsageClass == state.UsageClassSpot])
			}
			return c
		}
	}
	c.Warning = true
	c.Detail = "not checked: " + err.Error()
	return c
}
