package provider

import (
	"context"
	"fmt"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

var (
	_ resource.Resource                = &invokerRoleResource{}
	_ resource.ResourceWithConfigure   = &invokerRoleResource{}
	_ resource.ResourceWithImportState = &invokerRoleResource{}
)

func newInvokerRoleResource() resource.Resource { return &invokerRoleResource{} }

// invokerRoleResource is ghrunner_invoker_role: the role GitHub Actions
// workflows of the listed repositories assume (aws-actions/configure-aws-
// credentials with role-to-assume) to call provision and release, and
// optionally the account's GitHub OIDC identity provider. Without it every
// team writes the trust policy by hand, and the usual hand-written one
// admits every repository of the organization (repo:org/*) or every
// audience.
type invokerRoleResource struct{ configured }

type invokerRoleModel struct {
	ID             types.String `tfsdk:"id"`
	Name           types.String `tfsdk:"name"`
	Repositories   types.Set    `tfsdk:"repositories"`
	FunctionARNs   types.Set    `tfsdk:"function_arns"`
	Issuer         types.String `tfsdk:"oidc_issuer"`
	CreateProvider types.Bool   `tfsdk:"create_oidc_provider"`
	Tags           types.Map    `tfsdk:"tags"`
	ARN            types.String `tfsdk:"arn"`
	RoleName       types.String `tfsdk:"role_name"`
	ProviderARN    types.String `tfsdk:"oidc_provider_arn"`
	MadeProvider   types.Bool   `tfsdk:"oidc_provider_created"`
}

// invokerPolicyName is the role's one inline policy; tagInvoker its owner tag.
const (
	invokerPolicyName = "invoke-provision-and-release"
	tagInvoker        = "ghr:invoker"
)

var (
	invokerNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
	repositoryRE  = regexp.MustCompile(`^[A-Za-z0-9-]{1,39}/[A-Za-z0-9_.-]{1,100}$`)
	issuerRE      = regexp.MustCompile(`^[a-z0-9.-]+(:\d+)?(/[A-Za-z0-9_.-]+)*$`)
)

func (r *invokerRoleResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_invoker_role"
}

func (r *invokerRoleResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "The IAM role that GitHub Actions workflows of the listed repositories, and no others, assume through GitHub's OIDC tokens to invoke " +
			"the listed functions (provision and release), and nothing else; optionally the account's GitHub OIDC identity provider as well.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The role name.", PlanModifiers: keep},
			"name": schema.StringAttribute{Required: true, Description: "Short name; the role is ghr-<environment>-<region>-invoke-<name>.", PlanModifiers: replace,
				Validators: []validator.String{stringvalidator.RegexMatches(invokerNameRE, "must be 1-32 letters, digits, '-' or '_'")}},
			"repositories": schema.SetAttribute{Required: true, ElementType: types.StringType,
				Description: "Repositories (owner/name) whose workflows may assume the role: any workflow, branch or environment of each, and nothing else.",
				Validators: []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(stringvalidator.RegexMatches(repositoryRE,
					"must be owner/name, e.g. octo-org/app (no wildcards: list each repository)"))}},
			"function_arns": schema.SetAttribute{Required: true, ElementType: types.StringType,
				Description: "The functions the role may invoke: the provision and release functions' ARNs.",
				Validators: []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(stringvalidator.RegexMatches(scheduleFunctionARNRE,
					"must be a Lambda function ARN such as arn:aws:lambda:us-east-1:123456789012:function:ghrunner-provision"))}},
			"oidc_issuer": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(githubIssuer), PlanModifiers: replace,
				Description: "Host (and path) of the Actions token issuer: token.actions.githubusercontent.com for github.com, <host>/_services/token for GitHub Enterprise Server.",
				Validators:  []validator.String{stringvalidator.RegexMatches(issuerRE, "must be a host name and optional path without https://, e.g. token.actions.githubusercontent.com")}},
			"create_oidc_provider": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Create the account's IAM OIDC identity provider for the issuer when it does not exist. One that exists is used as it is and never deleted."},
			"tags":                  schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Tags of the role, added to the provider's default_tags and ghr:environment."},
			"arn":                   schema.StringAttribute{Computed: true, Description: "Role ARN: the role-to-assume of ghrunner's action (action/ of this repository), which assumes it with the job's OIDC token.", PlanModifiers: keep},
			"role_name":             schema.StringAttribute{Computed: true, Description: "Role name.", PlanModifiers: keep},
			"oidc_provider_arn":     schema.StringAttribute{Computed: true, Description: "ARN of the OIDC identity provider the role trusts.", PlanModifiers: keep},
			"oidc_provider_created": schema.BoolAttribute{Computed: true, Description: "Whether this resource created the OIDC provider (and so deletes it on destroy)."},
		},
	}
}

