package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

// Issue 30, item 14: real interface VPC endpoints are one per service. A
// pool's agent_endpoints reach the agent's configuration service by
// service, and the S3 one serves the agent's download (virtual hosted, and
// signed for the endpoint's region).
func TestAPoolsPerServiceEndpointsReachTheAgentAndItsDownload(t *testing.T) {
	r := &poolResource{configured{c: &clients{}}}
	eps, _ := types.MapValueFrom(t.Context(), types.StringType, map[string]string{
		"s3":       "https://vpce-0a1b2c3d4e5f6a7b8-abcdefgh.s3.eu-west-1.vpce.amazonaws.com",
		"dynamodb": "https://vpce-0a1b2c3d4e5f6a7b9-ijklmnop.dynamodb.eu-west-1.vpce.amazonaws.com",
	})
	m := poolModel{AgentEndpoints: eps, AgentEndpoint: types.StringNull(), AgentPath: types.StringNull(), RunnerUser: types.StringValue("ghrunner"),
		PreRunnerScript: types.StringNull(), CleanupScript: types.StringNull(), RunnerVersion: types.StringNull(), RunnerTarballURL: types.StringNull(),
		RunnerTarballSHA: types.StringNull(), InstanceRoleID: types.StringValue("AROAPOOLENDPOINTS0001"), LogGroup: types.StringValue("/ghrunner/prod/linux")}
	url := r.objectURL(m, "ghr-prod-agent-1", "agent/abc/ghrunner-agent")
	if want := "https://ghr-prod-agent-1.vpce-0a1b2c3d4e5f6a7b8-abcdefgh.s3.eu-west-1.vpce.amazonaws.com/agent/abc/ghrunner-agent"; url != want {
		t.Fatalf("agent URL %s, want %s", url, want)
	}
	raw, err := r.userData(m, "amd64", "ghr-state", "eu-west-1", "0000000000000000000000000000000000000000000000000000000000000000", url)
	if err != nil {
		t.Fatal(err)
	}
	u, err := templates.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if u.AgentURL != url || u.Agent.Endpoints["dynamodb"] != "https://vpce-0a1b2c3d4e5f6a7b9-ijklmnop.dynamodb.eu-west-1.vpce.amazonaws.com" || len(u.Agent.Endpoints) != 2 {
		t.Fatalf("user data: agent URL %s, endpoints %v", u.AgentURL, u.Agent.Endpoints)
	}
}

// Issue 30, item 8: a pool's root volume key reaches the template (and so
// each launch); unset, EC2 uses the account's default EBS key.
func TestAPoolsRootVolumeKeyReachesItsTemplate(t *testing.T) {
	r := &poolResource{configured{c: &clients{}}}
	key := "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	m := poolModel{ImageID: types.StringValue("ami-12345678"), SecurityGroupIDs: types.ListNull(types.StringType), RootVolumeSize: types.Int64Value(30),
		RootVolumeType: types.StringValue("gp3"), RootVolumeKMSKey: types.StringValue(key)}
	data := r.templateData(t.Context(), m, imageInfo{arch: "amd64", rootDevice: "/dev/sda1"}, "arn:aws:iam::123456789012:instance-profile/p", []byte("#!/bin/bash"), nil)
	if ebs := data.BlockDeviceMappings[0].Ebs; ebs == nil || ebs.KmsKeyId == nil || *ebs.KmsKeyId != key || !*ebs.Encrypted {
		t.Fatalf("root volume %+v, want encrypted with %s", ebs, key)
	}
	m.RootVolumeKMSKey = types.StringNull()
	if ebs := r.templateData(t.Context(), m, imageInfo{arch: "amd64", rootDevice: "/dev/sda1"}, "p", nil, nil).BlockDeviceMappings[0].Ebs; ebs.KmsKeyId != nil {
		t.Fatalf("no key set, yet the template names %s", *ebs.KmsKeyId)
	}
}
