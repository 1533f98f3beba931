package provider

import (
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// The pool's Terraform model, the patterns its identifier attributes are
// checked against, and the fill-in of computed values a failed create left
// unknown.

type poolModel struct {
	ID               types.String `tfsdk:"id"`
	Name             types.String `tfsdk:"name"`
	Table            types.String `tfsdk:"table"`
	QueueURL         types.String `tfsdk:"queue_url"`
	Owner            types.String `tfsdk:"owner"`
	ImageID          types.String `tfsdk:"image_id"`
	ImageFamily      types.String `tfsdk:"image_family"`
	InstanceTypes    types.List   `tfsdk:"instance_types"`
	SubnetIDs        types.List   `tfsdk:"subnet_ids"`
	SecurityGroupIDs types.List   `tfsdk:"security_group_ids"`
	UsageClass       types.String `tfsdk:"usage_class"`
	OnDemandFallback types.Bool   `tfsdk:"on_demand_fallback"`
	MaxInstances     types.Int64  `tfsdk:"max_instances"`
	MaxProvisionsPR  types.Int64  `tfsdk:"max_provisions_per_repository"`
	MaxQueuedPR      types.Int64  `tfsdk:"max_queued_per_repository"`
	RootVolumeSize   types.Int64  `tfsdk:"root_volume_size"`
	RootVolumeType   types.String `tfsdk:"root_volume_type"`
	RootVolumeKMSKey types.String `tfsdk:"root_volume_kms_key_arn"`
	RootVolumeIOPS   types.Int64  `tfsdk:"root_volume_iops"`
	RootVolumeMiBps  types.Int64  `tfsdk:"root_volume_throughput"`
	AgentPath        types.String `tfsdk:"agent_path"`
	AgentEndpoint    types.String `tfsdk:"agent_endpoint"`
	AgentEndpoints   types.Map    `tfsdk:"agent_endpoints"`
	Proxy            types.Object `tfsdk:"proxy"`
	PreRunnerScript  types.String `tfsdk:"pre_runner_script"`
	CleanupScript    types.String `tfsdk:"cleanup_script"`
	RunnerUser       types.String `tfsdk:"runner_user"`
	KeepDockerImages types.Bool   `tfsdk:"keep_docker_images"`
	LogRetentionDays types.Int64  `tfsdk:"log_retention_days"`
	LogGroup         types.String `tfsdk:"log_group"`
	RunnerGroup      types.String `tfsdk:"runner_group"`
	Registration     types.String `tfsdk:"registration"`
	RunnerVersion    types.String `tfsdk:"runner_version"`
	RunnerTarballURL types.String `tfsdk:"runner_tarball_url"`
	RunnerTarballSHA types.String `tfsdk:"runner_tarball_sha256"`
	IdleWindows      types.List   `tfsdk:"idle_windows"`
	ScaleSet         types.Object `tfsdk:"scale_set"`
	Stopped          types.Object `tfsdk:"stopped"` // pool_stopped.go
	Tags             types.Map    `tfsdk:"tags"`

	// Timings is what the user decides of the pool's timings
	// (pool_timings.go); the rest is derived.
	Timings types.Object `tfsdk:"timings"`

	LaunchTemplateID      types.String `tfsdk:"launch_template_id"`
	LaunchTemplateVersion types.String `tfsdk:"launch_template_version"`
	RoleName              types.String `tfsdk:"role_name"`
	InstanceRoleID        types.String `tfsdk:"instance_role_id"`
	InstanceProfileARN    types.String `tfsdk:"instance_profile_arn"`
	AgentBucket           types.String `tfsdk:"agent_bucket"`
	AgentSHA256           types.String `tfsdk:"agent_sha256"`
	Architecture          types.String `tfsdk:"architecture"`
	UserDataSize          types.Int64  `tfsdk:"user_data_size"`
}

var (
	poolNameRE = regexp.MustCompile(state.PoolNamePattern)
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
	// scaleSetNameRE: the rule and where it comes from are at
	// state.ScaleSetNamePattern.
	scaleSetNameRE = regexp.MustCompile(state.ScaleSetNamePattern)
)

// unknownToNull gives the computed attributes a failed create did not reach
// a value, so that the partial state can be saved.
func (r *poolResource) unknownToNull(m *poolModel) {
	for _, s := range []*types.String{&m.ImageID, &m.LaunchTemplateID, &m.LaunchTemplateVersion, &m.RoleName, &m.InstanceRoleID, &m.InstanceProfileARN, &m.LogGroup, &m.AgentBucket, &m.AgentSHA256, &m.Architecture} {
		if s.IsUnknown() {
			*s = types.StringValue("")
		}
	}
	if m.UserDataSize.IsUnknown() {
		m.UserDataSize = types.Int64Value(0)
	}
}