func (r *invokerRoleResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan invokerRoleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.MadeProvider = types.BoolValue(false)
	resp.Diagnostics.Append(r.apply(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		if plan.MadeProvider.ValueBool() { // keep what exists, so destroy finds it
			plan.ID, plan.ARN, plan.RoleName = types.StringValue(""), types.StringValue(""), types.StringValue("")
			resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		}
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *invokerRoleResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st invokerRoleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	found, err := r.read(ctx, &st)
	if err != nil {
		resp.Diagnostics.AddError("Reading the invoker role failed", err.Error())
		return
	}
	if !found {
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *invokerRoleResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, prior invokerRoleModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.MadeProvider = prior.MadeProvider
	resp.Diagnostics.Append(r.apply(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete removes the role, then the OIDC provider if this resource made it.
func (r *invokerRoleResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st invokerRoleModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if name := st.RoleName.ValueString(); name != "" {
		if err := deleteRole(ctx, admin.IAM(r.c.aws), name, invokerPolicyName); err != nil {
			resp.Diagnostics.AddError("Deleting the invoker role failed", err.Error())
			return
		}
	}
	if st.MadeProvider.ValueBool() {
		_, err := admin.IAM(r.c.aws).DeleteOpenIDConnectProvider(ctx, &iam.DeleteOpenIDConnectProviderInput{OpenIDConnectProviderArn: aws.String(st.ProviderARN.ValueString())})
		if awserr.IgnoreNotFound(err) != nil {
			resp.Diagnostics.AddError("Deleting the OIDC provider failed", err.Error())
		}
	}
}

// ImportState takes the short name; create_oidc_provider and
// oidc_provider_created come back false (an imported resource never deletes
// the OIDC provider).
func (r *invokerRoleResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if !invokerNameRE.MatchString(req.ID) {
		resp.Diagnostics.AddError("Invalid import id", fmt.Sprintf("%q: use the short name given as name, e.g. ci", req.ID))
		return
	}
	m := invokerRoleModel{Name: types.StringValue(req.ID), Issuer: types.StringValue(githubIssuer), CreateProvider: types.BoolValue(false),
		MadeProvider: types.BoolValue(false), Tags: types.MapNull(types.StringType)}
	found, err := r.read(ctx, &m)
	if err != nil || !found {
		resp.Diagnostics.AddError("Importing the invoker role failed", fmt.Sprintf("no invoker role %s (%v)", r.c.roleName("invoke-", req.ID), err))
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// apply makes the OIDC provider (when asked and missing) and the role match
// plan; every step is idempotent.
func (r *invokerRoleResource) apply(ctx context.Context, plan *invokerRoleModel) diag.Diagnostics {
	var diags diag.Diagnostics
	partition, account, err := r.c.caller(ctx)
	if err != nil {
		diags.AddError("Finding the account failed", err.Error())
		return diags
	}
	issuer := plan.Issuer.ValueString()
	providerARN := oidcProviderARN(partition, account, issuer)
	plan.ProviderARN = types.StringValue(providerARN)
	if plan.CreateProvider.ValueBool() {
		made, err := r.ensureOIDCProvider(ctx, providerARN, issuer)
		if err != nil {
			diags.AddError("Creating the OIDC provider failed", err.Error())
			return diags
		}
		plan.MadeProvider = types.BoolValue(plan.MadeProvider.ValueBool() || made)
	}
	var repos, functions []string
	diags.Append(plan.Repositories.ElementsAs(ctx, &repos, false)...)
	diags.Append(plan.FunctionARNs.ElementsAs(ctx, &functions, false)...)
	tags, d := r.c.resourceTags(ctx, plan.Tags)
	diags.Append(d...)
	if diags.HasError() {
		return diags
	}
	tags[tagInvoker] = plan.Name.ValueString()
	name := r.c.roleName("invoke-", plan.Name.ValueString())
	role, err := r.c.ensureRole(ctx, "", roleSpec{
		name: name, kind: "invoker", trust: invokerTrustPolicy(partition, account, issuer, repos),
		description: "GitHub Actions workflows of the listed repositories invoke ghrunner's provision and release",
		policyName:  invokerPolicyName, policy: invokerPolicy(functions), tags: tags,
	})
	if err != nil {
		diags.AddAttributeError(path.Root("name"), "Creating the invoker role failed", err.Error())
		return diags
	}
	plan.ID, plan.RoleName, plan.ARN = types.StringValue(name), types.StringValue(name), types.StringValue(role.arn)
	return diags
}

// ensureOIDCProvider creates the account's OIDC provider for issuer unless
// it exists; made says whether it did.
func (r *invokerRoleResource) ensureOIDCProvider(ctx context.Context, arn, issuer string) (made bool, err error) {
	svc := admin.IAM(r.c.aws)
	_, err = svc.GetOpenIDConnectProvider(ctx, &iam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: aws.String(arn)})
	if err == nil {
		return false, nil
	}
	if !awserr.IsNotFound(err) {
		return false, err
	}
	// No thumbprint: IAM trusts the issuer's certificate through its own
	// root CAs for GitHub's issuer, and the field is optional.
	_, err = svc.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String("https://" + issuer),
		ClientIDList: []string{"sts.amazonaws.com"}, Tags: iamTags(r.c.tags(nil))})
	if awserr.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

// read fills m from the role; found is false when it is gone.
func (r *invokerRoleResource) read(ctx context.Context, m *invokerRoleModel) (bool, error) {
	name := r.c.roleName("invoke-", m.Name.ValueString())
	svc := admin.IAM(r.c.aws)
	role, err := svc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if awserr.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	pol, err := svc.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(invokerPolicyName)})
	if err != nil && !awserr.IsNotFound(err) {
		return false, err
	}
	m.ID, m.RoleName, m.ARN = types.StringValue(name), types.StringValue(name), types.StringValue(aws.ToString(role.Role.Arn))
	repos, functions, provider, ok := invokerGrants(aws.ToString(role.Role.AssumeRolePolicyDocument), policyText(pol), m.Issuer.ValueString())
	if !ok {
		// Changed outside Terraform into something else: plan a rewrite.
		repos, functions = []string{}, []string{}
	}
	m.Repositories, _ = types.SetValueFrom(ctx, types.StringType, repos)
	m.FunctionARNs, _ = types.SetValueFrom(ctx, types.StringType, functions)
	if provider != "" {
		m.ProviderARN = types.StringValue(provider) // the one the role trusts
	}
	return true, nil
}

// policyText is an inline policy's document, or "" when there is none.
func policyText(out *iam.GetRolePolicyOutput) string {
	if out == nil {
		return ""
	}
	return aws.ToString(out.PolicyDocument)
}
