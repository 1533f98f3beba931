package provider

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/setvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

var (
	_ resource.Resource                = &functionResource{}
	_ resource.ResourceWithConfigure   = &functionResource{}
	_ resource.ResourceWithModifyPlan  = &functionResource{}
	_ resource.ResourceWithImportState = &functionResource{}
)

func newFunctionResource() resource.Resource { return &functionResource{} }

// functionResource is ghrunner_function: one handler of the Lambda bundle the
// provider embeds, with its own role, least-privilege policy (policy.go) and
// log group.
type functionResource struct{ configured }

type functionModel struct {
	ID                  types.String `tfsdk:"id"`
	Name                types.String `tfsdk:"name"`
	Handler             types.String `tfsdk:"handler"`
	Table               types.String `tfsdk:"table"`
	GitHubParameter     types.String `tfsdk:"github_parameter"`
	QueueARNs           types.List   `tfsdk:"queue_arns"`
	VolumeKMSKeyARNs    types.Set    `tfsdk:"volume_kms_key_arns"`
	Architecture        types.String `tfsdk:"architecture"`
	Timeout             types.Int64  `tfsdk:"timeout"`
	MemorySize          types.Int64  `tfsdk:"memory_size"`
	ReservedConcurrency types.Int64  `tfsdk:"reserved_concurrency"`
	LogRetentionDays    types.Int64  `tfsdk:"log_retention_days"`
	LogLevel            types.String `tfsdk:"log_level"`
	OnFailureTopic      types.String `tfsdk:"on_failure_topic_arn"`
	VPCSubnetIDs        types.Set    `tfsdk:"vpc_subnet_ids"`
	VPCSecurityGroupIDs types.Set    `tfsdk:"vpc_security_group_ids"`
	Tags                types.Map    `tfsdk:"tags"`
	ARN                 types.String `tfsdk:"arn"`
	RoleName            types.String `tfsdk:"role_name"`
	LogGroup            types.String `tfsdk:"log_group"`
	CodeSHA256          types.String `tfsdk:"code_sha256"`
	OIDCIssuer          types.String `tfsdk:"oidc_issuer"`
	OIDCAudience        types.String `tfsdk:"oidc_audience"`
}

var (
	functionNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	ssmParameterRE = regexp.MustCompile(`^/?[A-Za-z0-9_./-]+$`)
	handlers       = bundle.Handlers
	logRetentions  = []int64{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}
)

func (r *functionResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_function"
}

