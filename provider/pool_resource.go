package provider

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
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

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

// ghrunner_pool: one pool of runners — its launch template (with the user
// data that installs the agent), the instance role and profile, the agent
// binary in S3 and the pool config item the functions read at run time.

type poolResource struct{ c *clients }

type poolModel struct {
	ID               types.String `tfsdk:"id"`
	Name             types.String `tfsdk:"name"`
	Table            types.String `tfsdk:"table"`
	QueueURL         types.String `tfsdk:"queue_url"`
	Owner            types.String `tfsdk:"owner"`
	ImageID          types.String `tfsdk:"image_id"`
	InstanceTypes    types.List   `tfsdk:"instance_types"`
	SubnetIDs        types.List   `tfsdk:"subnet_ids"`
	SecurityGroupIDs types.List   `tfsdk:"security_group_ids"`
	UsageClass       types.String `tfsdk:"usage_class"`
	OnDemandFallback types.Bool   `tfsdk:"on_demand_fallback"`
	MaxInstances     types.Int64  `tfsdk:"max_instances"`
	RootVolumeSize   types.Int64  `tfsdk:"root_volume_size"`
	RootVolumeType   types.String `tfsdk:"root_volume_type"`
	AgentPath        types.String `tfsdk:"agent_path"`
	AgentEndpoint    types.String `tfsdk:"agent_endpoint"`
	PreRunnerScript  types.String `tfsdk:"pre_runner_script"`
	CleanupScript    types.String `tfsdk:"cleanup_script"`
	RunnerUser       types.String `tfsdk:"runner_user"`
	RunnerTarballURL types.String `tfsdk:"runner_tarball_url"`
	RunnerTarballSHA types.String `tfsdk:"runner_tarball_sha256"`
	IdleWindows      types.List   `tfsdk:"idle_windows"`
	Tags             types.Map    `tfsdk:"tags"`

	CreatedTTL        types.Int64 `tfsdk:"created_ttl_seconds"`
	ClaimTTL          types.Int64 `tfsdk:"claim_ttl_seconds"`
	MaxRuntime        types.Int64 `tfsdk:"max_runtime_seconds"`
	IdleTTL           types.Int64 `tfsdk:"idle_ttl_seconds"`
	BootTime          types.Int64 `tfsdk:"boot_time_seconds"`
	MinRunningTime    types.Int64 `tfsdk:"min_running_time_seconds"`
	HeartbeatInterval types.Int64 `tfsdk:"heartbeat_interval_seconds"`
	StaleAfter        types.Int64 `tfsdk:"stale_after_seconds"`
	MaxAge            types.Int64 `tfsdk:"max_age_seconds"`
	MaxUses           types.Int64 `tfsdk:"max_uses"`
	ReleaseWait       types.Int64 `tfsdk:"release_wait_seconds"`
	RuntimeCap        types.Int64 `tfsdk:"runtime_cap_seconds"`

	LaunchTemplateID      types.String `tfsdk:"launch_template_id"`
	LaunchTemplateVersion types.String `tfsdk:"launch_template_version"`
	RoleName              types.String `tfsdk:"role_name"`
	InstanceProfileARN    types.String `tfsdk:"instance_profile_arn"`
	AgentBucket           types.String `tfsdk:"agent_bucket"`
	AgentSHA256           types.String `tfsdk:"agent_sha256"`
	Architecture          types.String `tfsdk:"architecture"`
	UserDataSize          types.Int64  `tfsdk:"user_data_size"`
}

type idleWindow struct {
	Cron             types.String `tfsdk:"cron"`
	TimeZone         types.String `tfsdk:"time_zone"`
	IdleCount        types.Int64  `tfsdk:"idle_count"`
	EvictionStrategy types.String `tfsdk:"eviction_strategy"`
}

var idleWindowType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"cron": types.StringType, "time_zone": types.StringType, "idle_count": types.Int64Type, "eviction_strategy": types.StringType}}

// windows returns the idle windows, or nil while they are unknown.
func (m poolModel) windows(ctx context.Context) ([]idleWindow, diag.Diagnostics) {
	if m.IdleWindows.IsUnknown() || m.IdleWindows.IsNull() {
		return nil, nil
	}
	var out []idleWindow
	d := m.IdleWindows.ElementsAs(ctx, &out, false)
	return out, d
}

func newPoolResource() resource.Resource { return &poolResource{} }

