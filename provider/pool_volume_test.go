package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Issue 37, items 2 and 3: a root volume EC2 would refuse at every launch
// is refused at plan, naming the attribute and the rule.

func volume(typ string, size, iops, mibps int64) poolModel {
	m := poolModel{RootVolumeType: types.StringValue(typ), RootVolumeSize: types.Int64Value(size), RootVolumeIOPS: types.Int64Null(), RootVolumeMiBps: types.Int64Null()}
	if iops > 0 {
		m.RootVolumeIOPS = types.Int64Value(iops)
	}
	if mibps > 0 {
		m.RootVolumeMiBps = types.Int64Value(mibps)
	}
	return m
}

func TestRootVolumeIOPSAndThroughputFollowEC2sRulesPerType(t *testing.T) {
	for _, c := range []struct {
		name string
		m    poolModel
		want string // "" accepted; else the attribute, then the rule
	}{
		{"gp3 plain", volume("gp3", 30, 0, 0), ""},
		{"gp3 fast", volume("gp3", 160, 80000, 2000), ""},
		{"gp3 below 3000", volume("gp3", 30, 2000, 0), "root_volume_iops (2000) must be 3000-80000 for root_volume_type gp3"},
		{"gp3 above 500 per GiB", volume("gp3", 30, 16000, 0), "root_volume_iops (16000) must be at most 500 per GiB of root_volume_size for gp3: 15000 for 30 GiB"},
		{"gp3 throughput above a quarter of the default IOPS", volume("gp3", 30, 0, 1000), "root_volume_throughput (1000 MiB/s) must be at most a quarter of the volume's IOPS (3000): 750 MiB/s"},
		{"gp3 throughput within a quarter of its IOPS", volume("gp3", 30, 4000, 1000), ""},
		{"io1 without iops", volume("io1", 30, 0, 0), "root_volume_iops must be set for root_volume_type io1 (100-64000)"},
		{"io2 without iops", volume("io2", 30, 0, 0), "root_volume_iops must be set for root_volume_type io2 (100-256000)"},
		{"io1 above 50 per GiB", volume("io1", 30, 2000, 0), "at most 50 per GiB of root_volume_size for io1: 1500 for 30 GiB"},
		{"io2 above 64000", volume("io2", 300, 100000, 0), ""},
		{"io1 above 64000", volume("io1", 2000, 70000, 0), "root_volume_iops (70000) must be 100-64000 for root_volume_type io1"},
		{"io2 with throughput", volume("io2", 30, 3000, 500), "root_volume_throughput applies to gp3 volumes only, not io2"},
		{"gp2 with iops", volume("gp2", 30, 3000, 0), "root_volume_iops applies to gp3, io1 and io2 volumes only, not gp2"},
	} {
		diags := validateRootVolume(c.m)
		switch {
		case c.want == "" && diags.HasError():
			t.Errorf("%s: refused: %v", c.name, diags)
		case c.want != "" && (!diags.HasError() || !strings.Contains(diags[0].Detail(), c.want)):
			t.Errorf("%s: %v, want an error holding %q", c.name, diags, c.want)
		}
	}
}

// The settings reach the launch template (and so each launch); unset, the
// template leaves them to EC2.
func TestARootVolumesIOPSAndThroughputReachItsTemplate(t *testing.T) {
	r := &poolResource{configured{c: &clients{}}}
	m := volume("gp3", 30, 6000, 500)
	m.ImageID, m.SecurityGroupIDs = types.StringValue("ami-12345678"), types.ListNull(types.StringType)
	img := imageInfo{arch: "amd64", rootDevice: "/dev/sda1"}
	ebs := r.templateData(t.Context(), m, img, "p", nil, nil).BlockDeviceMappings[0].Ebs
	if aws.ToInt32(ebs.Iops) != 6000 || aws.ToInt32(ebs.Throughput) != 500 {
		t.Fatalf("root volume %+v, want 6000 IOPS and 500 MiB/s", ebs)
	}
	m = volume("io2", 30, 3000, 0)
	m.ImageID, m.SecurityGroupIDs = types.StringValue("ami-12345678"), types.ListNull(types.StringType)
	ebs = r.templateData(t.Context(), m, img, "p", nil, nil).BlockDeviceMappings[0].Ebs
	if ebs.VolumeType != "io2" || aws.ToInt32(ebs.Iops) != 3000 || ebs.Throughput != nil {
		t.Fatalf("root volume %+v, want io2 with 3000 IOPS and no throughput", ebs)
	}
	if launchTemplateInputs(m) == launchTemplateInputs(volume("io2", 30, 4000, 0)) {
		t.Error("a change of IOPS makes no new template version")
	}
}

