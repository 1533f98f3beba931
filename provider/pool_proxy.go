package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

// A pool's proxy: written into the agent's configuration (agent/config's
// Proxy, whose Validate is the one home of its rules), from which the user
// data's fetches, the agent and the runner take it. Part of the launch
// template: a change makes a new version.

// poolProxy is the pool's proxy attribute.
type poolProxy struct {
	URL     types.String `tfsdk:"url"`
	NoProxy types.List   `tfsdk:"no_proxy"`
}

var poolProxyType = types.ObjectType{AttrTypes: map[string]attr.Type{"url": types.StringType, "no_proxy": types.ListType{ElemType: types.StringType}}}

var poolProxyAttribute = schema.SingleNestedAttribute{Optional: true,
	Description: "An HTTP(S) proxy the instances' outbound traffic goes through: the user data's downloads (the agent from S3, nftables when the image lacks a firewall tool), " +
		"the agent (its AWS and GitHub calls, the runner download, the package manager it runs) and the runner and its jobs, which get `http_proxy`, `https_proxy` and `no_proxy` " +
		"(lower and upper case). The instance metadata service (169.254.169.254, fd00:ec2::254), loopback and the hosts of `agent_endpoint` and `agent_endpoints` are always reached directly. " +
		"Unset: no proxy.",
	Attributes: map[string]schema.Attribute{
		"url": schema.StringAttribute{Required: true,
			Description: "The proxy, `http://host:port` (or `https://`), for both http and https traffic. No credentials: the URL travels in the launch template's user data, " +
				"readable by anyone allowed to describe the template; admit the instances by address (their subnets or security groups) instead.",
			Validators: []validator.String{proxyFieldValidator{"url"}}},
		"no_proxy": schema.ListAttribute{Optional: true, ElementType: types.StringType,
			Description: "More hosts reached directly: names, `.domain` for a domain's subdomains, IP addresses or CIDR blocks, each optionally with `:port` " +
				"(e.g. `.amazonaws.com` when VPC endpoints serve AWS's services, or your GitHub Enterprise Server). Added to the ones always direct.",
			Validators: []validator.List{listvalidator.SizeAtLeast(1), listvalidator.ValueStringsAre(proxyFieldValidator{"noProxy"})}},
	},
}

// proxy returns the pool's proxy for the agent's configuration, nil when
// unset or not known yet.
func (m poolModel) proxy() *config.Proxy {
	if m.Proxy.IsNull() || m.Proxy.IsUnknown() {
		return nil
	}
	attrs := m.Proxy.Attributes()
	url, _ := attrs["url"].(types.String)
	out := &config.Proxy{URL: url.ValueString()}
	if list, ok := attrs["no_proxy"].(types.List); ok {
		for _, v := range list.Elements() {
			if s, ok := v.(types.String); ok {
				out.NoProxy = append(out.NoProxy, s.ValueString())
			}
		}
	}
	return out
}

// proxyUnrenderable says whether the plan cannot render the user data for
// the pool's proxy: a part of it is not known until apply, or it breaks a
// rule, which its validators have said already.
func (m poolModel) proxyUnrenderable() bool {
	if m.Proxy.IsUnknown() {
		return true
	}
	if p := m.proxy(); p != nil && p.Validate() != nil {
		return true
	}
	for _, v := range m.Proxy.Attributes() {
		if v.IsUnknown() {
			return true
		}
		if list, ok := v.(types.List); ok {
			for _, e := range list.Elements() {
				if e.IsUnknown() {
					return true
				}
			}
		}
	}
	return false
}

// proxyValue is the attribute of p, read back from the user data.
func proxyValue(ctx context.Context, p *config.Proxy) types.Object {
	if p == nil {
		return types.ObjectNull(poolProxyType.AttrTypes)
	}
	list := types.ListNull(types.StringType)
	if len(p.NoProxy) > 0 {
		list, _ = types.ListValueFrom(ctx, types.StringType, p.NoProxy)
	}
	v, _ := types.ObjectValueFrom(ctx, poolProxyType.AttrTypes, poolProxy{URL: types.StringValue(p.URL), NoProxy: list})
	return v
}

// proxyFieldValidator checks one field of the proxy with agent/config's
// rule: field is the configuration's name (url, noProxy).
type proxyFieldValidator struct{ field string }

func (v proxyFieldValidator) Description(context.Context) string {
	if v.field == "url" {
		return config.ProxyURLRule
	}
	return config.NoProxyRule
}

func (v proxyFieldValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (v proxyFieldValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	p := config.Proxy{URL: "http://proxy"}
	if v.field == "url" {
		p.URL = req.ConfigValue.ValueString()
	} else {
		p.NoProxy = []string{req.ConfigValue.ValueString()}
	}
	if e, ok := fielderr.From(p.Validate(), fielderr.Operator); ok {
		// The path in the text too: terraform shows a nested attribute's
		// diagnostic at the resource, naming no attribute.
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid proxy setting", req.Path.String()+": "+e.Rule)
	}
}
