package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
)

// The OIDC settings of ghrunner_function: whose tokens provision and
// release accept from the invoking job (a run is bound to the repository
// and workflow run of that job's token). The bundle reads them from
// GHRUNNER_OIDC_ISSUER and GHRUNNER_OIDC_AUDIENCE.

func oidcAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"oidc_issuer": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(idtoken.GitHubIssuer),
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			Description: "Issuer of the GitHub Actions OIDC tokens that provision and release require of the invoking job (payload field `idToken`). " +
				"Default `" + idtoken.GitHubIssuer + "` (github.com); GitHub Enterprise Server: `https://HOSTNAME/_services/token`. " +
				"The function reads the issuer's keys from its discovery document; it never trusts a key location named by a token.",
			Validators: []validator.String{oidcValidator{"issuer", idtoken.CheckIssuer}}},
		"oidc_audience": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(idtoken.DefaultAudience),
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			Description: "Audience the invoking job's token must carry (the job requests it with this audience). Default `" + idtoken.DefaultAudience + "`; " +
				"keep it different from `sts.amazonaws.com`, so a token minted for AWS is not accepted here.",
			Validators: []validator.String{oidcValidator{"audience", idtoken.CheckAudience}}},
	}
}

// oidcValidator applies idtoken's rule for an issuer or an audience at plan
// time, so a typo fails the plan rather than every workflow.
type oidcValidator struct {
	what  string
	check func(string) error
}

func (v oidcValidator) Description(context.Context) string {
	if v.what == "issuer" {
		return "must be an https URL without trailing slash, such as " + idtoken.GitHubIssuer
	}
	return "must be 1-128 characters without spaces, commas or quotes"
}

func (v oidcValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v oidcValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if err := v.check(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid OIDC "+v.what, err.Error())
	}
}
