package provider

import (
	"context"

	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// A function in a VPC: where Lambda attaches its network interfaces (and,
// in policy.go, the role's permission to manage them).

// vpcConfig is the function's network placement: the subnets and security
// groups, or empty lists (no VPC; on update, leaving one).
func (r *functionResource) vpcConfig(ctx context.Context, m functionModel) *lambdatypes.VpcConfig {
	subnets, groups := []string{}, []string{}
	_ = m.VPCSubnetIDs.ElementsAs(ctx, &subnets, false)
	_ = m.VPCSecurityGroupIDs.ElementsAs(ctx, &groups, false)
	return &lambdatypes.VpcConfig{SubnetIds: subnets, SecurityGroupIds: groups}
}

// inVPC says whether the function runs in a VPC (its role then manages the
// network interfaces Lambda attaches).
func (m functionModel) inVPC() bool { return len(m.VPCSubnetIDs.Elements()) > 0 }
