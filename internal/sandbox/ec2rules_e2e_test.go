package sandbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
)

// launchRulesRefuseWhatEC2Refuses: the endpoint refuses the launches EC2
// refuses and moto makes (ec2rules.go), whatever made the template. An
// on-demand instant fleet from a template that tags spot-instances-request
// gets EC2's error for each override and no instance (issue 30, blocker 1;
// the product's templates no longer tag one, so this is asked directly).
func launchRulesRefuseWhatEC2Refuses(t *testing.T, sb *sandbox.Sandbox) {
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx, awsconf.Options{Region: sandbox.Region, Endpoint: sb.URL, AccessKeyID: "e2e", SecretAccessKey: "e2e", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	ec := cfg.EC2()
	images, err := ec.DescribeImages(ctx, &ec2.DescribeImagesInput{})
	if err != nil || len(images.Images) == 0 {
		t.Fatalf("images: %v", err)
	}
	tag := []ec2types.Tag{{Key: aws.String("rule"), Value: aws.String("test")}}
	lt, err := ec.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("rule-spot-tags"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: images.Images[0].ImageId,
			TagSpecifications: []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: tag}}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ec.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("1")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeC7iLarge}}}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InvalidParameterValue" ||
		!strings.Contains(aws.ToString(out.Errors[0].ErrorMessage), "cannot specify tags for Spot instances requests") {
		t.Errorf("an on-demand launch from a template tagging spot requests: %d instances, errors %+v; want EC2's refusal", len(out.Instances), out.Errors)
	}
	metadataTagRuleRefusesWhatEC2Refuses(t, sb, ec, images.Images[0].ImageId)

	// Graviton types from an x86 image (issue 30, item 5): refused.
	plain, err := ec.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("rule-arch"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: images.Images[0].ImageId}})
	if err != nil {
		t.Fatal(err)
	}
	if images.Images[0].Architecture != ec2types.ArchitectureValuesX8664 {
		t.Fatalf("image %s is %s, the test wants an x86_64 one", aws.ToString(images.Images[0].ImageId), images.Images[0].Architecture)
	}
	out, err = ec.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: plain.LaunchTemplate.LaunchTemplateId, Version: aws.String("1")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeC7gLarge}, {InstanceType: ec2types.InstanceTypeM7gLarge}}}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 0 || len(out.Errors) != 2 || !strings.Contains(aws.ToString(out.Errors[0].ErrorMessage), "does not match the architecture 'x86_64'") {
		t.Errorf("arm64 types from an x86_64 image: %d instances, errors %+v; want EC2's refusal", len(out.Instances), out.Errors)
	}
}

// metadataTagRuleRefusesWhatEC2Refuses: with instance tags in the metadata
// on, a tag key with a space or "/" makes EC2 refuse the launch; the pools'
// templates keep them off, so the sandbox's default tag "cost center/team"
// reaches every instance the story launches.
func metadataTagRuleRefusesWhatEC2Refuses(t *testing.T, sb *sandbox.Sandbox, ec *ec2.Client, image *string) {
	ctx := context.Background()
	lt, err := ec.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("rule-metadata-tags"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: image,
			MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{InstanceMetadataTags: ec2types.LaunchTemplateInstanceMetadataTagsStateEnabled}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ec.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("1")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeC7iLarge}}}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications:           []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: aws.String("cost center/team"), Value: aws.String("ci")}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 0 || len(out.Errors) != 1 || !strings.Contains(aws.ToString(out.Errors[0].ErrorMessage), "cost center/team") {
		t.Errorf("a launch with metadata tags on and the key %q: %d instances, errors %+v; want EC2's refusal", "cost center/team", len(out.Instances), out.Errors)
	}
}

// iamQuotasRefuseWhatIAMRefuses: the endpoint holds IAM's quotas (issue 30,
// item 11), which moto does not: a trust policy over 2,048 characters, a
// managed policy over 6,144, a role name over 64.
func iamQuotasRefuseWhatIAMRefuses(t *testing.T, sb *sandbox.Sandbox) {
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx, awsconf.Options{Region: sandbox.Region, Endpoint: sb.URL, AccessKeyID: "e2e", SecretAccessKey: "e2e", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	client := admin.IAM(cfg)
	var subs []string
	for i := 0; i < 60; i++ {
		subs = append(subs, fmt.Sprintf(`"repo:an-organization/repository-number-%03d:*"`, i))
	}
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"},` +
		`"Action":"sts:AssumeRoleWithWebIdentity","Condition":{"StringLike":{"token.actions.githubusercontent.com:sub":[` + strings.Join(subs, ",") + `]}}}]}`
	_, err = client.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("quota-trust"), AssumeRolePolicyDocument: aws.String(trust)})
	if err == nil || !strings.Contains(err.Error(), "LimitExceeded") {
		t.Errorf("a %d-character trust policy: %v, want LimitExceeded", len(trust), err)
	}
	big := `{"Version":"2012-10-17","Statement":[` + strings.Repeat(`{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::a-bucket-with-a-long-name/some/prefix/*"},`, 80) +
		`{"Effect":"Allow","Action":"s3:GetObject","Resource":"*"}]}`
	if _, err := client.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String("quota-size"), PolicyDocument: aws.String(big)}); err == nil || !strings.Contains(err.Error(), "LimitExceeded") {
		t.Errorf("a %d-character managed policy: %v, want LimitExceeded", len(big), err)
	}
	if _, err := client.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(strings.Repeat("r", 65)), AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[]}`)}); err == nil || !strings.Contains(err.Error(), "ValidationError") {
		t.Errorf("a 65-character role name: %v, want ValidationError", err)
	}
}