var (
	poolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	// ownerRE is GitHub's rule (internal/github.ParseOwner): a login of
	// single hyphens between letters and digits, at most 39 (ownerOrgLenRE),
	// and a repository name other than . and ..
	ownerRE       = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9]|-[A-Za-z0-9]){0,38}(/(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,98}|\.\.[A-Za-z0-9._-]{1,98}))?$`)
	ownerOrgLenRE = regexp.MustCompile(`^[^/]{1,39}(/|$)`)
	amiRE         = regexp.MustCompile(`^ami-[0-9a-f]{8,17}$`)
	subnetRE      = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	sgRE          = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)
	instTypeRE    = regexp.MustCompile(`^[a-z0-9-]+\.[a-z0-9-]+$`)
	sha256HexRE   = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func (r *poolResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pool"
}

func (r *poolResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	d := state.DefaultTimings("linux")
	seconds := func(desc string, def int64, min int64) schema.Int64Attribute {
		return schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(def),
			Description: fmt.Sprintf("%s Default %d.", desc, def), Validators: []validator.Int64{int64validator.AtLeast(min)}}
	}
	ids := func(re *regexp.Regexp, what string) []validator.List {
		return []validator.List{listvalidator.SizeAtLeast(1), listvalidator.UniqueValues(),
			listvalidator.ValueStringsAre(stringvalidator.RegexMatches(re, "must be "+what))}
	}
	resp.Schema = schema.Schema{
		Description: "A pool of self-hosted runners: the launch template (IMDSv2 only, hop limit 1, instance metadata tags on) whose user data installs and starts the agent, " +
			"the instance role and profile with a least-privilege policy, the agent binary in a private S3 bucket (or a preinstalled path), " +
			"and the pool's configuration item in the state table, which the functions read at run time (changes apply without redeploying them). " +
			"Destroying a pool terminates the instances it launched.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "`<table>:<name>`.", PlanModifiers: keep},
			"name": schema.StringAttribute{Required: true, Description: "Pool name, as given in provision payloads (`pool`).", PlanModifiers: replace,
				Validators: []validator.String{stringvalidator.RegexMatches(poolNameRE, "must be 1-64 letters, digits, '-' or '_'")}},
			"table": schema.StringAttribute{Required: true, Description: "Name of the state table (`ghrunner_table.name`).", PlanModifiers: replace,
				Validators: []validator.String{stringvalidator.RegexMatches(tableNameRE, "must be 3-255 characters of A-Z a-z 0-9 _ . - (ghrunner_table.name)")}},
			"queue_url": schema.StringAttribute{Required: true, Description: "URL of the pool's queue (`ghrunner_queue.url`).",
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^https?://`), "must be the queue URL (ghrunner_queue.url), not its name")}},
			"owner": schema.StringAttribute{Required: true, Description: "GitHub organization (`acme`) or repository (`acme/api`) the runners register with. Pooled runners are reused only for the same owner.",
				Validators: []validator.String{stringvalidator.All(stringvalidator.RegexMatches(ownerRE, "must be an organization (acme) or a repository (acme/api)"),
					stringvalidator.RegexMatches(ownerOrgLenRE, "must be an organization (acme) or a repository (acme/api)"))}},
			"image_id": schema.StringAttribute{Required: true, Description: "Linux AMI with bash, curl and systemd; its architecture picks the agent binary.",
				Validators: []validator.String{stringvalidator.RegexMatches(amiRE, "must be an AMI id like ami-0123456789abcdef0")}},
			"instance_types": schema.ListAttribute{Required: true, ElementType: types.StringType,
				Description: "Instance types CreateFleet may launch, in order of preference (all of one architecture).",
				Validators:  ids(instTypeRE, "an instance type like c7i.large")},
			"subnet_ids": schema.ListAttribute{Required: true, ElementType: types.StringType, Description: "Subnets to launch in (several AZs give spot more capacity).",
				Validators: ids(subnetRE, "a subnet id like subnet-0123456789abcdef0")},
			"security_group_ids": schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "Security groups of the instances (egress to GitHub and AWS is all they need).",
				Validators: ids(sgRE, "a security group id like sg-0123456789abcdef0")},
			"usage_class": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("spot"),
				Description: "`spot` or `on-demand`. Default spot.", Validators: []validator.String{stringvalidator.OneOf("spot", "on-demand")}},
			"on_demand_fallback": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				Description: "Launch on-demand for what spot capacity cannot give. Default true."},
			"max_instances": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(20),
				Description: "Most instances the pool may have at once. Default 20.", Validators: []validator.Int64{int64validator.Between(1, 10000)}},
			"root_volume_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(30),
				Description: "Root volume size in GiB (encrypted). Default 30.", Validators: []validator.Int64{int64validator.Between(8, 16384)}},
			"root_volume_type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("gp3"),
				Description: "Root volume type. Default gp3.", Validators: []validator.String{stringvalidator.OneOf("gp3", "gp2", "io1", "io2")}},
			"agent_path": schema.StringAttribute{Optional: true,
				Description: "Path of an agent preinstalled in the AMI. Unset: the provider uploads the agent it embeds to a private bucket and the instance downloads it with its role, checking its SHA-256.",
				Validators:  []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^/[^\s'"]+$`), "must be an absolute path without spaces or quotes")}},
			"agent_endpoint": schema.StringAttribute{Optional: true,
				Description: "AWS endpoint URL the agent uses instead of the regional ones (a VPC endpoint, or the sandbox).",
				Validators:  []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^https?://[^\s]+$`), "must be an http(s) URL")}},
			"pre_runner_script": schema.StringAttribute{Optional: true, Description: "Script (starting with #!) run once per instance, as root, before the first registration."},
			"cleanup_script":    schema.StringAttribute{Optional: true, Description: "Script (starting with #!) run after every run, after the work folder is wiped."},
			"runner_user": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("ghrunner"),
				Description: "Unprivileged user that runs the jobs; it cannot reach the instance metadata service. Default ghrunner.",
				Validators:  []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`), "must be a Linux user name")}},
			"runner_tarball_url": schema.StringAttribute{Optional: true, Description: "actions/runner tarball to install when the AMI has none (needs runner_tarball_sha256).",
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^https?://[^\s]+$`), "must be an http(s) URL")}},
			"runner_tarball_sha256": schema.StringAttribute{Optional: true, Description: "SHA-256 of the runner tarball.",
				Validators: []validator.String{stringvalidator.RegexMatches(sha256HexRE, "must be 64 lowercase hex digits")}},
			"idle_windows": schema.ListNestedAttribute{Optional: true,
				Description: "Idle instances scale-down keeps while a window's cron matches the current minute in its time zone; outside every window the pool keeps none.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"cron":       schema.StringAttribute{Required: true, Description: "5-field cron (minute hour day-of-month month day-of-week), e.g. `* 8-18 * * 1-5`."},
					"time_zone":  schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("UTC"), Description: "IANA time zone of the cron. Default UTC."},
					"idle_count": schema.Int64Attribute{Required: true, Description: "Idle instances to keep.", Validators: []validator.Int64{int64validator.AtLeast(0)}},
					"eviction_strategy": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("oldest_first"),
						Description: "Which idle instances go first: `oldest_first` or `newest_first`.", Validators: []validator.String{stringvalidator.OneOf("oldest_first", "newest_first")}},
				}}},
			"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Tags of the launch template, role and bucket (instances carry the ghr: tags)."},

			"created_ttl_seconds":        seconds("Lease of a new instance until its runner registers.", d.CreatedTTL, 60),
			"claim_ttl_seconds":          seconds("Lease of a claimed pooled instance until it registers for the new run.", d.ClaimTTL, 30),
			"max_runtime_seconds":        seconds("Lease of a running instance; the agent renews it while its runner is alive, up to runtime_cap_seconds.", d.MaxRuntime, 60),
			"runtime_cap_seconds":        seconds("Longest one run may hold an instance, however long its jobs run (≥ max_runtime_seconds; 6 h is GitHub's limit for one job).", d.RuntimeCap, 60),
			"idle_ttl_seconds":           seconds("Lease of an idle instance in the pool (scale-down renews the kept ones).", d.IdleTTL, 60),
			"boot_time_seconds":          seconds("Expected boot time; unrecorded instances younger than this are never orphans.", d.BootTime, 10),
			"min_running_time_seconds":   seconds("Minimum age before scale-down terminates an idle instance (at least 1: the pool config reads 0 as unset).", d.MinRunningTime, 1),
			"heartbeat_interval_seconds": seconds("Agent heartbeat interval.", d.HeartbeatInterval, 1),
			"stale_after_seconds":        seconds("How long the agent's heartbeat count may stand still, on the control plane's clock, before refresh retires an idle instance (or a running one whose runner GitHub no longer shows online); ≥ 2 × heartbeat.", d.StaleAfter, 2),
			"max_age_seconds":            seconds("Instances older than this are not reused.", d.MaxAge, 60),
			"max_uses":                   seconds("Runs an instance serves before it is retired.", int64(d.MaxUses), 1),
			"release_wait_seconds":       seconds("How long release waits for an agent to deregister cleanly.", d.ReleaseWait, 5),

			"launch_template_id":      schema.StringAttribute{Computed: true, Description: "Launch template id.", PlanModifiers: keep},
			"launch_template_version": schema.StringAttribute{Computed: true, Description: "Current launch template version; pooled instances of older versions are not reused."},
			"role_name":               schema.StringAttribute{Computed: true, Description: "Instance role name.", PlanModifiers: keep},
			"instance_profile_arn":    schema.StringAttribute{Computed: true, Description: "Instance profile ARN.", PlanModifiers: keep},
			"agent_bucket":            schema.StringAttribute{Computed: true, Description: "Private bucket holding the agent (empty with agent_path).", PlanModifiers: keep},
			"agent_sha256":            schema.StringAttribute{Computed: true, Description: "SHA-256 of the agent the instances download; a provider with a new agent shows it as a change."},
			"architecture":            schema.StringAttribute{Computed: true, Description: "CPU architecture of the AMI (arm64 or amd64).", PlanModifiers: keep},
			"user_data_size":          schema.Int64Attribute{Computed: true, Description: "Size of the rendered user data in bytes (EC2 allows 16384)."},
		},
	}
}

