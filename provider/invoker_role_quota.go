package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

var _ resource.ResourceWithValidateConfig = &invokerRoleResource{}

// IAM's quota on a role's trust policy, in characters, white space not
// counted (IAM User Guide, "IAM and AWS STS quotas": "Role trust policy
// length", 2,048 by default, at most 4,096 through a quota increase). The
// invoker role's trust lists every repository: about 55 fit by default.
const (
	trustPolicyDefault = 2048
	trustPolicyMax     = 4096
)

// ValidateConfig says at plan time when the repositories make a trust
// policy IAM would refuse, instead of CreateRole failing mid-apply: a
// warning past the default quota (an account may have raised it), an error
// past the most it can be raised to.
func (r *invokerRoleResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m invokerRoleModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.Repositories.IsUnknown() || m.Repositories.IsNull() || m.Issuer.IsUnknown() {
		return
	}
	var repos []string
	if resp.Diagnostics.Append(m.Repositories.ElementsAs(ctx, &repos, false)...); resp.Diagnostics.HasError() {
		return
	}
	issuer := m.Issuer.ValueString()
	if m.Issuer.IsNull() {
		issuer = githubIssuer
	}
	// The account is always 12 digits; the partition's name the longest
	// of the usual ones.
	n := len(invokerTrustPolicy("aws-us-gov", "123456789012", issuer, repos))
	switch {
	case n > trustPolicyMax:
		resp.Diagnostics.AddAttributeError(path.Root("repositories"), "Too many repositories for one role",
			fmt.Sprintf("%d repositories make a trust policy of about %d characters; IAM holds at most %d in a role's trust policy. Split them over several invoker roles (one deployment of the module per group of repositories).", len(repos), n, trustPolicyMax))
	case n > trustPolicyDefault:
		resp.Diagnostics.AddAttributeWarning(path.Root("repositories"), "The trust policy is over IAM's default quota",
			fmt.Sprintf("%d repositories make a trust policy of about %d characters; IAM holds %d by default (\"Role trust policy length\"). Unless the account's quota was raised (up to %d), creating the role fails: raise it, or split the repositories over several invoker roles.", len(repos), n, trustPolicyDefault, trustPolicyMax))
	}
}
