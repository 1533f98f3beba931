package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
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

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

// The ghrunner_pool resource: its schema, then create, read, update and
// import. Delete is in pool_destroy.go, the plan-time checks in pool_plan.go,
// the apply's steps in pool_apply.go and the model in pool_model.go.

var (
	_ resource.Resource                   = &poolResource{}
	_ resource.ResourceWithConfigure      = &poolResource{}
	_ resource.ResourceWithValidateConfig = &poolResource{}
	_ resource.ResourceWithModifyPlan     = &poolResource{}
	_ resource.ResourceWithImportState    = &poolResource{}
)

// defaultMaxInstances is max_instances when the configuration omits it.
const defaultMaxInstances = 20

func newPoolResource() resource.Resource { return &poolResource{} }

// poolResource is ghrunner_pool: one pool of runners. Its parts each have a
// file: the launch template with the user data that installs the agent
// (pool_launch_template.go), the instance role and profile
// (pool_instance_role.go), the agent binary in S3 (pool_agent_object.go) and
// the pool config item the functions read at run time (pool_config_item.go);
// the plan-time checks are in pool_plan.go.
type poolResource struct{ configured }

func (r *poolResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_pool"
}

func (r *poolResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	ids := func(re *regexp.Regexp, what string) []validator.List {
		return []validator.List{listvalidator.SizeAtLeast(1), listvalidator.UniqueValues(),
			listvalidator.ValueStringsAre(stringvalidator.RegexMatches(re, "must be "+what))}
	}
	resp.Schema = schema.Schema{
		Description: "A pool of self-hosted runners: the launch template (IMDSv2 only, hop limit 1, instance metadata tags off) whose user data installs and starts the agent, " +
			"the instance role and profile with a least-privilege policy, the agent binary in a private S3 bucket (or a preinstalled path), " +
			"and the pool's configuration item in the state table, which the functions read at run time (changes apply without redeploying them). " +
			"Destroying a pool terminates the instances it launched. " +
			"Refresh reads every part: one deleted or changed outside Terraform reads empty in the attribute that names it (the config item: `queue_url` and `owner`; " +
			"the log group: `log_retention_days` 0), so the plan (and `terraform plan -refresh-only`) shows it and the apply makes it again. " +
			"The pool leaves the state when its table is gone, or both its config item and its launch template are.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "`<table>:<name>`.", PlanModifiers: keep},
			"name": schema.StringAttribute{Required: true, Description: "Pool name, as given in provision payloads (`pool`).", PlanModifiers: replace,
				Validators: []validator.String{stringvalidator.RegexMatches(poolNameRE, state.PoolNameRule)}},
			"table": schema.StringAttribute{Required: true, Description: "Name of the state table (`ghrunner_table.name`).", PlanModifiers: replace,
				Validators: []validator.String{stringvalidator.RegexMatches(tableNameRE, "must be 3-255 characters of A-Z a-z 0-9 _ . - (ghrunner_table.name)")}},
			"queue_url": schema.StringAttribute{Required: true, Description: "URL of the pool's queue (`ghrunner_queue.url`).",
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^https?://`), "must be the queue URL (ghrunner_queue.url), not its name")}},
			"owner": schema.StringAttribute{Required: true, Description: "GitHub organization (`acme`) or repository (`acme/api`) the runners register with. Pooled runners are reused only for the same owner.",
				Validators: []validator.String{stringvalidator.All(stringvalidator.RegexMatches(ownerRE, "must be an organization (acme) or a repository (acme/api)"),
					stringvalidator.RegexMatches(ownerOrgLenRE, "must be an organization (acme) or a repository (acme/api)"))}},
			"image_id": schema.StringAttribute{Optional: true, Computed: true, PlanModifiers: keep,
				Description: "Linux AMI with bash, curl and systemd; its architecture picks the agent binary. " +
					"Omitted: the latest image of image_family for the instance types' architecture, chosen once when the pool is created.",
				Validators: []validator.String{stringvalidator.RegexMatches(amiRE, "must be an AMI id like ami-0123456789abcdef0")}},
			"image_family": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultImageFamily),
				Description: "Without image_id: `ubuntu-24.04` (Canonical's, the default) or `al2023` (Amazon Linux 2023), from the publisher's public SSM parameter. " +
					"Changing it while image_id is unset moves the pool to that family's latest image.",
				Validators: []validator.String{stringvalidator.OneOf("ubuntu-24.04", "al2023")}},
			"instance_types": schema.ListAttribute{Required: true, ElementType: types.StringType,
				Description: "Instance types CreateFleet may launch, in order of preference (all of one architecture).",
				Validators:  ids(instTypeRE, "an instance type like c7i.large")},
			"subnet_ids": schema.ListAttribute{Required: true, ElementType: types.StringType, Description: "Subnets to launch in (several AZs give spot more capacity).",
				Validators: ids(subnetRE, "a subnet id like subnet-0123456789abcdef0")},
			"security_group_ids": schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "Security groups of the instances (egress to GitHub and AWS is all they need).",
				Validators: ids(sgRE, "a security group id like sg-0123456789abcdef0")},
			"runner_group": schema.StringAttribute{Optional: true,
				Description: "Runner group of the organization the runners join (`config.sh --runnergroup`). The group's repository access decides which " +
					"repositories can send jobs to the runners: create one that lists only the repositories of this pool. Unset: the organization's " +
					"default group, open to every repository allowed to use it (a warning at plan time for organization pools). Not for repository pools.",
				Validators: []validator.String{stringvalidator.LengthBetween(1, 255)}},
			"registration": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(state.RegistrationJIT),
				Description: "How runners are registered. `jit` (default): for every job the control plane asks GitHub for a just-in-time runner " +
					"(generate-jitconfig) and writes its single-job configuration into the instance's record; no GitHub token ever reaches the instance, " +
					"and a runner left by a dead instance takes no job. Needs the table's `stream` and the `jit` function. `token`: `config.sh` with " +
					"a registration token per run, for GitHub Enterprise Server versions without just-in-time runners (before 3.10: provision then fails saying so).",
				Validators: []validator.String{stringvalidator.OneOf(state.RegistrationJIT, state.RegistrationToken)}},
			"usage_class": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(state.UsageClassSpot),
				Description: "`spot` or `on-demand`. Default spot.", Validators: []validator.String{stringvalidator.OneOf(state.UsageClasses...)}},
			"on_demand_fallback": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				Description: "Launch on-demand for what spot capacity cannot give. Default true."},
			"max_instances": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(defaultMaxInstances),
				Description: fmt.Sprintf("Most instances the pool may have at once. Default %d.", defaultMaxInstances), Validators: []validator.Int64{int64validator.Between(1, 10000)}},
			"max_provisions_per_repository": schema.Int64Attribute{Optional: true,
				Description: "Fair share between repositories: most provisions of this pool one repository (the `repository_id` of the invoking job's OIDC token) may have in flight at once. " +
					"A provision waits inside the function, so without it one repository allowed to invoke can hold every execution of the provision function (its reserved concurrency, or the account's) and others' workflows get throttled. " +
					"Beyond it a provision is refused at once, naming this setting. With a `scale_set`, it is also the most jobs of one repository the listener acquires at a time: the others stay queued at GitHub until one of that repository's jobs ends, so another repository's job is not stuck behind a flood. " +
					"Unset: no limit, as for a single repository before. Set it below the provision function's reserved concurrency (the module checks).",
				Validators: []validator.Int64{int64validator.Between(1, state.MaxSharePerRepository)}},
			"max_queued_per_repository": schema.Int64Attribute{Optional: true,
				Description: "Fair share between repositories: most places one repository may hold in this pool's capacity queue (provisions waiting because the pool is at `max_instances`). " +
					"A provision that would take one more fails at once naming this setting (or goes on with `minInstanceCount` runners if it has them), so other repositories' runs do not queue behind it. " +
					"Unset: no limit. At most `max_provisions_per_repository` (a waiting provision is in flight).",
				Validators: []validator.Int64{int64validator.Between(1, state.MaxSharePerRepository)}},
			"root_volume_size": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(30),
				Description: "Root volume size in GiB (encrypted). Default 30. At least the image's root snapshot (refused at plan otherwise: EC2 would refuse every launch); never grown to it on its own.", Validators: []validator.Int64{int64validator.Between(8, 16384)}},
			"root_volume_type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("gp3"),
				Description: "Root volume type. Default gp3.", Validators: []validator.String{stringvalidator.OneOf("gp3", "gp2", "io1", "io2")}},
			"root_volume_iops":       rootVolumeIOPSAttribute,
			"root_volume_throughput": rootVolumeThroughputAttribute,
			"root_volume_kms_key_arn": schema.StringAttribute{Optional: true,
				Description: "Customer managed KMS key the root volume is encrypted with. Unset: the account's default EBS key for the region; when that default is a customer managed key, set it here too, so that the launching roles get the grants they need (give its ARN to the provision and refresh functions' `volume_kms_key_arns`; the module does) — without them EC2 ends every instance at launch (`Client.InternalError`). The key's policy must let the account's IAM policies use it (the default key policy does).",
				Validators:  []validator.String{stringvalidator.RegexMatches(kmsKeyARNRE, "must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)")}},
			"agent_path": schema.StringAttribute{Optional: true,
				Description: "Path of an agent preinstalled in the AMI. Unset: the provider uploads the agent it embeds to a private bucket and the instance downloads it with its role, checking its SHA-256.",
				Validators:  []validator.String{stringvalidator.RegexMatches(templates.AgentPathRE, templates.AgentPathRule)}},
			"agent_endpoint": schema.StringAttribute{Optional: true,
				Description: "AWS endpoint URL the agent uses instead of the regional ones (a VPC endpoint, or the sandbox).",
				Validators:  []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^https?://[^\s]+$`), "must be an http(s) URL")}},
			"agent_endpoints": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				Description: "Per-service endpoint URLs the agent uses (keys `dynamodb`, `ec2`, `logs`, `s3`), for interface VPC endpoints, which AWS makes one per service; a service not listed uses agent_endpoint, else its regional endpoint. The `s3` one also serves the agent's download.",
				Validators: []validator.Map{
					mapvalidator.KeysAre(stringvalidator.OneOf("dynamodb", "ec2", "logs", "s3")),
					mapvalidator.ValueStringsAre(stringvalidator.RegexMatches(regexp.MustCompile(`^https?://[^\s'"]+$`), "must be an http(s) URL")),
				}},
			"proxy":             poolProxyAttribute,
			"pre_runner_script": schema.StringAttribute{Optional: true, Description: "Script (starting with #!) run once per instance, as root, before the first registration."},
			"cleanup_script":    schema.StringAttribute{Optional: true, Description: "Script (starting with #!) run after every run, after the work folder is wiped."},
			"runner_user": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("ghrunner"),
				Description: "Unprivileged user that runs the jobs; it cannot reach the instance metadata service. Default ghrunner.",
				Validators:  []validator.String{stringvalidator.RegexMatches(templates.RunnerUserRE, templates.RunnerUserRule)}},
			"keep_docker_images": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "After every run the agent puts the instance's docker daemon back as the pre-runner script left it: containers, volumes, networks and images a run made are removed, and noted images get their names back. True keeps the images runs pulled or built (a warm cache), which trusts every run: one can leave an image under a name a later run uses. Default false."},
			"log_retention_days": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(30),
				Description: "Retention of the pool's log group, /ghrunner/<environment>/<pool>, where each instance's agent sends its own log (stream <instance id>/agent) and the user data's output (<instance id>/user-data). Default 30.",
				Validators:  []validator.Int64{int64validator.OneOf(logRetentions...)}},
			"log_group": schema.StringAttribute{Computed: true, Description: "The pool's log group: /ghrunner/<environment>/<pool>.", PlanModifiers: keep},
			"runner_version": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(runnerrelease.Latest),
				Description: "actions/runner release the pool's instances run. `latest` (the default): refresh learns actions/runner's latest release from GitHub (with its published SHA-256s) and the pool's instances move to it, idle ones between assignments, new ones at boot; GitHub stops sending jobs to a runner 30 days after the next release. A version (x.y.z, at least " + runnerrelease.Minimum + ", the lowest GitHub registers) pins it: one this provider pins (" +
					strings.Join(runnerrelease.Versions(), ", ") + "), or any with runner_tarball_url and runner_tarball_sha256 (a mirror, for air-gapped or GitHub Enterprise Server deployments, which have no actions/runner releases to follow)."},
			"runner_tarball_url": schema.StringAttribute{Optional: true, Description: "actions/runner tarball of runner_version (a mirror), downloaded instead of github.com's (needs runner_tarball_sha256).",
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^https?://[^\s]+$`), "must be an http(s) URL")}},
			"runner_tarball_sha256": schema.StringAttribute{Optional: true, Description: "SHA-256 of the runner tarball.",
				Validators: []validator.String{stringvalidator.RegexMatches(sha256HexRE, "must be 64 lowercase hex digits")}},
			"idle_windows": schema.ListNestedAttribute{Optional: true,
				Description: "Idle instances the pool keeps while a window's cron matches the current minute in its time zone: refresh pre-warms the pool up to the window's idle_count (instances launched with no run join the pool once their pre-runner script succeeded; within max_instances), scale-down trims what is beyond it; outside every window the pool keeps none.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"cron":       schema.StringAttribute{Required: true, Description: "5-field cron (minute hour day-of-month month day-of-week), e.g. `* 8-18 * * 1-5`."},
					"time_zone":  schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("UTC"), Description: "IANA time zone of the cron. Default UTC."},
					"idle_count": schema.Int64Attribute{Required: true, Description: "Idle instances to keep (and to pre-warm) while the window is active.", Validators: []validator.Int64{int64validator.AtLeast(0)}},
					"eviction_strategy": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("oldest_first"),
						Description: "Which idle instances go first: `oldest_first` or `newest_first`.", Validators: []validator.String{stringvalidator.OneOf("oldest_first", "newest_first")}},
				}}},
			"stopped": stoppedAttribute(), // pool_stopped.go
			"scale_set": schema.SingleNestedAttribute{Optional: true,
				Description: "A runner scale set the pool serves too (GitHub's runner scale set API): workflows name it in `runs-on` and need no job that invokes provision or release; " +
					"a listener holds the scale set's message session and gives each job assigned to it a warm instance of the pool. " +
					"The listener is still being built: this release writes the scale set into the pool's configuration item, and nothing serves it yet. " +
					"The scale set joins the pool's `runner_group`, and its runners are just-in-time runners: it needs `registration = \"jit\"`. " +
					"The apply refuses a name another pool of the table serves for the same owner (whatever its case); two such pools created in one apply are not caught. " +
					"Unset: the pool serves provision and release only.",
				Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true,
						Description: "The scale set's name at GitHub, the one label its runners have: the `runs-on` of the jobs it takes (labels are case-insensitive). " +
							"1-45 letters, digits, `-`, `_` or `.`, starting with a letter or digit. GitHub requires it unique within the runner group; " +
							"give each pool of one owner its own.",
						Validators: []validator.String{stringvalidator.RegexMatches(scaleSetNameRE, state.ScaleSetNameRule)}},
					"max_runners": schema.Int64Attribute{Optional: true,
						Description: "Most runners the scale set has at once, and so most instances of the pool it holds: 1 to `max_instances`. Unset: `max_instances`.",
						Validators:  []validator.Int64{int64validator.Between(1, 10000)}},
				}},
			"tags": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: tagValidators(), Description: "Tags of the launch template, role and bucket (instances carry the ghr: tags)."},

			"timings": poolTimingsAttribute(),

			"launch_template_id":      schema.StringAttribute{Computed: true, Description: "Launch template id; empty after a refresh found the template deleted outside Terraform (the apply makes one).", PlanModifiers: keep},
			"launch_template_version": schema.StringAttribute{Computed: true, Description: "Current launch template version; pooled instances of older versions are not reused."},
			"role_name":               schema.StringAttribute{Computed: true, Description: "Instance role and instance profile name: ghr-<environment>-<region>-pool-<pool>.", PlanModifiers: keep},
			"instance_role_id":        schema.StringAttribute{Computed: true, Description: "IAM's id of the instance role (AROA…). Each instance's record in the state table is keyed <instance_role_id>:<instance id>, the aws:userid of the instance's session, and the role's policy allows that key only (dynamodb:LeadingKeys): an instance reads and writes its own record and no other. A role deleted or replaced outside Terraform (a new id) reads empty after a refresh, and the next plan shows the id changing with a new template version.", PlanModifiers: keep},
			"instance_profile_arn":    schema.StringAttribute{Computed: true, Description: "Instance profile ARN; empty after a refresh found the profile deleted, or without the role (the apply makes it again).", PlanModifiers: keep},
			"agent_bucket":            schema.StringAttribute{Computed: true, Description: "Private bucket holding the agent (empty with agent_path, or after a refresh found it deleted: the apply makes one).", PlanModifiers: keep},
			"agent_sha256":            schema.StringAttribute{Computed: true, Description: "SHA-256 of the agent the instances download; a provider with a new agent shows it as a change. Empty after a refresh found the object deleted or overwritten (the apply uploads it again)."},
			"architecture":            schema.StringAttribute{Computed: true, Description: "CPU architecture of the AMI (arm64 or amd64).", PlanModifiers: keep},
			"user_data_size":          schema.Int64Attribute{Computed: true, Description: "Size of the rendered user data in bytes (EC2 allows 16384)."},
		},
	}
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
		if !plan.LaunchTemplateID.IsUnknown() || !plan.RoleName.IsUnknown() || plan.AgentBucket.ValueString() != "" {
			r.unknownToNull(&plan)
			resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		}
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
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
	if parts := driftedParts(st, poolLogGroup(r.c.environment, st.Name.ValueString())); len(parts) > 0 {
		resp.Diagnostics.AddWarning("Parts of pool "+st.Name.ValueString()+" are gone or changed outside Terraform",
			strings.Join(parts, "; ")+". The plan shows them, and terraform apply makes them again.")
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &st)...)
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

