// Package provider is the ghrunner Terraform provider on
// terraform-plugin-framework (protocol 6).
package provider

import (
	"context"
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
)

// New returns the provider factory for providerserver.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &ghrunnerProvider{version: version} }
}

type ghrunnerProvider struct{ version string }

type providerModel struct {
	Region      types.String    `tfsdk:"region"`
	Profile     types.String    `tfsdk:"profile"`
	Environment types.String    `tfsdk:"environment"`
	DefaultTags types.Map       `tfsdk:"default_tags"`
	RolePath    types.String    `tfsdk:"iam_role_path"`
	Boundary    types.String    `tfsdk:"iam_permissions_boundary"`
	Endpoints   []endpointModel `tfsdk:"endpoints"`
}

type endpointModel struct {
	CloudWatch  types.String `tfsdk:"cloudwatch"`
	DynamoDB    types.String `tfsdk:"dynamodb"`
	EC2         types.String `tfsdk:"ec2"`
	ECR         types.String `tfsdk:"ecr"`
	ECRRegistry types.String `tfsdk:"ecr_registry"`
	ECS         types.String `tfsdk:"ecs"`
	IAM         types.String `tfsdk:"iam"`
	Lambda      types.String `tfsdk:"lambda"`
	Logs        types.String `tfsdk:"logs"`
	Pricing     types.String `tfsdk:"pricing"`
	S3          types.String `tfsdk:"s3"`
	Scheduler   types.String `tfsdk:"scheduler"`
	SNS         types.String `tfsdk:"sns"`
	SQS         types.String `tfsdk:"sqs"`
	SSM         types.String `tfsdk:"ssm"`
	STS         types.String `tfsdk:"sts"`
}

func (e endpointModel) byService() map[string]types.String {
	return map[string]types.String{"cloudwatch": e.CloudWatch, "dynamodb": e.DynamoDB, "ec2": e.EC2, "ecr": e.ECR, "ecs": e.ECS, "iam": e.IAM, "lambda": e.Lambda, "logs": e.Logs,
		"pricing": e.Pricing, "s3": e.S3, "scheduler": e.Scheduler, "sns": e.SNS, "sqs": e.SQS, "ssm": e.SSM, "sts": e.STS}
}

// clients is what Configure hands to the resources.
type clients struct {
	aws         awsconf.Config
	environment string
	defaultTags map[string]string
	// rolePath ("/" unless set) and boundary (none unless set) are given to
	// every role and instance profile the provider makes.
	rolePath, boundary string
	// ecrRegistry is the endpoints block's ecr_registry: where the
	// listener's image is pushed instead of its repository's host.
	ecrRegistry string
}

// configured is embedded in every resource: it holds the provider's clients,
// and its Configure is the resources' one.
type configured struct{ c *clients }

// Configure takes the clients the provider's Configure made. Terraform also
// calls it before the provider is configured (validation, an early plan),
// with no data: the resource then has no clients and must not need them.
func (r *configured) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	var ok bool
	if r.c, ok = clientsOf(req.ProviderData); !ok {
		resp.Diagnostics.AddError("Unexpected provider data", fmt.Sprintf("A ghrunner resource expects the ghrunner provider's *clients, got %T. "+
			"This is a bug in the provider: please report it.", req.ProviderData))
	}
}

// clientsOf is what a resource's or data source's Configure takes from the
// provider: nil (and ok) before the provider is configured, false for what
// is not the provider's clients.
func clientsOf(data any) (*clients, bool) {
	if data == nil {
		return nil, true
	}
	c, ok := data.(*clients)
	return c, ok
}

var environmentRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,30}$`)

// rolePathRE is IAM's path rule, narrowed to characters that are literal in
// the ARN patterns of the policies (no * or ?), and its 512-character bound.
var rolePathRE = regexp.MustCompile(`^/([A-Za-z0-9_+=,.@-]+/){0,100}$`)

// registryHostRE is a registry's host and optional port.
var registryHostRE = regexp.MustCompile(`^[A-Za-z0-9.-]+(:[0-9]{1,5})?$`)

var boundaryRE = regexp.MustCompile(`^arn:aws[a-z-]*:iam::(\d{12}|aws):policy/[A-Za-z0-9_+=,.@/-]+$`)

func (p *ghrunnerProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "ghrunner"
	resp.Version = p.version
}

func (p *ghrunnerProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	endpoints := map[string]schema.Attribute{}
	for _, svc := range awsconf.Services {
		endpoints[svc] = schema.StringAttribute{Optional: true, Description: "Endpoint URL for " + svc + " (an emulator, the sandbox or a VPC endpoint)."}
	}
	endpoints["ecr_registry"] = schema.StringAttribute{Optional: true,
		Description: "Registry (host[:port]) that `ghrunner_listener` pushes its image to instead of the host of the repository's `repositoryUri`, for an emulator whose repositories name a registry it does not serve. " +
			"The task definition still names the image as `repositoryUri@digest`. Unset (AWS), the image goes to the repository's `repositoryUri` as ECR returns it.",
		Validators: []validator.String{stringvalidator.RegexMatches(registryHostRE, "must be a registry host such as 127.0.0.1:5000 (no scheme, no path)")}}
	resp.Schema = schema.Schema{
		Description: "Provisions, pools and reuses self-hosted EC2 runners for GitHub Actions.",
		Attributes: map[string]schema.Attribute{
			"region":  schema.StringAttribute{Optional: true, Description: "AWS region; defaults to the environment (AWS_REGION) or profile."},
			"profile": schema.StringAttribute{Optional: true, Description: "Shared config profile to take credentials from."},
			"environment": schema.StringAttribute{Required: true,
				Description: "Name of the deployment: it scopes and tags (ghr:environment) everything the provider creates.",
				Validators:  []validator.String{stringvalidator.RegexMatches(environmentRE, "must be 1-31 lowercase letters, digits and '-', starting with a letter or digit")}},
			"default_tags": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: tagValidators(), Description: "Tags added to every object the provider creates (keys of 1-128 and values of up to 256 letters, digits, spaces or `_ . : / = + - @`, no `aws:` prefix)."},
			"iam_role_path": schema.StringAttribute{Optional: true,
				Description: "Path of every IAM role and instance profile the provider makes (default `/`), for organizations whose policies allow creating roles only under a path. A role's path cannot change: changing it on a deployment fails until its roles are deleted.",
				Validators:  []validator.String{stringvalidator.RegexMatches(rolePathRE, "must be / or /segment/…/ made of letters, digits and _+=,.@-, at most 512 characters")}},
			"iam_permissions_boundary": schema.StringAttribute{Optional: true,
				Description: "ARN of a managed policy set as the permissions boundary of every IAM role the provider makes, for organizations that require one.",
				Validators:  []validator.String{stringvalidator.RegexMatches(boundaryRE, "must be the ARN of a managed policy, arn:<partition>:iam::<account or aws>:policy/<path and name>")}},
		},
		Blocks: map[string]schema.Block{
			"endpoints": schema.ListNestedBlock{
				Description:  "Per-service endpoint overrides.",
				NestedObject: schema.NestedBlockObject{Attributes: endpoints},
			},
		},
	}
}

func (p *ghrunnerProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if len(cfg.Endpoints) > 1 {
		resp.Diagnostics.AddAttributeError(path.Root("endpoints"), "Too many endpoints blocks", "Give at most one endpoints block.")
		return
	}
	opts := awsconf.FromEnv()
	if v := cfg.Region.ValueString(); v != "" {
		opts.Region = v
	}
	opts.Profile = cfg.Profile.ValueString()
	if len(cfg.Endpoints) == 1 {
		for svc, v := range cfg.Endpoints[0].byService() {
			if v.ValueString() != "" {
				if opts.Endpoints == nil {
					opts.Endpoints = map[string]string{}
				}
				opts.Endpoints[svc] = v.ValueString()
			}
		}
	}
	aws, err := awsconf.Load(ctx, opts)
	if err != nil {
		resp.Diagnostics.AddError("Invalid AWS configuration", err.Error()+". Set region (or AWS_REGION) and check the endpoints block.")
		return
	}
	c := &clients{aws: aws, environment: cfg.Environment.ValueString(), defaultTags: map[string]string{},
		rolePath: "/", boundary: cfg.Boundary.ValueString()}
	if len(cfg.Endpoints) == 1 {
		c.ecrRegistry = cfg.Endpoints[0].ECRRegistry.ValueString()
	}
	if v := cfg.RolePath.ValueString(); v != "" {
		if len(v) > 512 {
			resp.Diagnostics.AddAttributeError(path.Root("iam_role_path"), "Invalid IAM role path", "iam_role_path: at most 512 characters (IAM's limit)")
			return
		}
		c.rolePath = v
	}
	resp.Diagnostics.Append(cfg.DefaultTags.ElementsAs(ctx, &c.defaultTags, false)...)
	resp.ResourceData = c
	resp.DataSourceData = c
}

func (p *ghrunnerProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newTableResource, newQueueResource, newPoolResource, newFunctionResource, newScheduleResource, newInvokerRoleResource, newMonitoringResource, newAlarmTopicResource, newListenerResource}
}

func (p *ghrunnerProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newUserDataSource, newDeployerPolicyDataSource}
}