func (r *functionResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "One control-plane function (provision, release, refresh, scale-down, or jit, the stream consumer of just-in-time pools): the Lambda bundle embedded in this provider, " +
			"with its own role and least-privilege policy and its log group. A provider release with a new bundle shows as an in-place update of `code_sha256`. " +
			"Asynchronous invocations (schedules) are never retried and dropped after 10 minutes; refresh and scale-down run one at a time " +
			"through a lease item in the state table, so no reserved concurrency is needed (new accounts often cannot grant any).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "The function name.", PlanModifiers: keep},
			"name": schema.StringAttribute{Required: true, Description: "Function name, e.g. `ci-provision`.", PlanModifiers: replace,
				Validators: []validator.String{stringvalidator.RegexMatches(functionNameRE, "must be 1-64 letters, digits, '-' or '_'")}},
			"handler": schema.StringAttribute{Required: true, Description: "`provision`, `release`, `refresh`, `scale-down` or `jit`.", PlanModifiers: replace,
				Validators: []validator.String{stringvalidator.OneOf(handlers...)}},
			"table": schema.StringAttribute{Required: true, Description: "Name of the state table (`ghrunner_table.name`).",
				Validators: []validator.String{stringvalidator.RegexMatches(tableNameRE, "must be 3-255 characters of A-Z a-z 0-9 _ . - (ghrunner_table.name)")}},
			"github_parameter": schema.StringAttribute{Required: true,
				Description: "Name of the SSM SecureString parameter holding the GitHub credentials as JSON (`{\"appId\",\"privateKey\"}` or `{\"token\"}`, optional `baseUrl`). Only its name reaches the function's environment.",
				Validators: []validator.String{stringvalidator.LengthAtMost(1011),
					stringvalidator.RegexMatches(ssmParameterRE, "must be an SSM parameter name such as /ghrunner/github (letters, digits, _ . - /)")}},
			"queue_arns": schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "ARNs of the pool queues the function may use (every `ghrunner_queue.arn`).",
				Validators: []validator.List{listvalidator.ValueStringsAre(stringvalidator.RegexMatches(regexp.MustCompile(`^arn:[a-z-]+:sqs:`), "must be an SQS queue ARN"))}},
			"volume_kms_key_arns": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				Description: "KMS keys the pools encrypt their root volumes with (every `ghrunner_pool.root_volume_kms_key_arn`): provision and refresh launch, and EC2 uses the key with the launching role's permissions. Other handlers ignore it.",
				Validators:  []validator.Set{setvalidator.ValueStringsAre(stringvalidator.RegexMatches(kmsKeyARNRE, "must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)"))}},
			"architecture": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("arm64"), PlanModifiers: replace,
				Description: "`arm64` (default, cheaper) or `amd64`. Changing it replaces the function.", Validators: []validator.String{stringvalidator.OneOf(bundle.Architectures...)}},
			"timeout": schema.Int64Attribute{Optional: true, Computed: true,
				Description: "Seconds (1-900). Default 900 for provision (it waits for runners to register), 300 otherwise.", Validators: []validator.Int64{int64validator.Between(1, 900)}},
			"memory_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(512),
				Description: "MB (128-10240). Default 512.", Validators: []validator.Int64{int64validator.Between(128, 10240)}},
			"reserved_concurrency": schema.Int64Attribute{Optional: true, Computed: true,
				Description: "Reserved concurrency; -1 (the default) for none. Not needed for single-flight: refresh and scale-down take a lease in the state table.",
				Validators:  []validator.Int64{int64validator.AtLeast(-1)}},
			"vpc_subnet_ids": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				Description: "Subnets to run the function in (with vpc_security_group_ids), e.g. to reach a GitHub Enterprise Server on a private network. " +
					"The subnets need a route to the AWS APIs the function calls (NAT, or VPC endpoints for DynamoDB, EC2, SQS, SSM, STS and Logs) and to GitHub.",
				Validators: []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.AlsoRequires(path.MatchRoot("vpc_security_group_ids")),
					setvalidator.ValueStringsAre(stringvalidator.RegexMatches(subnetRE, "must be a subnet id such as subnet-0123456789abcdef0"))}},
			"vpc_security_group_ids": schema.SetAttribute{Optional: true, ElementType: types.StringType,
				Description: "Security groups of the function's network interfaces (with vpc_subnet_ids).",
				Validators: []validator.Set{setvalidator.SizeAtLeast(1), setvalidator.AlsoRequires(path.MatchRoot("vpc_subnet_ids")),
					setvalidator.ValueStringsAre(stringvalidator.RegexMatches(sgRE, "must be a security group id such as sg-0123456789abcdef0"))}},
			"log_retention_days": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(30),
				Description: "Retention of the log group /aws/lambda/<name>. Default 30.", Validators: []validator.Int64{int64validator.OneOf(logRetentions...)}},
			"log_level": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("info"),
				Description: "`debug`, `info`, `warn` or `error`. Default info.", Validators: []validator.String{stringvalidator.OneOf("debug", "info", "warn", "error")}},
			"on_failure_topic_arn": schema.StringAttribute{Optional: true,
				Description: "SNS topic that gets an asynchronous invocation (a schedule's) that failed, with its error: Lambda's on-failure destination. The function's role may publish to it.",
				Validators:  []validator.String{stringvalidator.RegexMatches(snsTopicARNRE, "must be the ARN of an SNS topic (arn:aws:sns:REGION:ACCOUNT:NAME)")}},
			"tags":        schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Tags of the function, role and log group."},
			"arn":         schema.StringAttribute{Computed: true, Description: "Function ARN.", PlanModifiers: keep},
			"role_name":   schema.StringAttribute{Computed: true, Description: "Execution role name: ghr-<environment>-<region>-fn-<name> (IAM names are global; the region keeps two regions' deployments apart).", PlanModifiers: keep},
			"log_group":   schema.StringAttribute{Computed: true, Description: "Log group name.", PlanModifiers: keep},
			"code_sha256": schema.StringAttribute{Computed: true, Description: "Lambda's CodeSha256 of the deployed bundle."},
		},
	}
	for name, a := range oidcAttributes() {
		resp.Schema.Attributes[name] = a
	}
}

