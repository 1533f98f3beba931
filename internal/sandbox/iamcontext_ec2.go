package sandbox

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/iamsim"
)

// The request context of EC2 actions: the resources each names with their
// tags, and everything an instant CreateFleet authorizes (the launch
// template, what each launch creates or uses, the tags at creation, and
// iam:PassRole on the instance profile's role). See iamcontext.go for the
// model.

func (s *Sandbox) ec2Checks(ctx context.Context, req awsRequest) ([]check, error) {
	form, err := url.ParseQuery(string(req.body))
	if err != nil {
		return nil, fmt.Errorf("ec2: %w", err)
	}
	action := form.Get("Action")
	switch {
	case strings.HasPrefix(action, "Describe"):
		return []check{{"ec2:" + action, "*", nil}}, nil
	case action == "TerminateInstances" || action == "StopInstances" || action == "StartInstances":
		// The three take the instance as resource and the same condition
		// keys (Service Authorization Reference, Amazon EC2: "instance*",
		// aws:ResourceTag/${TagKey}, ec2:InstanceID among them).
		var out []check
		for _, id := range indexed(form, "InstanceId") {
			tags, err := s.resourceTags(ctx, id)
			if err != nil {
				return nil, err
			}
			out = append(out, check{"ec2:" + action, req.arn("ec2", "instance/"+id),
				iamsim.Merge(iamsim.Tags("aws:ResourceTag/", tags), map[string][]string{"ec2:InstanceID": {id}})})
		}
		return out, nil
	case action == "CreateTags" || action == "DeleteTags":
		set := map[string]string{}
		for i := 1; form.Has(fmt.Sprintf("Tag.%d.Key", i)); i++ {
			set[form.Get(fmt.Sprintf("Tag.%d.Key", i))] = form.Get(fmt.Sprintf("Tag.%d.Value", i))
		}
		var out []check
		for _, id := range indexed(form, "ResourceId") {
			typ := map[string]string{"i": "instance", "vol": "volume"}[id[:max(strings.Index(id, "-"), 0)]]
			if typ == "" {
				return nil, fmt.Errorf("no IAM mapping for ec2 %s on %s", action, id)
			}
			tags, err := s.resourceTags(ctx, id)
			if err != nil {
				return nil, err
			}
			cx := iamsim.Merge(iamsim.Tags("aws:ResourceTag/", tags), iamsim.Tags("aws:RequestTag/", set))
			if typ == "instance" {
				cx["ec2:InstanceID"] = []string{id}
			}
			if action == "DeleteTags" {
				for k := range set {
					delete(cx, "aws:RequestTag/"+k)
				}
			}
			out = append(out, check{"ec2:" + action, req.arn("ec2", typ+"/"+id), cx})
		}
		return out, nil
	case action == "CreateFleet":
		return s.createFleetChecks(ctx, req, form)
	}
	return nil, fmt.Errorf("no IAM mapping for ec2 %s", action)
}

// indexed reads Name.1, Name.2, ... of an EC2 query request.
func indexed(form url.Values, name string) []string {
	var out []string
	for i := 1; form.Has(fmt.Sprintf("%s.%d", name, i)); i++ {
		out = append(out, form.Get(fmt.Sprintf("%s.%d", name, i)))
	}
	return out
}

// resourceTags are the tags an EC2 resource has now (none when it does not
// exist: EC2 then answers NotFound after authorizing).
func (s *Sandbox) resourceTags(ctx context.Context, id string) (map[string]string, error) {
	tags := map[string]string{}
	pages := ec2.NewDescribeTagsPaginator(s.AWS.EC2(), &ec2.DescribeTagsInput{Filters: []types.Filter{{Name: aws.String("resource-id"), Values: []string{id}}}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("tags of %s: %w", id, err)
		}
		for _, t := range page.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
	}
	return tags, nil
}

// fleetTemplate reads the launch template version a CreateFleet request
// launches from.
func (s *Sandbox) fleetTemplate(ctx context.Context, form url.Values) (types.LaunchTemplateVersion, error) {
	const spec = "LaunchTemplateConfigs.1.LaunchTemplateSpecification."
	ltID, ltName, version := form.Get(spec+"LaunchTemplateId"), form.Get(spec+"LaunchTemplateName"), form.Get(spec+"Version")
	in := &ec2.DescribeLaunchTemplateVersionsInput{Versions: []string{version}}
	if ltID != "" {
		in.LaunchTemplateId = aws.String(ltID)
	} else {
		in.LaunchTemplateName = aws.String(ltName)
	}
	lts, err := s.AWS.EC2().DescribeLaunchTemplateVersions(ctx, in)
	if err != nil || len(lts.LaunchTemplateVersions) != 1 {
		return types.LaunchTemplateVersion{}, fmt.Errorf("ec2 CreateFleet: launch template %s%s version %s: %v", ltID, ltName, version, err)
	}
	return lts.LaunchTemplateVersions[0], nil
}