func (r *poolResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	if c, ok := req.ProviderData.(*clients); ok {
		r.c = c
	}
}

// ValidateConfig checks what single-attribute validators cannot: scripts,
// cross-field timings and idle windows, with the same rules the functions
// apply when they read the pool config.
func (r *poolResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m poolModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	windows, _ := m.windows(ctx) // unknown elements are checked at apply
	for i, w := range windows {
		p := path.Root("idle_windows").AtListIndex(i)
		iw := state.IdleWindow{Cron: w.Cron.ValueString(), TimeZone: w.TimeZone.ValueString(), IdleCount: int(w.IdleCount.ValueInt64()), EvictionStrategy: w.EvictionStrategy.ValueString()}
		if iw.TimeZone == "" {
			iw.TimeZone = "UTC"
		}
		if iw.EvictionStrategy == "" {
			iw.EvictionStrategy = "oldest_first"
		}
		if w.Cron.IsUnknown() || w.TimeZone.IsUnknown() {
			continue
		}
		if err := iw.Validate(); err != nil {
			field := map[string]string{"cron": "cron", "timeZone": "time_zone", "idleCount": "idle_count", "evictionStrategy": "eviction_strategy"}[strings.SplitN(err.Error(), ":", 2)[0]]
			resp.Diagnostics.AddAttributeError(p.AtName(field), "Invalid idle window", err.Error())
		}
	}
	if !m.HeartbeatInterval.IsNull() && !m.HeartbeatInterval.IsUnknown() && !m.StaleAfter.IsNull() && !m.StaleAfter.IsUnknown() &&
		m.StaleAfter.ValueInt64() < 2*m.HeartbeatInterval.ValueInt64() {
		resp.Diagnostics.AddAttributeError(path.Root("stale_after_seconds"), "Heartbeats would look stale",
			fmt.Sprintf("stale_after_seconds (%d) must be at least twice heartbeat_interval_seconds (%d)", m.StaleAfter.ValueInt64(), m.HeartbeatInterval.ValueInt64()))
	}
	if rt, limit, ok := effective(m.MaxRuntime, state.DefaultTimings("linux").MaxRuntime), effective(m.RuntimeCap, state.DefaultTimings("linux").RuntimeCap), !m.MaxRuntime.IsUnknown() && !m.RuntimeCap.IsUnknown(); ok && limit < rt {
		resp.Diagnostics.AddAttributeError(path.Root("runtime_cap_seconds"), "Runtime cap below the running lease",
			fmt.Sprintf("runtime_cap_seconds (%d) must be at least max_runtime_seconds (%d): the agent extends the running lease up to the cap", limit, rt))
	}
	if m.RunnerTarballURL.IsNull() != m.RunnerTarballSHA.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("runner_tarball_sha256"), "Runner tarball needs its checksum",
			"set runner_tarball_url and runner_tarball_sha256 together")
	}
	// Render with a stand-in checksum so size limits and script rules fail at
	// plan time, not at apply.
	if m.PreRunnerScript.IsUnknown() || m.CleanupScript.IsUnknown() || m.AgentPath.IsUnknown() || m.AgentEndpoint.IsUnknown() {
		return
	}
	if _, err := r.userData(m, "table-placeholder", "us-east-1", strings.Repeat("0", 64), "https://bucket.s3.us-east-1.amazonaws.com/agent/x/ghrunner-agent"); err != nil {
		resp.Diagnostics.AddError("Invalid user data settings", err.Error())
	}
}