// ModifyPlan fills the handler-dependent defaults and shows the embedded
// bundle's hash, so a new provider version plans an update; a provider built
// without its bundle fails here, before anything is created.
func (r *functionResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan functionModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || plan.Handler.IsUnknown() || plan.Architecture.IsUnknown() {
		return
	}
	if plan.Timeout.IsUnknown() {
		plan.Timeout = types.Int64Value(300)
		if plan.Handler.ValueString() == bundle.HandlerProvision {
			plan.Timeout = types.Int64Value(900)
		}
	}
	if plan.ReservedConcurrency.IsUnknown() {
		plan.ReservedConcurrency = types.Int64Value(-1)
	}
	code, err := functionAsset(plan.Architecture.ValueString())
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("architecture"), "The provider has no Lambda bundle", err.Error())
		return
	}
	plan.CodeSHA256 = types.StringValue(code.sha256B64)
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *functionResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan functionModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := plan.Name.ValueString()
	code, err := functionAsset(plan.Architecture.ValueString())
	if err != nil {
		resp.Diagnostics.AddError("The provider has no Lambda bundle", err.Error())
		return
	}
	tags, diags := r.c.resourceTags(ctx, plan.Tags)
	resp.Diagnostics.Append(diags...)
	roleARN, d := r.ensureRole(ctx, plan, tags, nil)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.RoleName = types.StringValue(r.roleName(name))
	// The log group first: with retention set before the function's first
	// log line, Lambda never creates one that keeps logs forever.
	plan.LogGroup = types.StringValue("/aws/lambda/" + name)
	if err := r.ensureLogGroup(ctx, plan, tags); err != nil {
		resp.Diagnostics.AddError("Creating the log group failed", err.Error())
		return
	}
	in := &lambda.CreateFunctionInput{
		FunctionName: aws.String(name), Role: aws.String(roleARN), Runtime: lambdatypes.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
		Code: &lambdatypes.FunctionCode{ZipFile: code.data}, Architectures: []lambdatypes.Architecture{lambdatypes.Architecture(bundle.LambdaArchitecture(plan.Architecture.ValueString()))},
		Timeout: aws.Int32(int32(plan.Timeout.ValueInt64())), MemorySize: aws.Int32(int32(plan.MemorySize.ValueInt64())),
		Environment: &lambdatypes.Environment{Variables: r.environment(plan)}, Tags: tags,
		Description: aws.String("ghrunner " + plan.Handler.ValueString()),
		VpcConfig:   r.vpcConfig(ctx, plan),
	}
	// A new role takes a few seconds to become assumable on AWS.
	var out *lambda.CreateFunctionOutput
	err = retryWhile(ctx, 2*time.Second, 2*time.Minute, lambdaRoleNotReady, func() (err error) {
		out, err = admin.Lambda(r.c.aws).CreateFunction(ctx, in)
		return err
	})
	if err != nil {
		resp.Diagnostics.AddError("Creating the function failed", err.Error())
		return
	}
	plan.ID, plan.ARN, plan.CodeSHA256 = types.StringValue(name), types.StringValue(aws.ToString(out.FunctionArn)), types.StringValue(aws.ToString(out.CodeSha256))
	// From here on the function exists: keep it in state even if a later step fails.
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	if err := r.waitReady(ctx, name); err != nil {
		resp.Diagnostics.AddError("Waiting for the function failed", err.Error())
		return
	}
	if err := r.applySettings(ctx, plan); err != nil {
		resp.Diagnostics.AddError("Configuring the function failed", err.Error())
	}
}

