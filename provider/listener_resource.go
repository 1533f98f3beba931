package provider

import (
	"context"
	"fmt"
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

var (
	_ resource.Resource                     = &listenerResource{}
	_ resource.ResourceWithConfigure        = &listenerResource{}
	_ resource.ResourceWithModifyPlan       = &listenerResource{}
	_ resource.ResourceWithImportState      = &listenerResource{}
	_ resource.ResourceWithConfigValidators = &listenerResource{}
)

func newListenerResource() resource.Resource { return &listenerResource{} }

// listenerResource is ghrunner_listener: the scale-set listener (the
// bundle's bootstrap run with GHRUNNER_HANDLER=listener) as one ECS service
// on Fargate per deployment, with its image in its own ECR repository, its
// task and execution roles, its log group and, unless one is given, its
// cluster. The parts are made in listener_parts.go and read back in
// listener_read.go.
type listenerResource struct{ configured }

type listenerModel struct {
	ID                types.String `tfsdk:"id"`
	Environment       types.String `tfsdk:"environment"`
	Table             types.String `tfsdk:"table"`
	GitHubParameter   types.String `tfsdk:"github_parameter"`
	QueueARNs         types.List   `tfsdk:"queue_arns"`
	VolumeKMSKeyARNs  types.Set    `tfsdk:"volume_kms_key_arns"`
	Architecture      types.String `tfsdk:"architecture"`
	SubnetIDs         types.Set    `tfsdk:"subnet_ids"`
	SecurityGroupIDs  types.Set    `tfsdk:"security_group_ids"`
	AssignPublicIP    types.Bool   `tfsdk:"assign_public_ip"`
	CPU               types.Int64  `tfsdk:"cpu"`
	Memory            types.Int64  `tfsdk:"memory"`
	LogRetentionDays  types.Int64  `tfsdk:"log_retention_days"`
	LogLevel          types.String `tfsdk:"log_level"`
	ImageURI          types.String `tfsdk:"image_uri"`
	ClusterARN        types.String `tfsdk:"cluster_arn"`
	Tags              types.Map    `tfsdk:"tags"`
	Cluster           types.String `tfsdk:"cluster"`
	RepositoryURL     types.String `tfsdk:"repository_url"`
	ImageDigest       types.String `tfsdk:"image_digest"`
	Image             types.String `tfsdk:"image"`
	TaskDefinitionARN types.String `tfsdk:"task_definition_arn"`
	ServiceARN        types.String `tfsdk:"service_arn"`
	TaskRoleName      types.String `tfsdk:"task_role_name"`
	ExecutionRoleName types.String `tfsdk:"execution_role_name"`
	LogGroup          types.String `tfsdk:"log_group"`
}

var (
	// imageURIRE is an image reference by tag or digest.
	imageURIRE   = regexp.MustCompile(`^[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9_.-]{1,128}|@sha256:[0-9a-f]{64})$`)
	clusterARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:ecs:[a-z0-9-]+:[0-9]{12}:cluster/[A-Za-z0-9_-]{1,255}$`)
)

func (r *listenerResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_listener"
}

func (r *listenerResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	ids := func(re *regexp.Regexp, what string) []validator.Set {
		return []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.ValueStringsAre(stringvalidator.RegexMatches(re, "must be "+what))}
	}
	resp.Schema = schema.Schema{
		Description: "The scale-set listener of a deployment: the bundle's `bootstrap` run as a long-lived process (GHRUNNER_HANDLER=listener) that serves every pool with a `scale_set`. " +
			"It runs as one ECS service on Fargate (one task at a time), from an image the provider builds out of the embedded bundle and pushes, by digest, to the repository `ghr-<environment>-listener`. " +
			"A provider release with a new bundle shows as a change of `image_digest`: the apply pushes the image and starts a new task definition revision.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The environment.", PlanModifiers: keep},
			"environment": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace(), stringplanmodifier.UseStateForUnknown()},
				Description: "The provider's environment (the default); any other value is refused. It names every part: one listener per deployment.",
				Validators:  []validator.String{stringvalidator.RegexMatches(environmentRE, "must be 1-31 lowercase letters, digits and '-', starting with a letter or digit")}},
			"table": schema.StringAttribute{Required: true, Description: "Name of the state table (`ghrunner_table.name`).",
				Validators: []validator.String{stringvalidator.RegexMatches(tableNameRE, "must be 3-255 characters of A-Z a-z 0-9 _ . - (ghrunner_table.name)")}},
			"github_parameter": schema.StringAttribute{Required: true,
				Description: "Name of the SSM SecureString parameter with the GitHub App's credentials (`{\"appId\",\"privateKey\"}`): scale sets need an App.",
				Validators: []validator.String{stringvalidator.LengthAtMost(1011),
					stringvalidator.RegexMatches(ssmParameterRE, "must be an SSM parameter name such as /ghrunner/github (letters, digits, _ . - /)")}},
			"queue_arns": schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "ARNs of the pool queues (every `ghrunner_queue.arn`), as for the provision function.",
				Validators: []validator.List{listvalidator.ValueStringsAre(stringvalidator.RegexMatches(regexp.MustCompile(`^arn:[a-z-]+:sqs:`), "must be an SQS queue ARN"))}},
			"volume_kms_key_arns": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				Description: "KMS keys the pools encrypt their root volumes with: the listener launches as provision does.",
				Validators:  []validator.Set{setvalidator.ValueStringsAre(stringvalidator.RegexMatches(kmsKeyARNRE, "must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)"))}},
			"architecture": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("arm64"),
				Description: "`arm64` (default, cheaper on Fargate) or `amd64`: the bundle and the task's CPU architecture.", Validators: []validator.String{stringvalidator.OneOf(bundle.Architectures...)}},
			"subnet_ids": schema.SetAttribute{Required: true, ElementType: types.StringType,
				Description: "Subnets of the task. They need a route to GitHub and to the AWS APIs (and to ECR and CloudWatch Logs to start): a NAT gateway, or public subnets with `assign_public_ip`.",
				Validators:  ids(subnetRE, "a subnet id such as subnet-0123456789abcdef0")},
			"security_group_ids": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				Description: "Security groups of the task (the VPC's default group when unset). The listener only makes outbound connections.",
				Validators:  ids(sgRE, "a security group id such as sg-0123456789abcdef0")},
			"assign_public_ip": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Give the task a public IP (public subnets without NAT). Default false."},
			"cpu": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(256),
				Description: "Fargate task CPU units: 256 (default), 512, 1024, 2048, 4096, 8192 or 16384; `memory` must be one of the sizes Fargate allows with it.",
				Validators:  []validator.Int64{int64validator.OneOf(fargateCPUs()...)}},
			"memory": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(512),
				Description: "Fargate task memory in MiB (default 512), one of the sizes Fargate allows with `cpu`: " + fargateTable() + "."},
			"log_retention_days": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(30),
				Description: "Retention of the log group /ghrunner/<environment>/listener. Default 30.", Validators: []validator.Int64{int64validator.OneOf(logRetentions...)}},
			"log_level": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("info"),
				Description: "`debug`, `info`, `warn` or `error`. Default info.", Validators: []validator.String{stringvalidator.OneOf("debug", "info", "warn", "error")}},
			"image_uri": schema.StringAttribute{Optional: true,
				Description: "An image to run instead of the one the provider builds (then no repository is made and nothing is pushed; its pull permissions are yours to grant). Best by digest (`…@sha256:…`).",
				Validators:  []validator.String{stringvalidator.RegexMatches(imageURIRE, "must be an image reference, registry/repository:tag or registry/repository@sha256:<64 hex>")}},
			"cluster_arn": schema.StringAttribute{Optional: true,
				Description: "An ECS cluster to run in; unset, the provider makes (and on destroy deletes) the cluster `ghr-<environment>`.",
				Validators:  []validator.String{stringvalidator.RegexMatches(clusterARNRE, "must be an ECS cluster ARN (arn:aws:ecs:REGION:ACCOUNT:cluster/NAME)")}},
			"tags":                schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: tagValidators(), Description: "Tags of every part."},
			"cluster":             schema.StringAttribute{Computed: true, Description: "ARN of the cluster the service runs in.", PlanModifiers: keep},
			"repository_url":      schema.StringAttribute{Computed: true, Description: "The repository's `repositoryUri` (empty with `image_uri`).", PlanModifiers: keep},
			"image_digest":        schema.StringAttribute{Computed: true, Description: "Digest of the image the embedded bundle makes for `architecture` (of `image_uri` when it names one)."},
			"image":               schema.StringAttribute{Computed: true, Description: "The image the task definition names: `<repository_url>@<image_digest>`, or `image_uri`.", PlanModifiers: keep},
			"task_definition_arn": schema.StringAttribute{Computed: true, Description: "ARN (with revision) of the task definition the service runs.", PlanModifiers: keep},
			"service_arn":         schema.StringAttribute{Computed: true, Description: "ARN of the ECS service `ghr-<environment>-listener`.", PlanModifiers: keep},
			"task_role_name":      schema.StringAttribute{Computed: true, Description: "The task's role (what the listener calls AWS with).", PlanModifiers: keep},
			"execution_role_name": schema.StringAttribute{Computed: true, Description: "The execution role (what ECS pulls the image and writes the logs with).", PlanModifiers: keep},
			"log_group":           schema.StringAttribute{Computed: true, Description: "/ghrunner/<environment>/listener.", PlanModifiers: keep},
		},
	}
}