// ModifyPlan shows a new embedded agent as a change, marks the launch
// template version as changing with its inputs, and refuses to plan a pool
// with a provider built without its agent.
func (r *poolResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan poolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var prior *poolModel
	if !req.State.Raw.IsNull() {
		prior = &poolModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, prior)...)
	}
	if plan.AgentPath.IsNull() {
		arch := "arm64"
		if prior != nil && prior.Architecture.ValueString() != "" {
			arch = prior.Architecture.ValueString()
		}
		a, err := agentAsset(arch)
		if err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("agent_path"), "The provider has no agent to upload", err.Error()+"; or set agent_path to an agent preinstalled in the AMI")
			return
		}
		if prior != nil {
			plan.AgentSHA256 = types.StringValue(a.sha256Hex)
		} else {
			plan.AgentSHA256 = types.StringUnknown() // the AMI's architecture decides
		}
	} else {
		plan.AgentSHA256 = types.StringValue("")
	}
	if prior != nil && launchTemplateInputs(plan) == launchTemplateInputs(*prior) && plan.AgentSHA256.Equal(prior.AgentSHA256) {
		plan.LaunchTemplateVersion, plan.UserDataSize = prior.LaunchTemplateVersion, prior.UserDataSize
	} else {
		plan.LaunchTemplateVersion, plan.UserDataSize = types.StringUnknown(), types.Int64Unknown()
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// launchTemplateInputs lists what goes into a launch template version.
func launchTemplateInputs(m poolModel) string {
	return strings.Join([]string{m.ImageID.String(), m.SecurityGroupIDs.String(), m.RootVolumeSize.String(), m.RootVolumeType.String(),
		m.AgentPath.String(), m.AgentEndpoint.String(), m.PreRunnerScript.String(), m.CleanupScript.String(), m.RunnerUser.String(),
		m.RunnerTarballURL.String(), m.RunnerTarballSHA.String(), m.HeartbeatInterval.String(), m.Tags.String()}, "\x00")
}

// name is the pool's launch template, role and instance profile name.
func (r *poolResource) name(m poolModel) string {
	return iamName("ghr-" + r.c.environment + "-" + m.Name.ValueString())
}

func (r *poolResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan poolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ID = types.StringValue(plan.Table.ValueString() + ":" + plan.Name.ValueString())
	resp.Diagnostics.Append(r.apply(ctx, &plan, nil)...)
	if resp.Diagnostics.HasError() {
		// Keep what exists in state so a retry or destroy finds it.
		if !plan.LaunchTemplateID.IsUnknown() || !plan.RoleName.IsUnknown() {
			r.unknownToNull(&plan)
			resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		}
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *poolResource) unknownToNull(m *poolModel) {
	for _, s := range []*types.String{&m.LaunchTemplateID, &m.LaunchTemplateVersion, &m.RoleName, &m.InstanceProfileARN, &m.AgentBucket, &m.AgentSHA256, &m.Architecture} {
		if s.IsUnknown() {
			*s = types.StringValue("")
		}
	}
	if m.UserDataSize.IsUnknown() {
		m.UserDataSize = types.Int64Value(0)
	}
}

// apply makes AWS match plan; prior is nil on create. Every step is
// idempotent, so an interrupted apply can simply be run again.
func (r *poolResource) apply(ctx context.Context, plan, prior *poolModel) diag.Diagnostics {
	var diags diag.Diagnostics
	tableARN, err := r.tableARN(ctx, plan.Table.ValueString())
	if err != nil {
		diags.AddAttributeError(path.Root("table"), "State table not found", err.Error())
		return diags
	}
	image, err := r.image(ctx, plan.ImageID.ValueString())
	if err != nil {
		diags.AddAttributeError(path.Root("image_id"), "AMI not usable", err.Error())
		return diags
	}
	plan.Architecture = types.StringValue(image.arch)
	name := r.name(*plan) // of the template, the role and the profile
	own := map[string]string{}
	diags.Append(plan.Tags.ElementsAs(ctx, &own, false)...)
	tags := r.c.tags(own)
	tags["ghr:pool"] = plan.Name.ValueString()

	// The bucket and the agent object.
	agentURL, sum := "", ""
	plan.AgentBucket = types.StringValue("")
	if prior != nil {
		plan.AgentBucket = prior.AgentBucket
	}
	if plan.AgentPath.IsNull() {
		a, err := agentAsset(image.arch)
		if err != nil {
			diags.AddAttributeError(path.Root("agent_path"), "The provider has no agent to upload", err.Error())
			return diags
		}
		bucket := plan.AgentBucket.ValueString()
		if bucket == "" {
			if bucket, err = r.createBucket(ctx, tags); err != nil {
				diags.AddError("Creating the agent bucket failed", err.Error())
				return diags
			}
			plan.AgentBucket = types.StringValue(bucket)
		}
		key := "agent/" + a.sha256Hex + "/ghrunner-agent"
		if _, err := r.c.aws.S3().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(string(a.data)),
			ServerSideEncryption: s3types.ServerSideEncryptionAes256}); err != nil {
			diags.AddError("Uploading the agent failed", err.Error())
			return diags
		}
		agentURL, sum = r.objectURL(bucket, key), a.sha256Hex
	}
	plan.AgentSHA256 = types.StringValue(sum)

	// The role, its policy and the instance profile.
	policy, err := agentPolicy(tableARN, r.c.environment, plan.Name.ValueString(), plan.AgentBucket.ValueString())
	if err != nil {
		diags.AddError("Building the agent policy failed", err.Error())
		return diags
	}
	profileARN, err := r.ensureRole(ctx, name, policy, tags)
	plan.RoleName = types.StringValue(name)
	if err != nil {
		diags.AddError("Creating the instance role failed", err.Error())
		return diags
	}
	plan.InstanceProfileARN = types.StringValue(profileARN)

	// The launch template, or a new version of it.
	userData, err := r.userData(*plan, plan.Table.ValueString(), r.c.aws.AWS.Region, sum, agentURL)
	if err != nil {
		diags.AddError("Invalid user data settings", err.Error())
		return diags
	}
	plan.UserDataSize = types.Int64Value(int64(len(userData)))
	data := r.templateData(ctx, *plan, image, profileARN, userData, tags)
	if prior == nil || prior.LaunchTemplateID.ValueString() == "" {
		id, version, err := r.createTemplate(ctx, name, data, tags)
		if err != nil {
			diags.AddError("Creating the launch template failed", err.Error())
			return diags
		}
		plan.LaunchTemplateID, plan.LaunchTemplateVersion = types.StringValue(id), types.StringValue(version)
	} else {
		plan.LaunchTemplateID = prior.LaunchTemplateID
		plan.LaunchTemplateVersion = prior.LaunchTemplateVersion
		if launchTemplateInputs(*plan) != launchTemplateInputs(*prior) || sum != prior.AgentSHA256.ValueString() {
			version, err := r.newTemplateVersion(ctx, plan.LaunchTemplateID.ValueString(), data)
			if err != nil {
				diags.AddError("Updating the launch template failed", err.Error())
				return diags
			}
			plan.LaunchTemplateVersion = types.StringValue(version)
		}
	}

	// The pool config item last: functions only see a pool whose template exists.
	cfg, d := poolConfigOf(ctx, *plan)
	diags.Append(d...)
	if diags.HasError() {
		return diags
	}
	if err := state.New(r.c.aws.DynamoDB(), plan.Table.ValueString()).PutPoolConfig(ctx, cfg); err != nil {
		diags.AddError("Writing the pool config failed", err.Error())
		return diags
	}
	// An older agent object stays until the pool is destroyed: instances of
	// the previous template version may still be booting and downloading it.
	return diags
}

