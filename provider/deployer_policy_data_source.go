package provider

import (
	"context"
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var (
	_ datasource.DataSource              = &deployerPolicyDataSource{}
	_ datasource.DataSourceWithConfigure = &deployerPolicyDataSource{}
)

func newDeployerPolicyDataSource() datasource.DataSource { return &deployerPolicyDataSource{} }

// deployerPolicyDataSource is data ghrunner_deployer_policy: the IAM policy
// the identity that applies and destroys a deployment needs (deployerPolicy),
// for the provider's environment, region, role path and boundary, and the
// account its credentials are of.
type deployerPolicyDataSource struct{ c *clients }

type deployerPolicyModel struct {
	NamePrefix types.String `tfsdk:"name_prefix"`
	AccountID  types.String `tfsdk:"account_id"`
	JSON       types.String `tfsdk:"json"`
	Documents  types.List   `tfsdk:"documents"`
}

// namePrefixRE is what the module's prefix may be: it begins the names of
// tables, queues, functions and schedules.
var namePrefixRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$`)

func (d *deployerPolicyDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_deployer_policy"
}

func (d *deployerPolicyDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The least-privilege IAM policy of the identity that runs `terraform apply` and `destroy` of a deployment (modules/runner-pool with this provider configuration): " +
			"every call the provider's resources make, limited to the deployment's names and its ghr:environment tag. " +
			"With iam_permissions_boundary set, it lets the deployer make roles only with that boundary.",
		Attributes: map[string]schema.Attribute{
			"name_prefix": schema.StringAttribute{Optional: true,
				Description: "The module's `prefix` (default `ghrunner`): the table, queues, functions, log groups and schedules are named `<prefix>-…`.",
				Validators:  []validator.String{stringvalidator.RegexMatches(namePrefixRE, "must be 1-40 letters, digits, '-' or '_', starting with a letter or digit")}},
			"account_id": schema.StringAttribute{Computed: true, Description: "The account of the provider's credentials, which the policy names."},
			"json":       schema.StringAttribute{Computed: true, Description: "The policy document, whole: over the 6,144 characters of one customer managed policy, within the 10,240 of a role's inline policies."},
			"documents": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				Description: "The same policy cut into documents of whole statements, each within IAM's 6,144 characters of a customer managed policy: attach one `aws_iam_policy` per document (together they allow exactly what `json` allows)."},
		},
	}
}

func (d *deployerPolicyDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	var ok bool
	if d.c, ok = clientsOf(req.ProviderData); !ok {
		resp.Diagnostics.AddError("Unexpected provider data", fmt.Sprintf("A ghrunner data source expects the ghrunner provider's *clients, got %T. "+
			"This is a bug in the provider: please report it.", req.ProviderData))
	}
}

func (d *deployerPolicyDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m deployerPolicyModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	prefix := "ghrunner"
	if v := m.NamePrefix.ValueString(); v != "" {
		prefix = v
	}
	partition, account, err := d.c.caller(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Finding the account failed", err.Error())
		return
	}
	m.NamePrefix = types.StringValue(prefix)
	m.AccountID = types.StringValue(account)
	doc := deployerPolicy(deployment{partition: partition, account: account, region: d.c.aws.AWS.Region,
		environment: d.c.environment, namePrefix: prefix, rolePath: d.c.rolePath, boundary: d.c.boundary})
	m.JSON = types.StringValue(doc)
	parts, err := splitPolicy(doc, managedPolicyLimit)
	if err != nil {
		resp.Diagnostics.AddError("Cutting the deployer policy failed", err.Error()+". This is a bug in the provider: please report it.")
		return
	}
	var diags diag.Diagnostics
	m.Documents, diags = types.ListValueFrom(ctx, types.StringType, parts)
	resp.Diagnostics.Append(diags...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