// ImportState takes `<table>:<pool>`. Scripts and agent_path cannot be read
// back from AWS (they are inside the user data) and come from the config.
func (r *poolResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	table, name, ok := strings.Cut(req.ID, ":")
	if !ok || table == "" || !poolNameRE.MatchString(name) {
		resp.Diagnostics.AddError("Invalid import id", fmt.Sprintf("%q: use <table>:<pool>, e.g. ghr-prod:linux", req.ID))
		return
	}
	m := poolModel{Table: types.StringValue(table), Name: types.StringValue(name), SecurityGroupIDs: types.ListNull(types.StringType), Tags: types.MapNull(types.StringType),
		ImageFamily:   types.StringValue(defaultImageFamily),
		IdleWindows:   types.ListNull(idleWindowType),
		ScaleSet:      types.ObjectNull(scaleSetType.AttrTypes),
		Stopped:       types.ObjectNull(stoppedTierType.AttrTypes),
		InstanceTypes: types.ListNull(types.StringType), SubnetIDs: types.ListNull(types.StringType)}
	found, err := r.read(ctx, &m)
	if err != nil || !found {
		resp.Diagnostics.AddError("Importing the pool failed", fmt.Sprintf("no pool %q in table %q (%v)", name, table, err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), m.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("table"), table)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("image_family"), defaultImageFamily)...)
}