func poolConfigOf(ctx context.Context, m poolModel) (state.PoolConfig, diag.Diagnostics) {
	var diags diag.Diagnostics
	var types_, subnets []string
	diags.Append(m.InstanceTypes.ElementsAs(ctx, &types_, false)...)
	diags.Append(m.SubnetIDs.ElementsAs(ctx, &subnets, false)...)
	cfg := state.PoolConfig{
		Name: m.Name.ValueString(), Owner: m.Owner.ValueString(), QueueURL: m.QueueURL.ValueString(),
		LaunchTemplateID: m.LaunchTemplateID.ValueString(), LaunchTemplateVersion: m.LaunchTemplateVersion.ValueString(),
		InstanceTypes: types_, SubnetIDs: subnets, UsageClass: m.UsageClass.ValueString(), OnDemandFallback: m.OnDemandFallback.ValueBool(),
		MaxInstances: int(m.MaxInstances.ValueInt64()), OS: "linux", UpdatedAt: time.Now().Unix(),
		Timings: state.Timings{
			CreatedTTL: m.CreatedTTL.ValueInt64(), ClaimTTL: m.ClaimTTL.ValueInt64(), MaxRuntime: m.MaxRuntime.ValueInt64(), IdleTTL: m.IdleTTL.ValueInt64(),
			BootTime: m.BootTime.ValueInt64(), MinRunningTime: m.MinRunningTime.ValueInt64(), HeartbeatInterval: m.HeartbeatInterval.ValueInt64(),
			StaleAfter: m.StaleAfter.ValueInt64(), MaxAge: m.MaxAge.ValueInt64(), MaxUses: int(m.MaxUses.ValueInt64()), ReleaseWait: m.ReleaseWait.ValueInt64(),
			RuntimeCap: m.RuntimeCap.ValueInt64(),
		},
	}
	windows, d := m.windows(ctx)
	diags.Append(d...)
	for _, w := range windows {
		cfg.IdleWindows = append(cfg.IdleWindows, state.IdleWindow{Cron: w.Cron.ValueString(), TimeZone: w.TimeZone.ValueString(),
			IdleCount: int(w.IdleCount.ValueInt64()), EvictionStrategy: w.EvictionStrategy.ValueString()})
	}
	return cfg, diags
}

func (r *poolResource) userData(m poolModel, table, region, sum, agentURL string) ([]byte, error) {
	agent := config.Defaults()
	agent.Table, agent.Region = table, region
	agent.Endpoint = m.AgentEndpoint.ValueString()
	agent.RunnerTarballURL, agent.RunnerTarballSHA256 = m.RunnerTarballURL.ValueString(), m.RunnerTarballSHA.ValueString()
	if hb := m.HeartbeatInterval.ValueInt64(); hb > 0 {
		agent.HeartbeatInterval = config.Duration{Duration: time.Duration(hb) * time.Second}
	}
	u := templates.UserData{Agent: agent, Region: region, PreRunnerScript: m.PreRunnerScript.ValueString(),
		CleanupScript: m.CleanupScript.ValueString(), RunnerUser: m.RunnerUser.ValueString()}
	if m.AgentPath.ValueString() != "" {
		u.AgentPath = m.AgentPath.ValueString()
	} else {
		u.AgentURL, u.AgentSHA256 = agentURL, sum
	}
	return templates.Render(u)
}