func (r *functionResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st functionModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	found, err := r.read(ctx, st.ID.ValueString(), &st)
	if err != nil {
		resp.Diagnostics.AddError("Reading the function failed", err.Error())
		return
	}
	if !found {
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

func (r *functionResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, prior functionModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := plan.Name.ValueString()
	tags, diags := r.c.resourceTags(ctx, plan.Tags)
	resp.Diagnostics.Append(diags...)
	old, _ := r.c.resourceTags(ctx, prior.Tags)
	roleARN, d := r.ensureRole(ctx, plan, tags, droppedTags(old, tags))
	if d.HasError() {
		resp.Diagnostics.Append(d...)
		return
	}
	client := admin.Lambda(r.c.aws)
	if !plan.CodeSHA256.Equal(prior.CodeSHA256) {
		code, err := functionAsset(plan.Architecture.ValueString())
		if err != nil {
			resp.Diagnostics.AddError("The provider has no Lambda bundle", err.Error())
			return
		}
		if _, err := client.UpdateFunctionCode(ctx, &lambda.UpdateFunctionCodeInput{FunctionName: aws.String(name), ZipFile: code.data}); err != nil {
			resp.Diagnostics.AddError("Updating the function code failed", err.Error())
			return
		}
		if err := r.waitReady(ctx, name); err != nil {
			resp.Diagnostics.AddError("Waiting for the function failed", err.Error())
			return
		}
	}
	err := retryWhile(ctx, 2*time.Second, 2*time.Minute, lambdaRoleNotReady, func() error {
		_, err := client.UpdateFunctionConfiguration(ctx, &lambda.UpdateFunctionConfigurationInput{FunctionName: aws.String(name),
			Role: aws.String(roleARN), VpcConfig: r.vpcConfig(ctx, plan),
			Timeout: aws.Int32(int32(plan.Timeout.ValueInt64())), MemorySize: aws.Int32(int32(plan.MemorySize.ValueInt64())),
			Environment: &lambdatypes.Environment{Variables: r.environment(plan)}})
		return err
	})
	if err != nil {
		resp.Diagnostics.AddError("Updating the function configuration failed", err.Error())
		return
	}
	if err := r.waitReady(ctx, name); err != nil {
		resp.Diagnostics.AddError("Waiting for the function failed", err.Error())
		return
	}
	if _, err := client.TagResource(ctx, &lambda.TagResourceInput{Resource: aws.String(prior.ARN.ValueString()), Tags: tags}); err != nil {
		resp.Diagnostics.AddError("Tagging the function failed", err.Error())
		return
	}
	if err := r.ensureLogGroup(ctx, plan, tags); err != nil {
		resp.Diagnostics.AddError("Updating the log group failed", err.Error())
		return
	}
	if err := r.applySettings(ctx, plan); err != nil {
		resp.Diagnostics.AddError("Configuring the function failed", err.Error())
		return
	}
	if _, err := r.read(ctx, name, &plan); err != nil {
		resp.Diagnostics.AddError("Reading the function failed", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *functionResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st functionModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if err := r.deleteStreamSources(ctx, st.ID.ValueString()); err != nil {
		resp.Diagnostics.AddError("Deleting the function's stream source failed", err.Error())
		return
	}
	if _, err := admin.Lambda(r.c.aws).DeleteFunction(ctx, &lambda.DeleteFunctionInput{FunctionName: aws.String(st.ID.ValueString())}); awserr.IgnoreNotFound(err) != nil {
		resp.Diagnostics.AddError("Deleting the function failed", err.Error())
		return
	}
	if err := r.c.deleteLogGroup(ctx, "/aws/lambda/"+st.ID.ValueString()); err != nil {
		resp.Diagnostics.AddError("Deleting the log group failed", err.Error())
		return
	}
	role := st.RoleName.ValueString() // as recorded: a function may predate the naming roleName gives
	if role == "" {
		role = r.roleName(st.ID.ValueString())
	}
	if err := deleteRole(ctx, admin.IAM(r.c.aws), role, functionPolicyName); err != nil {
		resp.Diagnostics.AddError("Deleting the function role failed", err.Error())
	}
}

// ImportState takes the function name.
func (r *functionResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if !functionNameRE.MatchString(req.ID) {
		resp.Diagnostics.AddError("Invalid import id", fmt.Sprintf("%q: use the function name, e.g. ci-provision", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