// createFleetChecks: an instant fleet authorizes ec2:CreateFleet on the
// fleet and what it launches from, ec2:RunInstances on everything each
// launch creates or uses (EC2 launches the instances with the caller's
// permissions), ec2:CreateTags on every resource tagged at creation (with
// ec2:CreateAction), and iam:PassRole on the instance profile's role.
// Request tags of the instances, volumes and network interfaces include
// the launch template's tag specifications.
func (s *Sandbox) createFleetChecks(ctx context.Context, req awsRequest, form url.Values) ([]check, error) {
	const cfg = "LaunchTemplateConfigs.1."
	ltv, err := s.fleetTemplate(ctx, form)
	if err != nil {
		return nil, err
	}
	data := ltv.LaunchTemplateData
	ltID := aws.ToString(ltv.LaunchTemplateId)
	lt, err := s.AWS.EC2().DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateIds: []string{ltID}})
	if err != nil || len(lt.LaunchTemplates) != 1 {
		return nil, fmt.Errorf("ec2 CreateFleet: launch template %s: %v", ltID, err)
	}
	ltTags := map[string]string{}
	for _, t := range lt.LaunchTemplates[0].Tags {
		ltTags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}

	// The tags each new resource gets: the request's, then the template's.
	newTags := map[string]map[string]string{}
	add := func(typ, k, v string) {
		if newTags[typ] == nil {
			newTags[typ] = map[string]string{}
		}
		newTags[typ][k] = v
	}
	for i := 1; form.Has(fmt.Sprintf("TagSpecification.%d.ResourceType", i)); i++ {
		typ := form.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i))
		for j := 1; form.Has(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j)); j++ {
			add(typ, form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Key", i, j)), form.Get(fmt.Sprintf("TagSpecification.%d.Tag.%d.Value", i, j)))
		}
	}
	for _, ts := range data.TagSpecifications {
		for _, t := range ts.Tags {
			if _, set := newTags[string(ts.ResourceType)][aws.ToString(t.Key)]; !set {
				add(string(ts.ResourceType), aws.ToString(t.Key), aws.ToString(t.Value))
			}
		}
	}
	spot := form.Get("TargetCapacitySpecification.DefaultTargetCapacityType") == "spot"

	created := map[string]string{ // resource type → ARN of what the call creates
		"fleet": req.arn("ec2", "fleet/*"), "instance": req.arn("ec2", "instance/*"),
		"volume": req.arn("ec2", "volume/*"), "network-interface": req.arn("ec2", "network-interface/*"),
	}
	if spot {
		created["spot-instances-request"] = req.arn("ec2", "spot-instances-request/*")
	}
	newResource := func(action, typ string) check {
		return check{action, created[typ], iamsim.Tags("aws:RequestTag/", newTags[typ])}
	}
	image := fmt.Sprintf("arn:aws:ec2:%s::image/%s", req.region, aws.ToString(data.ImageId))
	template := check{"", req.arn("ec2", "launch-template/"+ltID), iamsim.Tags("aws:ResourceTag/", ltTags)}

	var out []check
	out = append(out, newResource("ec2:CreateFleet", "fleet"), newResource("ec2:CreateFleet", "instance"), newResource("ec2:CreateFleet", "volume"),
		check{"ec2:CreateFleet", image, nil}, check{"ec2:CreateFleet", template.resource, template.context})
	run := []check{newResource("ec2:RunInstances", "instance"), newResource("ec2:RunInstances", "volume"), newResource("ec2:RunInstances", "network-interface"),
		{"ec2:RunInstances", image, nil}, {"ec2:RunInstances", template.resource, template.context}}
	if spot {
		run = append(run, newResource("ec2:RunInstances", "spot-instances-request"))
	}
	subnets := map[string]bool{}
	for i := 1; form.Has(fmt.Sprintf(cfg+"Overrides.%d.InstanceType", i)) || form.Has(fmt.Sprintf(cfg+"Overrides.%d.SubnetId", i)); i++ {
		if id := form.Get(fmt.Sprintf(cfg+"Overrides.%d.SubnetId", i)); id != "" {
			subnets[id] = true
		}
	}
	for _, id := range sortedKeysOf(subnets) {
		tags, err := s.resourceTags(ctx, id)
		if err != nil {
			return nil, err
		}
		sub := check{"", req.arn("ec2", "subnet/"+id), iamsim.Tags("aws:ResourceTag/", tags)}
		out = append(out, check{"ec2:CreateFleet", sub.resource, sub.context})
		run = append(run, check{"ec2:RunInstances", sub.resource, sub.context})
	}
	for _, sg := range data.SecurityGroupIds {
		run = append(run, check{"ec2:RunInstances", req.arn("ec2", "security-group/"+sg), nil})
	}
	out = append(out, run...)
	for _, typ := range sortedKeysOf(newTags) {
		if created[typ] == "" {
			continue
		}
		c := newResource("ec2:CreateTags", typ)
		c.context["ec2:CreateAction"] = []string{"CreateFleet"}
		out = append(out, c)
	}
	if p := data.IamInstanceProfile; p != nil {
		role, err := s.profileRole(ctx, aws.ToString(p.Arn), aws.ToString(p.Name))
		if err != nil {
			return nil, err
		}
		got, err := admin.IAM(s.AWS).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(lastSegment(role))})
		if err != nil {
			return nil, fmt.Errorf("role %s: %w", role, err)
		}
		tags := map[string]string{}
		for _, t := range got.Role.Tags {
			tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
		out = append(out, check{"iam:PassRole", role, iamsim.Merge(iamsim.Tags("aws:ResourceTag/", tags), map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}})})
	}
	return out, nil
}

// profileRole is the ARN of the role an instance profile holds.
func (s *Sandbox) profileRole(ctx context.Context, arn, name string) (string, error) {
	if name == "" {
		name = lastSegment(arn)
	}
	out, err := admin.IAM(s.AWS).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("instance profile %s: %w", name, err)
	}
	if len(out.InstanceProfile.Roles) != 1 {
		return "", fmt.Errorf("instance profile %s holds %d roles", name, len(out.InstanceProfile.Roles))
	}
	return aws.ToString(out.InstanceProfile.Roles[0].Arn), nil
}
