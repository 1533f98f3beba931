package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

// The launch template of a pool: IMDSv2 only with hop limit 1 and instance
// metadata tags off, an encrypted root volume, the instance profile, and the
// user data (templates package) that installs and starts the agent. A change
// of any of its inputs makes a new default version, and pooled instances of
// older versions are not reused.

// launchTemplateInputs lists what goes into a launch template version.
func launchTemplateInputs(m poolModel) string {
	return strings.Join([]string{m.ImageID.String(), m.SecurityGroupIDs.String(), m.RootVolumeSize.String(), m.RootVolumeType.String(), m.RootVolumeKMSKey.String(), m.RootVolumeIOPS.String(), m.RootVolumeMiBps.String(),
		m.AgentPath.String(), m.AgentEndpoint.String(), m.AgentEndpoints.String(), m.Proxy.String(), m.PreRunnerScript.String(), m.CleanupScript.String(), m.RunnerUser.String(),
		m.RunnerVersion.String(), m.RunnerTarballURL.String(), m.RunnerTarballSHA.String(), strconv.FormatInt(m.timings().HeartbeatInterval, 10), m.Tags.String(), m.RoleName.String(), m.InstanceRoleID.String(), m.LogGroup.String(), m.KeepDockerImages.String()}, "\x00")
}

// ensureTemplate makes the pool's launch template on create, or a new default
// version of it when its inputs changed, and records both in plan.
func (r *poolResource) ensureTemplate(ctx context.Context, plan, prior *poolModel, image imageInfo, profileARN string, agent agentObject, tags map[string]string) diag.Diagnostics {
	var diags diag.Diagnostics
	userData, err := r.userData(*plan, image.arch, plan.Table.ValueString(), r.c.aws.AWS.Region, agent.sha256, agent.url)
	if err != nil {
		diags.AddError("Invalid user data settings", err.Error())
		return diags
	}
	plan.UserDataSize = types.Int64Value(int64(len(userData)))
	data := r.templateData(ctx, *plan, image, profileARN, userData, tags)
	if prior == nil || prior.LaunchTemplateID.ValueString() == "" {
		id, version, err := r.createTemplate(ctx, r.name(*plan), data, tags)
		if err != nil {
			diags.AddError("Creating the launch template failed", err.Error())
			return diags
		}
		plan.LaunchTemplateID, plan.LaunchTemplateVersion = types.StringValue(id), types.StringValue(version)
		return diags
	}
	plan.LaunchTemplateID = prior.LaunchTemplateID
	plan.LaunchTemplateVersion = prior.LaunchTemplateVersion
	if launchTemplateInputs(*plan) != launchTemplateInputs(*prior) || agent.sha256 != prior.AgentSHA256.ValueString() {
		version, err := r.newTemplateVersion(ctx, plan.LaunchTemplateID.ValueString(), data)
		if err != nil {
			diags.AddError("Updating the launch template failed", err.Error())
			return diags
		}
		plan.LaunchTemplateVersion = types.StringValue(version)
	}
	return diags
}

