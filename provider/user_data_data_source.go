package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

var _ datasource.DataSource = &userDataSource{}

func newUserDataSource() datasource.DataSource { return &userDataSource{} }

// userDataSource is data ghrunner_user_data: it renders the EC2 user data
// that installs and starts the agent (templates package). It calls no AWS
// API, so it takes nothing from the provider.
type userDataSource struct{}

type userDataModel struct {
	Table             types.String `tfsdk:"table"`
	InstanceRoleID    types.String `tfsdk:"instance_role_id"`
	Region            types.String `tfsdk:"region"`
	AgentPath         types.String `tfsdk:"agent_path"`
	AgentURL          types.String `tfsdk:"agent_url"`
	AgentSHA256       types.String `tfsdk:"agent_sha256"`
	PreRunnerScript   types.String `tfsdk:"pre_runner_script"`
	CleanupScript     types.String `tfsdk:"cleanup_script"`
	RunnerUser        types.String `tfsdk:"runner_user"`
	RunnerVersion     types.String `tfsdk:"runner_version"`
	Architecture      types.String `tfsdk:"architecture"`
	RunnerTarballURL  types.String `tfsdk:"runner_tarball_url"`
	RunnerTarballSHA  types.String `tfsdk:"runner_tarball_sha256"`
	HeartbeatInterval types.String `tfsdk:"heartbeat_interval"`
	KeepDockerImages  types.Bool   `tfsdk:"keep_docker_images"`
	Rendered          types.String `tfsdk:"rendered"`
	Size              types.Int64  `tfsdk:"size"`
}

func (d *userDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_user_data"
}

func (d *userDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	opt := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, Description: desc}
	}
	resp.Schema = schema.Schema{
		Description: "Renders the EC2 user data that installs the ghrunner agent and starts it under systemd. Scripts travel as base64; the result is at most 16 KB.",
		Attributes: map[string]schema.Attribute{
			"table":                 schema.StringAttribute{Required: true, Description: "The state table the agent reads its record from."},
			"instance_role_id":      opt("The id (AROA…) of the instance role the instances run with, e.g. ghrunner_pool.instance_role_id: the agent's record is keyed <instance_role_id>:<instance id>, the only key a ghrunner instance role lets it touch."),
			"region":                opt("Region of the S3 download's signature (required with agent_url)."),
			"agent_path":            opt("A preinstalled agent binary in the AMI; or use agent_url."),
			"agent_url":             opt("The agent's S3 object URL, downloaded with the instance role and checked against agent_sha256."),
			"agent_sha256":          opt("SHA-256 of the agent binary (64 lowercase hex digits)."),
			"pre_runner_script":     opt("Runs once per instance before the first registration."),
			"cleanup_script":        opt("Runs after every run, after the work folder is wiped."),
			"runner_user":           opt("Unprivileged user that runs the jobs (default ghrunner)."),
			"runner_version":        opt("An actions/runner release this provider pins (" + strings.Join(runnerrelease.Versions(), ", ") + "): the agent downloads it from github.com at boot and checks the SHA-256 published with the release. Unset: the runner is in the AMI, or comes from runner_tarball_url."),
			"architecture":          opt("The instances' CPU architecture for runner_version's download: amd64 (default) or arm64."),
			"runner_tarball_url":    opt("Runner software tarball, when the AMI has none (overrides runner_version)."),
			"runner_tarball_sha256": opt("SHA-256 of the runner tarball."),
			"heartbeat_interval":    opt("Agent heartbeat interval, a Go duration such as 15s."),
			"keep_docker_images":    schema.BoolAttribute{Optional: true, Description: "Keep the docker images runs pulled or built (a warm cache, and a trust: see ghrunner_pool); default false."},
			"rendered":              schema.StringAttribute{Computed: true, Description: "The user data script."},
			"size":                  schema.Int64Attribute{Computed: true, Description: "Size of the user data in bytes (EC2 allows 16384)."},
		},
	}
}

func (d *userDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m userDataModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	agent := config.Defaults()
	agent.Table, agent.RoleID = m.Table.ValueString(), m.InstanceRoleID.ValueString()
	agent.KeepDockerImages = m.KeepDockerImages.ValueBool()
	agent.RunnerTarballURL, agent.RunnerTarballSHA256 = m.RunnerTarballURL.ValueString(), m.RunnerTarballSHA.ValueString()
	if v := m.RunnerVersion.ValueString(); v != "" && agent.RunnerTarballURL == "" {
		arch := m.Architecture.ValueString()
		if arch == "" {
			arch = "amd64"
		}
		if arch != "amd64" && arch != "arm64" {
			resp.Diagnostics.AddAttributeError(path.Root("architecture"), "Invalid architecture", fmt.Sprintf("architecture: %q is not amd64 or arm64", arch))
			return
		}
		var err error
		if agent.RunnerTarballURL, agent.RunnerTarballSHA256, err = runnerrelease.Tarball(v, arch); err != nil {
			resp.Diagnostics.AddAttributeError(path.Root("runner_version"), "Runner version not pinned", err.Error())
			return
		}
	}
	if v := m.HeartbeatInterval.ValueString(); v != "" {
		dur, err := time.ParseDuration(v)
		if err != nil {
			resp.Diagnostics.AddError("Invalid heartbeat_interval", "heartbeat_interval: "+err.Error()+" (use a duration such as 15s)")
			return
		}
		agent.HeartbeatInterval = config.Duration{Duration: dur}
	}
	out, err := templates.Render(templates.UserData{
		Agent: agent, AgentPath: m.AgentPath.ValueString(), AgentURL: m.AgentURL.ValueString(), AgentSHA256: m.AgentSHA256.ValueString(),
		Region: m.Region.ValueString(), PreRunnerScript: m.PreRunnerScript.ValueString(), CleanupScript: m.CleanupScript.ValueString(),
		RunnerUser: m.RunnerUser.ValueString(),
	})
	if err != nil {
		resp.Diagnostics.AddError("Invalid user data settings", err.Error())
		return
	}
	m.Rendered, m.Size = types.StringValue(string(out)), types.Int64Value(int64(len(out)))
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