func (r *poolResource) tableARN(ctx context.Context, table string) (string, error) {
	out, err := r.c.aws.DynamoDB().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	var nf *ddbtypes.ResourceNotFoundException
	if errors.As(err, &nf) {
		return "", fmt.Errorf("table %q does not exist: create it with ghrunner_table and pass ghrunner_table.<name>.name", table)
	}
	if err != nil {
		return "", err
	}
	return aws.ToString(out.Table.TableArn), nil
}

type imageInfo struct{ arch, rootDevice string }

func (r *poolResource) image(ctx context.Context, id string) (imageInfo, error) {
	out, err := r.c.aws.EC2().DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil || len(out.Images) == 0 {
		return imageInfo{}, fmt.Errorf("image_id %q: not found in this region or not shared with this account (%v)", id, err)
	}
	img := out.Images[0]
	if img.Platform == ec2types.PlatformValuesWindows {
		return imageInfo{}, fmt.Errorf("image_id %q is a Windows AMI: pools need Linux (bash, curl, systemd)", id)
	}
	arch := map[ec2types.ArchitectureValues]string{ec2types.ArchitectureValuesX8664: "amd64", ec2types.ArchitectureValuesArm64: "arm64"}[img.Architecture]
	if arch == "" {
		return imageInfo{}, fmt.Errorf("image_id %q has architecture %q: use an x86_64 or arm64 AMI", id, img.Architecture)
	}
	root := aws.ToString(img.RootDeviceName)
	if root == "" {
		root = "/dev/xvda"
	}
	return imageInfo{arch: arch, rootDevice: root}, nil
}

func (r *poolResource) createBucket(ctx context.Context, tags map[string]string) (string, error) {
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return "", err
	}
	bucket := "ghr-" + r.c.environment + "-agent-" + hex.EncodeToString(suffix)
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if region := r.c.aws.AWS.Region; region != "us-east-1" {
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(region)}
	}
	client := r.c.aws.S3()
	if _, err := client.CreateBucket(ctx, in); err != nil {
		return "", err
	}
	if _, err := client.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: aws.String(bucket), PublicAccessBlockConfiguration: &s3types.PublicAccessBlockConfiguration{
		BlockPublicAcls: aws.Bool(true), BlockPublicPolicy: aws.Bool(true), IgnorePublicAcls: aws.Bool(true), RestrictPublicBuckets: aws.Bool(true)}}); err != nil {
		return bucket, err
	}
	var tagSet []s3types.Tag
	for k, v := range tags {
		tagSet = append(tagSet, s3types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	_, err := client.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: aws.String(bucket), Tagging: &s3types.Tagging{TagSet: tagSet}})
	return bucket, err
}

// objectURL is the URL the instance downloads the agent from: the regional
// virtual-hosted URL, or path style under an overridden S3 endpoint.
func (r *poolResource) objectURL(bucket, key string) string {
	if ep := r.c.aws.Endpoint("s3"); ep != nil {
		u, err := url.JoinPath(*ep, bucket, key)
		if err == nil {
			return u
		}
	}
	return fmt.Sprintf("https://%s.s3.%s.amazonaws.com/%s", bucket, r.c.aws.AWS.Region, key)
}

func (r *poolResource) ensureRole(ctx context.Context, name, policy string, tags map[string]string) (string, error) {
	client := r.c.aws.IAM()
	_, err := client.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(trustPolicy("ec2.amazonaws.com")),
		Description: aws.String("ghrunner agent on instances of pool " + name), Tags: iamTags(tags)})
	var exists *iamtypes.EntityAlreadyExistsException
	if err != nil && !errors.As(err, &exists) {
		return "", err
	}
	if _, err := client.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String("ghrunner-agent"), PolicyDocument: aws.String(policy)}); err != nil {
		return "", err
	}
	prof, err := client.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	var nf *iamtypes.NoSuchEntityException
	if errors.As(err, &nf) {
		created, err := client.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: iamTags(tags)})
		if err != nil {
			return "", err
		}
		if _, err := client.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)}); err != nil {
			return "", err
		}
		return aws.ToString(created.InstanceProfile.Arn), nil
	}
	if err != nil {
		return "", err
	}
	if len(prof.InstanceProfile.Roles) == 0 {
		if _, err := client.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)}); err != nil {
			return "", err
		}
	}
	return aws.ToString(prof.InstanceProfile.Arn), nil
}

func (r *poolResource) templateData(ctx context.Context, m poolModel, img imageInfo, profileARN string, userData []byte, tags map[string]string) *ec2types.RequestLaunchTemplateData {
	var sgs []string
	m.SecurityGroupIDs.ElementsAs(ctx, &sgs, false)
	return &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String(m.ImageID.ValueString()),
		UserData:           aws.String(base64.StdEncoding.EncodeToString(userData)),
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Arn: aws.String(profileARN)},
		SecurityGroupIds:   sgs,
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
			HttpTokens:              ec2types.LaunchTemplateHttpTokensStateRequired,
			HttpPutResponseHopLimit: aws.Int32(1),
			InstanceMetadataTags:    ec2types.LaunchTemplateInstanceMetadataTagsStateEnabled,
		},
		BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{
			DeviceName: aws.String(img.rootDevice),
			Ebs: &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(int32(m.RootVolumeSize.ValueInt64())),
				VolumeType: ec2types.VolumeType(m.RootVolumeType.ValueString()), Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)},
		}},
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeVolume, Tags: ec2Tags(tags)}},
	}
}

func (r *poolResource) createTemplate(ctx context.Context, name string, data *ec2types.RequestLaunchTemplateData, tags map[string]string) (string, string, error) {
	out, err := r.c.aws.EC2().CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: data,
		VersionDescription: aws.String("ghrunner"),
		TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: ec2Tags(tags)}}})
	if fleet.ErrorCode(err) == "InvalidLaunchTemplateName.AlreadyExistsException" {
		return "", "", fmt.Errorf("a launch template named %s already exists (left from an earlier deployment of environment %q?): delete it or import the pool", name, r.c.environment)
	}
	if err != nil {
		return "", "", err
	}
	return aws.ToString(out.LaunchTemplate.LaunchTemplateId), strconv.FormatInt(aws.ToInt64(out.LaunchTemplate.LatestVersionNumber), 10), nil
}

