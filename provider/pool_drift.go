package provider

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Drift of a pool: Read looks at every object the pool owns. The pool is
// gone (Read removes it from state) when its table is, or when both its
// config item and its launch template are: nothing then names the pool to
// the control plane. A part gone or changed outside Terraform shows in the
// state as its identity read empty, so that the plan shows a change and
// the apply makes the part again (ModifyPlan marks what the apply sets):
//
//   - config item gone: queue_url and owner read "" (the apply writes the
//     item again, as it always does);
//   - launch template gone: launch_template_id reads "" (the apply makes a
//     template, with a new version);
//   - instance role gone or replaced (a new id): instance_role_id reads ""
//     (the apply makes or takes the role, and a template version carries
//     its id);
//   - instance profile gone, or without the role: instance_profile_arn reads
//     "" (the apply makes the profile and puts the role in it);
//   - agent object gone or changed: agent_sha256 reads "" (the apply uploads
//     it again, with a template version); its bucket gone: agent_bucket
//     reads "" too (the apply makes a bucket);
//   - log group gone: log_retention_days reads 0 (the apply makes it).

// read refreshes m from AWS; it reports false when the pool is gone.
func (r *poolResource) read(ctx context.Context, m *poolModel) (bool, error) {
	table := m.Table.ValueString()
	cfg, err := state.New(r.c.aws.DynamoDB(), table).GetPoolConfig(ctx, m.Name.ValueString())
	switch {
	case awserr.IsNotFound(err):
		return false, nil // the table is gone, and the pool with it
	case state.IsNotFound(err):
		cfg = nil
	case err != nil:
		return false, err
	}
	templateID := m.LaunchTemplateID.ValueString()
	if cfg != nil {
		templateID = cfg.LaunchTemplateID
	}
	var data *ec2types.ResponseLaunchTemplateData
	if templateID != "" {
		if data, err = r.getTemplate(ctx, templateID); err != nil {
			return false, err
		}
	}
	if cfg == nil && data == nil {
		return false, nil
	}
	if cfg != nil {
		m.setFromConfigItem(ctx, table, cfg)
	} else {
		m.QueueURL, m.Owner = types.StringValue(""), types.StringValue("")
	}
	if data == nil {
		m.LaunchTemplateID = types.StringValue("")
	} else if err := r.setFromTemplate(ctx, m, data); err != nil {
		return false, err
	}
	if err := r.readInstanceRole(ctx, m); err != nil {
		return false, err
	}
	if err := r.readAgentObject(ctx, m); err != nil {
		return false, err
	}
	// The log group deleted reads as retention 0.
	days, _, err := r.c.logRetention(ctx, poolLogGroup(r.c.environment, m.Name.ValueString()))
	if err != nil {
		return false, err
	}
	m.LogRetentionDays = types.Int64Value(days)
	return true, nil
}

// readInstanceRole checks that the role the template's profile names is
// there with the id the user data carries, and that its profile holds it.
func (r *poolResource) readInstanceRole(ctx context.Context, m *poolModel) error {
	name := m.RoleName.ValueString()
	if name == "" {
		return nil
	}
	role, err := r.findRole(ctx, name)
	switch {
	case awserr.IsNotFound(err):
		m.InstanceRoleID = types.StringValue("")
	case err != nil:
		return err
	case aws.ToString(role.RoleId) != m.InstanceRoleID.ValueString():
		m.InstanceRoleID = types.StringValue("") // replaced: same name, another id
	}
	prof, err := r.findInstanceProfile(ctx, name)
	switch {
	case awserr.IsNotFound(err):
		m.InstanceProfileARN = types.StringValue("")
	case err != nil:
		return err
	case !slices.ContainsFunc(prof.Roles, func(ro iamtypes.Role) bool { return aws.ToString(ro.RoleName) == name }):
		m.InstanceProfileARN = types.StringValue("") // the role was taken out of it
	}
	return nil
}

// readAgentObject checks that the agent the user data downloads is in its
// bucket, with the content the provider uploaded when it still embeds it.
func (r *poolResource) readAgentObject(ctx context.Context, m *poolModel) error {
	bucket, sum := m.AgentBucket.ValueString(), m.AgentSHA256.ValueString()
	if !m.AgentPath.IsNull() || bucket == "" || sum == "" {
		return nil
	}
	obj, err := r.findAgentObject(ctx, bucket, agentKey(sum))
	if awserr.IsNotFound(err) {
		m.AgentSHA256 = types.StringValue("")
		if _, err := admin.S3(r.c.aws).HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); awserr.IsNotFound(err) {
			m.AgentBucket = types.StringValue("")
		} else if err != nil {
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	// A single-part upload's ETag is the MD5 of its content: an object
	// overwritten with other bytes under the same key is drift too.
	if a, err := agentAsset(m.Architecture.ValueString()); err == nil && a.sha256Hex == sum {
		want := md5.Sum(a.data)
		if strings.Trim(aws.ToString(obj.ETag), `"`) != hex.EncodeToString(want[:]) {
			m.AgentSHA256 = types.StringValue("")
		}
	}
	return nil
}

// agentKey is the agent object's key in the pool's bucket.
func agentKey(sha256Hex string) string { return "agent/" + sha256Hex + "/ghrunner-agent" }

// findRole reads the role name; IAM's NoSuchEntity (awserr.IsNotFound)
// when there is none.
func (r *poolResource) findRole(ctx context.Context, name string) (*iamtypes.Role, error) {
	got, err := admin.IAM(r.c.aws).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	return got.Role, nil
}

// findInstanceProfile reads the instance profile name; NoSuchEntity when
// there is none.
func (r *poolResource) findInstanceProfile(ctx context.Context, name string) (*iamtypes.InstanceProfile, error) {
	got, err := admin.IAM(r.c.aws).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	return got.InstanceProfile, nil
}

// findAgentObject reads the agent object's metadata; S3's NotFound when the
// object (or its bucket) is gone.
func (r *poolResource) findAgentObject(ctx context.Context, bucket, key string) (*s3.HeadObjectOutput, error) {
	return admin.S3(r.c.aws).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
}

// driftedParts names the parts read reported gone or changed in m, for a
// warning beside the plan's changes.
func driftedParts(m poolModel, logGroup string) []string {
	var parts []string
	add := func(gone bool, part string) {
		if gone {
			parts = append(parts, part)
		}
	}
	add(m.QueueURL.ValueString() == "" && m.Owner.ValueString() == "", "the pool config item (in table "+m.Table.ValueString()+")")
	add(m.LaunchTemplateID.ValueString() == "", "the launch template")
	add(m.RoleName.ValueString() != "" && m.InstanceRoleID.ValueString() == "", "the instance role "+m.RoleName.ValueString()+" (deleted, or replaced by one with another id)")
	add(m.RoleName.ValueString() != "" && m.InstanceProfileARN.ValueString() == "", "the instance profile "+m.RoleName.ValueString()+" (deleted, or without the role)")
	agent := m.AgentPath.IsNull()
	add(agent && m.AgentBucket.ValueString() == "", "the agent bucket")
	add(agent && m.AgentBucket.ValueString() != "" && m.AgentSHA256.ValueString() == "", "the agent object in bucket "+m.AgentBucket.ValueString()+" (deleted or overwritten)")
	add(m.LogRetentionDays.ValueInt64() == 0, "the log group "+logGroup)
	return parts
}