// userData renders the user data of m's instances, whose architecture is
// arch (amd64 or arm64).
func (r *poolResource) userData(m poolModel, arch, table, region, sum, agentURL string) ([]byte, error) {
	agent := config.Defaults()
	agent.Table, agent.Region, agent.RoleID, agent.LogGroup = table, region, m.InstanceRoleID.ValueString(), m.LogGroup.ValueString()
	agent.Endpoint = m.AgentEndpoint.ValueString()
	if !m.AgentEndpoints.IsNull() && !m.AgentEndpoints.IsUnknown() {
		agent.Endpoints = map[string]string{}
		for k, v := range m.AgentEndpoints.Elements() {
			if sv, ok := v.(types.String); ok {
				agent.Endpoints[k] = sv.ValueString()
			}
		}
	}
	agent.Proxy = m.proxy()
	agent.RunnerTarballURL, agent.RunnerTarballSHA256 = m.RunnerTarballURL.ValueString(), m.RunnerTarballSHA.ValueString()
	if agent.RunnerTarballURL == "" {
		version := m.RunnerVersion.ValueString()
		if version == "" || version == runnerrelease.Latest {
			// "" : configuration before the plan's default, or state from a
			// release without runner_version. "latest": the control plane
			// writes the release to install into each instance's record;
			// this pinned one is what an agent installs when its record
			// names none yet.
			version = runnerrelease.Default
		}
		var err error
		if agent.RunnerTarballURL, agent.RunnerTarballSHA256, err = runnerrelease.Tarball(version, arch); err != nil {
			return nil, err
		}
	}
	agent.KeepDockerImages = m.KeepDockerImages.ValueBool()
	if hb := m.timings().HeartbeatInterval; hb > 0 {
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

// imageNotFound says DescribeImages answered that the image does not exist
// for this account: EC2's InvalidAMIID.NotFound, or .Malformed and
// .Unavailable for an id that cannot name one (EC2 API Reference, "Error
// codes").
func imageNotFound(err error) bool {
	return awserr.IsNotFound(err) || strings.HasPrefix(awserr.Code(err), "InvalidAMIID.")
}

type imageInfo struct {
	arch, rootDevice string
	// The root device's snapshot and its size in GiB (0: unknown).
	rootSnapshot     string
	rootSnapshotSize int64
}

// image checks that id is a Linux AMI of an architecture the agent is built
// for, and finds its root device.
func (r *poolResource) image(ctx context.Context, id string) (imageInfo, error) {
	out, err := r.c.aws.EC2().DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}})
	if err != nil && !imageNotFound(err) {
		// Access denied, throttling, a network error: the image may well
		// exist, and "not found" would send the user the wrong way.
		return imageInfo{}, fmt.Errorf("image_id %q: could not be read (DescribeImages): %w", id, err)
	}
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
	info := imageInfo{arch: arch, rootDevice: root}
	info.rootSnapshot, info.rootSnapshotSize = rootSnapshot(img, root)
	return info, nil
}

func (r *poolResource) templateData(ctx context.Context, m poolModel, img imageInfo, profileARN string, userData []byte, tags map[string]string) *ec2types.RequestLaunchTemplateData {
	var sgs []string
	m.SecurityGroupIDs.ElementsAs(ctx, &sgs, false)
	root := &ec2types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(int32(m.RootVolumeSize.ValueInt64())),
		VolumeType: ec2types.VolumeType(m.RootVolumeType.ValueString()), Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true),
		KmsKeyId: m.RootVolumeKMSKey.ValueStringPointer()}
	ebsPerformance(root, m)
	return &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String(m.ImageID.ValueString()),
		UserData:           aws.String(base64.StdEncoding.EncodeToString(userData)),
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Arn: aws.String(profileARN)},
		SecurityGroupIds:   sgs,
		// A job that powers the machine off ends the instance: stopped, it
		// would go on costing its volume and hold a pool slot.
		InstanceInitiatedShutdownBehavior: ec2types.ShutdownBehaviorTerminate,
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
			HttpTokens:              ec2types.LaunchTemplateHttpTokensStateRequired,
			HttpPutResponseHopLimit: aws.Int32(1),
			// Off: nothing reads tags from the metadata service, and with
			// them on EC2 refuses any launch whose instance tags have a key
			// beyond letters, digits and + - = . , _ : @ (a "/" or a space
			// in a default tag broke every launch).
			InstanceMetadataTags: ec2types.LaunchTemplateInstanceMetadataTagsStateDisabled,
		},
		BlockDeviceMappings: []ec2types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String(img.rootDevice), Ebs: root}},
		// What a launch creates besides the instance carries the pool's
		// tags from the start (the provision role may only create what is
		// tagged with its environment). Never spot-instances-request: EC2
		// refuses every on-demand launch from a template that tags one
		// ("You cannot specify tags for Spot instances requests if there
		// are no Spot instances requests being created by the request"),
		// and an instant fleet's spot requests cannot be tagged otherwise.
		TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: ec2types.ResourceTypeVolume, Tags: ec2Tags(tags)},
			{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: ec2Tags(tags)},
		},
	}
}

func (r *poolResource) createTemplate(ctx context.Context, name string, data *ec2types.RequestLaunchTemplateData, tags map[string]string) (string, string, error) {
	out, err := r.c.aws.EC2().CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: data,
		VersionDescription: aws.String("ghrunner"),
		TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: ec2Tags(tags)}}})
	if awserr.IsAlreadyExists(err) {
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

// getTemplate returns the data of the template's default version, or nil
// when the template is gone.
func (r *poolResource) getTemplate(ctx context.Context, id string) (*ec2types.ResponseLaunchTemplateData, error) {
	lt, err := r.c.aws.EC2().DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(id), Versions: []string{"$Default"}})
	if templateGone(err) || (err == nil && len(lt.LaunchTemplateVersions) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return lt.LaunchTemplateVersions[0].LaunchTemplateData, nil
}