func (r *poolResource) newTemplateVersion(ctx context.Context, id string, data *ec2types.RequestLaunchTemplateData) (string, error) {
	out, err := r.c.aws.EC2().CreateLaunchTemplateVersion(ctx, &ec2.CreateLaunchTemplateVersionInput{LaunchTemplateId: aws.String(id), LaunchTemplateData: data})
	if err != nil {
		return "", err
	}
	version := strconv.FormatInt(aws.ToInt64(out.LaunchTemplateVersion.VersionNumber), 10)
	if _, err := r.c.aws.EC2().ModifyLaunchTemplate(ctx, &ec2.ModifyLaunchTemplateInput{LaunchTemplateId: aws.String(id), DefaultVersion: aws.String(version)}); err != nil {
		return "", err
	}
	return version, nil
}

func (r *poolResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var st poolModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	found, err := r.read(ctx, &st)
	if err != nil {
		resp.Diagnostics.AddError("Reading the pool failed", err.Error())
		return
	}
	if !found {
		resp.State.RemoveResource(ctx)
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
}

// read refreshes m from the pool config item and the launch template; it
// reports false when either is gone.
func (r *poolResource) read(ctx context.Context, m *poolModel) (bool, error) {
	cfg, err := state.New(r.c.aws.DynamoDB(), m.Table.ValueString()).GetPoolConfig(ctx, m.Name.ValueString())
	var nf *ddbtypes.ResourceNotFoundException
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if cfg == nil {
		return false, nil
	}
	lt, err := r.c.aws.EC2().DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(cfg.LaunchTemplateID), Versions: []string{"$Default"}})
	if fleet.IsNotFound(err) || strings.HasPrefix(fleet.ErrorCode(err), "InvalidLaunchTemplate") || (err == nil && len(lt.LaunchTemplateVersions) == 0) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m.ID = types.StringValue(m.Table.ValueString() + ":" + cfg.Name)
	m.Owner, m.QueueURL = types.StringValue(cfg.Owner), types.StringValue(cfg.QueueURL)
	m.LaunchTemplateID, m.LaunchTemplateVersion = types.StringValue(cfg.LaunchTemplateID), types.StringValue(cfg.LaunchTemplateVersion)
	m.InstanceTypes, _ = types.ListValueFrom(ctx, types.StringType, cfg.InstanceTypes)
	m.SubnetIDs, _ = types.ListValueFrom(ctx, types.StringType, cfg.SubnetIDs)
	m.UsageClass, m.OnDemandFallback = types.StringValue(cfg.UsageClass), types.BoolValue(cfg.OnDemandFallback)
	m.MaxInstances = types.Int64Value(int64(cfg.MaxInstances))
	t := cfg.Timings
	m.CreatedTTL, m.ClaimTTL, m.MaxRuntime, m.IdleTTL = types.Int64Value(t.CreatedTTL), types.Int64Value(t.ClaimTTL), types.Int64Value(t.MaxRuntime), types.Int64Value(t.IdleTTL)
	m.BootTime, m.MinRunningTime, m.HeartbeatInterval = types.Int64Value(t.BootTime), types.Int64Value(t.MinRunningTime), types.Int64Value(t.HeartbeatInterval)
	m.StaleAfter, m.MaxAge, m.MaxUses, m.ReleaseWait = types.Int64Value(t.StaleAfter), types.Int64Value(t.MaxAge), types.Int64Value(int64(t.MaxUses)), types.Int64Value(t.ReleaseWait)
	m.RuntimeCap = types.Int64Value(t.RuntimeCap)
	// An empty list in the configuration stays empty, an unset one null.
	if !m.IdleWindows.IsNull() || len(cfg.IdleWindows) > 0 {
		windows := []idleWindow{}
		for _, w := range cfg.IdleWindows {
			windows = append(windows, idleWindow{Cron: types.StringValue(w.Cron), TimeZone: types.StringValue(w.TimeZone),
				IdleCount: types.Int64Value(int64(w.IdleCount)), EvictionStrategy: types.StringValue(w.EvictionStrategy)})
		}
		m.IdleWindows, _ = types.ListValueFrom(ctx, idleWindowType, windows)
	}
	data := lt.LaunchTemplateVersions[0].LaunchTemplateData
	m.ImageID = types.StringValue(aws.ToString(data.ImageId))
	if len(data.SecurityGroupIds) > 0 || !m.SecurityGroupIDs.IsNull() {
		m.SecurityGroupIDs, _ = types.ListValueFrom(ctx, types.StringType, data.SecurityGroupIds)
	}
	if len(data.BlockDeviceMappings) > 0 && data.BlockDeviceMappings[0].Ebs != nil {
		ebs := data.BlockDeviceMappings[0].Ebs
		m.RootVolumeSize = types.Int64Value(int64(aws.ToInt32(ebs.VolumeSize)))
		m.RootVolumeType = types.StringValue(string(ebs.VolumeType))
	}
	if err := r.readUserData(ctx, m, data); err != nil {
		return false, err
	}
	if data.IamInstanceProfile != nil {
		m.InstanceProfileARN = types.StringValue(aws.ToString(data.IamInstanceProfile.Arn))
		arn := aws.ToString(data.IamInstanceProfile.Arn)
		m.RoleName = types.StringValue(arn[strings.LastIndex(arn, "/")+1:])
	}
	return true, nil
}