// ConfigValidators checks memory against cpu (Fargate's table).
func (r *listenerResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{fargateSizeValidator{}}
}

// ModifyPlan checks the environment, shows the image the apply will run
// and marks what the apply makes again or anew: a task definition revision
// when a setting it holds changed, the parts that vanished (listener_read.go).
func (r *listenerResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() || r.c == nil {
		return
	}
	var plan listenerModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.Environment.IsUnknown() {
		plan.Environment = types.StringValue(r.c.environment)
	}
	if env := plan.Environment.ValueString(); env != r.c.environment {
		resp.Diagnostics.AddAttributeError(path.Root("environment"), "Not the provider's environment",
			fmt.Sprintf("environment: %q must be the provider's environment %q (or be left unset): every part of the listener is named and scoped by it", env, r.c.environment))
		return
	}
	plan.ID, plan.LogGroup = plan.Environment, types.StringValue(listenerLogGroup(r.c.environment))
	if plan.Architecture.IsUnknown() || plan.ImageURI.IsUnknown() {
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	digest, err := r.plannedDigest(plan)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("architecture"), "The listener image cannot be built", err.Error())
		return
	}
	plan.ImageDigest = types.StringValue(digest)
	if req.State.Raw.IsNull() {
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	var prior listenerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	unknownIfEmpty := func(planned *types.String, had types.String) {
		if had.ValueString() == "" {
			*planned = types.StringUnknown()
		}
	}
	unknownIfEmpty(&plan.ServiceARN, prior.ServiceARN)
	unknownIfEmpty(&plan.TaskRoleName, prior.TaskRoleName)
	unknownIfEmpty(&plan.ExecutionRoleName, prior.ExecutionRoleName)
	unknownIfEmpty(&plan.Cluster, prior.Cluster)
	if !plan.ClusterARN.Equal(prior.ClusterARN) {
		plan.Cluster = types.StringUnknown()
	}
	if plan.ImageURI.IsNull() {
		unknownIfEmpty(&plan.RepositoryURL, prior.RepositoryURL)
	} else {
		plan.RepositoryURL = types.StringValue("")
	}
	if !plan.ImageDigest.Equal(prior.ImageDigest) || !plan.ImageURI.Equal(prior.ImageURI) || plan.RepositoryURL.IsUnknown() {
		plan.Image = types.StringUnknown()
	}
	if prior.TaskDefinitionARN.ValueString() == "" || plan.Image.IsUnknown() || taskSettingsChanged(plan, prior) {
		plan.TaskDefinitionARN = types.StringUnknown()
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// taskSettingsChanged says whether a setting the task definition holds
// differs: a new revision then.
func taskSettingsChanged(plan, prior listenerModel) bool {
	return !plan.Table.Equal(prior.Table) || !plan.GitHubParameter.Equal(prior.GitHubParameter) || !plan.Architecture.Equal(prior.Architecture) ||
		!plan.CPU.Equal(prior.CPU) || !plan.Memory.Equal(prior.Memory) || !plan.LogLevel.Equal(prior.LogLevel) ||
		prior.TaskRoleName.ValueString() == "" || prior.ExecutionRoleName.ValueString() == ""
}

func (r *listenerResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan listenerModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.TaskDefinitionARN = types.StringUnknown()
	resp.Diagnostics.Append(r.apply(ctx, &plan, nil, resp.State.Set)...)
}

func (r *listenerResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st listenerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	found, err := r.read(ctx, &st)
	if err != nil {
		resp.Diagnostics.AddError("Reading the listener failed", err.Error())
		return
	}
	if !found {
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *listenerResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, prior listenerModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(r.apply(ctx, &plan, &prior, resp.State.Set)...)
}

func (r *listenerResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st listenerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.destroy(ctx, st); err != nil {
		resp.Diagnostics.AddError("Deleting the listener failed", err.Error())
	}
}

// ImportState takes the environment, which names every part.
func (r *listenerResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if !environmentRE.MatchString(req.ID) {
		resp.Diagnostics.AddError("Invalid import id", fmt.Sprintf("%q: use the deployment's environment, e.g. prod", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("environment"), req.ID)...)
}

// listenerLogGroup is where the listener's task writes.
func listenerLogGroup(environment string) string { return "/ghrunner/" + environment + "/listener" }

// listenerName names the repository, the task definition family and the
// service; the cluster the provider makes is ghr-<environment>.
func listenerName(environment string) string { return "ghr-" + environment + "-listener" }