// setFromTemplate refreshes m from the template's default version.
func (r *poolResource) setFromTemplate(ctx context.Context, m *poolModel, data *ec2types.ResponseLaunchTemplateData) error {
	m.ImageID = types.StringValue(aws.ToString(data.ImageId))
	if len(data.SecurityGroupIds) > 0 || !m.SecurityGroupIDs.IsNull() {
		m.SecurityGroupIDs, _ = types.ListValueFrom(ctx, types.StringType, data.SecurityGroupIds)
	}
	if len(data.BlockDeviceMappings) > 0 && data.BlockDeviceMappings[0].Ebs != nil {
		ebs := data.BlockDeviceMappings[0].Ebs
		m.RootVolumeSize = types.Int64Value(int64(aws.ToInt32(ebs.VolumeSize)))
		m.RootVolumeType = types.StringValue(string(ebs.VolumeType))
		m.RootVolumeKMSKey = optional(aws.ToString(ebs.KmsKeyId))
		m.RootVolumeIOPS, m.RootVolumeMiBps = optionalInt32(ebs.Iops), optionalInt32(ebs.Throughput)
	}
	if err := r.readUserData(ctx, m, data); err != nil {
		return err
	}
	if data.IamInstanceProfile != nil {
		m.InstanceProfileARN = types.StringValue(aws.ToString(data.IamInstanceProfile.Arn))
		m.RoleName = types.StringValue(roleNameOf(aws.ToString(data.IamInstanceProfile.Arn)))
	}
	return nil
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
	m.InstanceRoleID, m.LogGroup = types.StringValue(u.Agent.RoleID), types.StringValue(u.Agent.LogGroup)
	m.KeepDockerImages = types.BoolValue(u.Agent.KeepDockerImages)
	m.AgentPath, m.AgentEndpoint = optional(u.AgentPath), optional(u.Agent.Endpoint)
	m.AgentEndpoints = types.MapNull(types.StringType)
	if len(u.Agent.Endpoints) > 0 {
		m.AgentEndpoints, _ = types.MapValueFrom(ctx, types.StringType, u.Agent.Endpoints)
	}
	m.Proxy = proxyValue(ctx, u.Agent.Proxy)
	m.AgentSHA256 = types.StringValue(u.AgentSHA256)
	m.AgentBucket = types.StringValue(bucketOf(u.AgentURL))
	if m.Architecture.ValueString() == "" {
		img, err := r.image(ctx, aws.ToString(data.ImageId))
		if err != nil {
			return err
		}
		m.Architecture = types.StringValue(img.arch)
	}
	m.RunnerVersion, m.RunnerTarballURL, m.RunnerTarballSHA = runnerSource(m.RunnerVersion, m.Architecture.ValueString(), u.Agent.RunnerTarballURL, u.Agent.RunnerTarballSHA256)
	return nil
}

// runnerSource reads back where the user data downloads the runner from: a
// release this provider pins (runner_version, the tarball attributes unset)
// or a tarball of the pool's own (runner_version left as it was: ignored).
func runnerSource(version types.String, arch, url, sum string) (types.String, types.String, types.String) {
	for _, v := range runnerrelease.Versions() {
		if u, s, err := runnerrelease.Tarball(v, arch); err == nil && u == url && s == sum {
			if version.ValueString() == runnerrelease.Latest {
				return version, types.StringNull(), types.StringNull() // the fallback of "latest"
			}
			return types.StringValue(v), types.StringNull(), types.StringNull()
		}
	}
	return version, optional(url), optional(sum)
}

// optional maps "" to null, as an unset optional attribute reads.
func optional(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// deleteTemplate deletes the launch template; one already gone is fine.
func (r *poolResource) deleteTemplate(ctx context.Context, id string) error {
	_, err := r.c.aws.EC2().DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: aws.String(id)})
	if err != nil && !templateGone(err) {
		return err
	}
	return nil
}

// templateGone reads an error about the pool's own template, addressed by
// the id the pool recorded, as "the template is gone": EC2 says so with
// InvalidLaunchTemplateId.NotFound, and any other InvalidLaunchTemplate…
// code (a malformed id, no default version) equally means there is no
// template of that id to read or delete.
func templateGone(err error) bool {
	return awserr.IsNotFound(err) || strings.HasPrefix(awserr.Code(err), "InvalidLaunchTemplate")
}