// readUserData recovers the user-data settings so that a changed launch
// template shows in the plan.
func (r *poolResource) readUserData(ctx context.Context, m *poolModel, data *ec2types.ResponseLaunchTemplateData) error {
	raw, err := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	if err != nil {
		return fmt.Errorf("launch template %s: user data is not base64: %w", m.LaunchTemplateID.ValueString(), err)
	}
	u, err := templates.Parse(raw)
	if err != nil {
		return fmt.Errorf("launch template %s: %w", m.LaunchTemplateID.ValueString(), err)
	}
	m.UserDataSize = types.Int64Value(int64(len(raw)))
	m.PreRunnerScript, m.CleanupScript = optional(u.PreRunnerScript), optional(u.CleanupScript)
	m.RunnerUser = types.StringValue(u.RunnerUser)
	m.AgentPath, m.AgentEndpoint = optional(u.AgentPath), optional(u.Agent.Endpoint)
	m.RunnerTarballURL, m.RunnerTarballSHA = optional(u.Agent.RunnerTarballURL), optional(u.Agent.RunnerTarballSHA256)
	m.AgentSHA256 = types.StringValue(u.AgentSHA256)
	m.AgentBucket = types.StringValue(bucketOf(u.AgentURL))
	if m.Architecture.ValueString() == "" {
		img, err := r.image(ctx, aws.ToString(data.ImageId))
		if err != nil {
			return err
		}
		m.Architecture = types.StringValue(img.arch)
	}
	return nil
}

// optional maps "" to null, as an unset optional attribute reads.
func optional(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// bucketOf finds the bucket in an S3 object URL, virtual-hosted or path style.
func bucketOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return ""
	}
	if host, _, ok := strings.Cut(u.Hostname(), ".s3."); ok {
		return host
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	return first
}

func (r *poolResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, prior poolModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ID = prior.ID
	resp.Diagnostics.Append(r.apply(ctx, &plan, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete removes the pool config first (no function launches for the pool
// any more), terminates the pool's instances, then the template, the
// bucket and the role. Each step tolerates what is already gone.
func (r *poolResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var st poolModel
	resp.Diagnostics.Append(req.State.Get(ctx, &st)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var nf *ddbtypes.ResourceNotFoundException
	if err := state.New(r.c.aws.DynamoDB(), st.Table.ValueString()).DeletePoolConfig(ctx, st.Name.ValueString()); err != nil && !errors.As(err, &nf) {
		resp.Diagnostics.AddError("Deleting the pool config failed", err.Error())
		return
	}
	f := fleet.New(r.c.aws.EC2(), r.c.environment)
	instances, err := f.List(ctx, fleet.Filter{Pool: st.Name.ValueString()})
	if err != nil {
		resp.Diagnostics.AddError("Listing the pool's instances failed", err.Error())
		return
	}
	if len(instances) > 0 {
		ids := make([]string, len(instances))
		for i, in := range instances {
			ids[i] = in.ID
		}
		if _, err := f.Terminate(ctx, ids); err != nil {
			resp.Diagnostics.AddError("Terminating the pool's instances failed", err.Error())
			return
		}
	}
	if id := st.LaunchTemplateID.ValueString(); id != "" {
		_, err := r.c.aws.EC2().DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
		if err != nil && !fleet.IsNotFound(err) && !strings.HasPrefix(fleet.ErrorCode(err), "InvalidLaunchTemplate") {
			resp.Diagnostics.AddError("Deleting the launch template failed", err.Error())
			return
		}
	}
	if b := st.AgentBucket.ValueString(); b != "" {
		if err := r.deleteBucket(ctx, b); err != nil {
			resp.Diagnostics.AddError("Deleting the agent bucket failed", err.Error())
			return
		}
	}
	if name := st.RoleName.ValueString(); name != "" {
		if err := r.deleteRole(ctx, name); err != nil {
			resp.Diagnostics.AddError("Deleting the instance role failed", err.Error())
		}
	}
}

func (r *poolResource) deleteBucket(ctx context.Context, bucket string) error {
	client := r.c.aws.S3()
	var nb *s3types.NoSuchBucket
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if errors.As(err, &nb) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: o.Key}); err != nil {
				return err
			}
		}
	}
	_, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	if errors.As(err, &nb) {
		return nil
	}
	return err
}

func (r *poolResource) deleteRole(ctx context.Context, name string) error {
	client := r.c.aws.IAM()
	var nf *iamtypes.NoSuchEntityException
	ignore := func(err error) error {
		if errors.As(err, &nf) {
			return nil
		}
		return err
	}
	if _, err := client.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)}); ignore(err) != nil {
		return err
	}
	if _, err := client.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); ignore(err) != nil {
		return err
	}
	return deleteRole(ctx, client, name, "ghrunner-agent")
}

// ImportState takes `<table>:<pool>`. Scripts and agent_path cannot be read
// back from AWS (they are inside the user data) and come from the config.
func (r *poolResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	table, name, ok := strings.Cut(req.ID, ":")
	if !ok || table == "" || !poolNameRE.MatchString(name) {
		resp.Diagnostics.AddError("Invalid import id", fmt.Sprintf("%q: use <table>:<pool>, e.g. ghr-prod:linux", req.ID))
		return
	}
	m := poolModel{Table: types.StringValue(table), Name: types.StringValue(name), SecurityGroupIDs: types.ListNull(types.StringType), Tags: types.MapNull(types.StringType),
		IdleWindows:   types.ListNull(idleWindowType),
		InstanceTypes: types.ListNull(types.StringType), SubnetIDs: types.ListNull(types.StringType)}
	found, err := r.read(ctx, &m)
	if err != nil || !found {
		resp.Diagnostics.AddError("Importing the pool failed", fmt.Sprintf("no pool %q in table %q (%v)", name, table, err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), m.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("table"), table)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}

// effective is a number attribute's value, or def when it is not set.
func effective(v types.Int64, def int64) int64 {
	if v.IsNull() || v.IsUnknown() {
		return def
	}
	return v.ValueInt64()
}