// At plan, with the provider's AWS: the volume rules above, and a root
// volume smaller than the image's root snapshot (moto's images have 15 GiB
// ones), naming the attribute, the image, the snapshot's size and the
// configured one.
func TestAccPool_badRootVolume(t *testing.T) {
	f := newPoolFixture(t)
	set := func(attrs string) string { return f.config(attrs) }
	runBadAttrs(t, []badAttr{
		{"io2 without iops", set(`root_volume_type = "io2"`), attrError("root_volume_iops", "must be set for root_volume_type io2")},
		{"gp2 with iops", set("root_volume_type = \"gp2\"\n  root_volume_iops = 3000"), attrError("root_volume_iops", "applies to gp3, io1 and io2 volumes only, not gp2")},
		{"iops of 50", set(`root_volume_iops = 50`), attrError("root_volume_iops", "value must be between 100 and 256000")},
		{"throughput of 3000", set(`root_volume_throughput = 3000`), attrError("root_volume_throughput", "value must be between 125 and 2000")},
		{"io1 with throughput", set("root_volume_type = \"io1\"\n  root_volume_iops = 1000\n  root_volume_throughput = 250"), attrError("root_volume_throughput", "applies to gp3 volumes only, not io1")},
		{"root volume below the snapshot", set(`root_volume_size = 10`),
			`root_volume_size(.|\n)*10\s+GiB(.|\n)*snap-[0-9a-f]+\s+of\s+image\s+` + regexp.QuoteMeta(f.ami) + `\s+\(15\s+GiB\)(.|\n)*at\s+least\s+15`},
	})
}

// checkRootVolume asserts the type and IOPS of the template's root volume.
func (f poolFixture) checkRootVolume(typ string, iops int32) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		id := s.RootModule().Resources["ghrunner_pool.linux"].Primary.Attributes["launch_template_id"]
		lt, err := env.Config(&testing.T{}).EC2().DescribeLaunchTemplateVersions(context.Background(), &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(id), Versions: []string{"$Default"}})
		if err != nil || len(lt.LaunchTemplateVersions) != 1 {
			return fmt.Errorf("template %s: %v", id, err)
		}
		ebs := lt.LaunchTemplateVersions[0].LaunchTemplateData.BlockDeviceMappings[0].Ebs
		if string(ebs.VolumeType) != typ || aws.ToInt32(ebs.Iops) != iops || ebs.Throughput != nil {
			return fmt.Errorf("root volume %s with %d IOPS, throughput %v; want %s with %d", ebs.VolumeType, aws.ToInt32(ebs.Iops), ebs.Throughput, typ, iops)
		}
		return nil
	}
}

// The cost report prices a pool's EBS by the root volume its config item
// carries (issue 41 item 2).
func TestAPoolsConfigItemCarriesItsRootVolumeForTheCostReport(t *testing.T) {
	m := timingsPool(types.ObjectNull(poolTimingsType.AttrTypes))
	m.RootVolumeSize, m.RootVolumeType = types.Int64Value(40), types.StringValue("io2")
	cfg, diags := poolConfigOf(t.Context(), m)
	if diags.HasError() {
		t.Fatal(diags)
	}
	if cfg.RootVolume == nil || *cfg.RootVolume != (state.RootVolume{GiB: 40, Type: "io2"}) {
		t.Fatalf("config item root volume = %+v, want 40 GiB io2", cfg.RootVolume)
	}
}
