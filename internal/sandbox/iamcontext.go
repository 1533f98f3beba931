package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/iamsim"
)

// The request context AWS builds for each action the product calls, as the
// endpoint models it: the IAM action (batch and transaction APIs authorize
// their parts), every resource the action authorizes, and the condition
// keys of each. What is modelled, and what is assumed, is listed in
// docs/security.md ("IAM in the sandbox"). An action not listed here is
// refused with the reason, never passed.

// awsRequest is one signed request as it reached the endpoint.
type awsRequest struct {
	service, region, account string
	r                        *http.Request
	body                     []byte
}

// check is one authorization the request needs.
type check struct {
	action   string
	resource string
	context  map[string][]string
}

func (req awsRequest) arn(service, resource string) string {
	return fmt.Sprintf("arn:aws:%s:%s:%s:%s", service, req.region, req.account, resource)
}

// iamChecks lists the authorizations a request needs.
func (s *Sandbox) iamChecks(ctx context.Context, req awsRequest) ([]check, error) {
	target := req.r.Header.Get("X-Amz-Target")
	switch req.service {
	case "dynamodb":
		return s.dynamoChecks(req, strings.TrimPrefix(target, dynamoTarget))
	case "sqs":
		return sqsChecks(req, strings.TrimPrefix(target, "AmazonSQS."))
	case "ssm":
		return ssmChecks(req, strings.TrimPrefix(target, "AmazonSSM."))
	case "ec2":
		return s.ec2Checks(ctx, req)
	case "s3":
		return s3Checks(req)
	case "logs":
		return logsChecks(req, strings.TrimPrefix(target, "Logs_20140328."))
	case "servicequotas":
		// Provision's preflight reads EC2's vCPU quotas; the quota's ARN
		// is arn:aws:servicequotas:<region>:<account>:<service>/<code>.
		var in struct{ ServiceCode, QuotaCode string }
		if op := strings.TrimPrefix(target, "ServiceQuotasV20190624."); op == "GetServiceQuota" && json.Unmarshal(req.body, &in) == nil {
			return []check{{"servicequotas:GetServiceQuota", req.arn("servicequotas", in.ServiceCode+"/"+in.QuotaCode), nil}}, nil
		}
	case "ecr":
		// GetAuthorizationToken names no resource (Service Authorization
		// Reference: "*"); the registry calls it authorized are checked in
		// ecr.go with the principal the token was given to.
		if op := strings.TrimPrefix(target, ecrTarget); op == "GetAuthorizationToken" {
			return []check{{"ecr:GetAuthorizationToken", "*", nil}}, nil
		}
	case "sts":
		if strings.Contains(string(req.body), "Action=GetCallerIdentity") {
			return nil, nil // needs no permission
		}
	}
	return nil, fmt.Errorf("no IAM mapping for service %q (target %q)", req.service, target)
}

func (s *Sandbox) dynamoChecks(req awsRequest, op string) ([]check, error) {
	var in map[string]json.RawMessage
	if err := json.Unmarshal(req.body, &in); err != nil {
		return nil, fmt.Errorf("dynamodb %s: %w", op, err)
	}
	tableARN := func(t string) string { return req.arn("dynamodb", "table/"+t) }
	leading := func(table string, keys ...json.RawMessage) map[string][]string {
		sc := s.schema(req.r.Header, table)
		if sc == nil {
			return map[string][]string{"dynamodb:LeadingKeys": {}}
		}
		var vals []string
		for _, k := range keys {
			vals = append(vals, keyOf(k, sc).id)
		}
		return map[string][]string{"dynamodb:LeadingKeys": vals}
	}
	// An update also carries the attributes it names (dynamoattrs.go) and
	// the values it asks back.
	update := func(table string, part map[string]json.RawMessage) map[string][]string {
		cx := leading(table, part["Key"])
		var keyNames []string
		if sc := s.schema(req.r.Header, table); sc != nil {
			keyNames = append(keyNames, sc.hash)
			if sc.sort != "" {
				keyNames = append(keyNames, sc.sort)
			}
		}
		cx["dynamodb:Attributes"] = updateAttributes(part, keyNames)
		if rv := jsonString(part["ReturnValues"]); rv != "" {
			cx["dynamodb:ReturnValues"] = []string{rv}
		}
		return cx
	}
	table := jsonString(in["TableName"])
	switch op {
	case "UpdateItem":
		return []check{{"dynamodb:UpdateItem", tableARN(table), update(table, in)}}, nil
	case "GetItem", "DeleteItem":
		return []check{{"dynamodb:" + op, tableARN(table), leading(table, in["Key"])}}, nil
	case "PutItem":
		return []check{{"dynamodb:PutItem", tableARN(table), leading(table, in["Item"])}}, nil
	case "DescribeTable", "DescribeTimeToLive", "DescribeContinuousBackups":
		return []check{{"dynamodb:" + op, tableARN(table), nil}}, nil
	case "Query", "Scan":
		res := tableARN(table)
		if ix := jsonString(in["IndexName"]); ix != "" {
			res += "/index/" + ix
		}
		c := check{"dynamodb:" + op, res, nil}
		if op == "Query" {
			v, err := queryLeadingKey(s.schema(req.r.Header, table), in)
			if err != nil {
				return nil, err
			}
			c.context = map[string][]string{"dynamodb:LeadingKeys": {v}}
		}
		return []check{c}, nil
	case "BatchGetItem":
		var items map[string]struct{ Keys []json.RawMessage }
		json.Unmarshal(in["RequestItems"], &items)
		var out []check
		for _, t := range sortedKeysOf(items) {
			out = append(out, check{"dynamodb:BatchGetItem", tableARN(t), leading(t, items[t].Keys...)})
		}
		return out, nil
	case "BatchWriteItem":
		var items map[string][]struct {
			PutRequest    *struct{ Item json.RawMessage }
			DeleteRequest *struct{ Key json.RawMessage }
		}
		json.Unmarshal(in["RequestItems"], &items)
		var out []check
		for _, t := range sortedKeysOf(items) {
			var keys []json.RawMessage
			for _, wr := range items[t] {
				if wr.PutRequest != nil {
					keys = append(keys, wr.PutRequest.Item)
				}
				if wr.DeleteRequest != nil {
					keys = append(keys, wr.DeleteRequest.Key)
				}
			}
			out = append(out, check{"dynamodb:BatchWriteItem", tableARN(t), leading(t, keys...)})
		}
		return out, nil
	case "TransactWriteItems", "TransactGetItems":
		// Not IAM actions: each part is authorized as its own action.
		var tx struct {
			TransactItems []map[string]map[string]json.RawMessage
		}
		json.Unmarshal(in["TransactItems"], &tx)
		actions := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
		var out []check
		for _, ti := range tx.TransactItems {
			for kind, part := range ti {
				action, ok := actions[kind]
				if !ok {
					return nil, fmt.Errorf("dynamodb %s: unknown part %q", op, kind)
				}
				t := jsonString(part["TableName"])
				if kind == "Update" {
					out = append(out, check{"dynamodb:UpdateItem", tableARN(t), update(t, part)})
					continue
				}
				key := part["Key"]
				if key == nil {
					key = part["Item"]
				}
				out = append(out, check{"dynamodb:" + action, tableARN(t), leading(t, key)})
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("no IAM mapping for dynamodb %s", op)
}

// queryLeadingKey is the partition key value a Query's key condition names.
func queryLeadingKey(sc *tableSchema, in map[string]json.RawMessage) (string, error) {
	if sc == nil {
		return "", fmt.Errorf("dynamodb Query: the table's key schema is unknown")
	}
	ix := indexSchema{hash: sc.hash, sort: sc.sort}
	if name := jsonString(in["IndexName"]); name != "" {
		ix = sc.indexes[name]
	}
	kc, ok := queryKeyCondition(in, ix)
	if !ok {
		return "", fmt.Errorf("dynamodb Query: cannot read the key condition %q", jsonString(in["KeyConditionExpression"]))
	}
	_, v := attrValue(kc.value)
	return v, nil
}

func sqsChecks(req awsRequest, op string) ([]check, error) {
	var in struct{ QueueUrl, QueueName string }
	if err := json.Unmarshal(req.body, &in); err != nil {
		return nil, fmt.Errorf("sqs %s: %w", op, err)
	}
	name := in.QueueName
	if u, err := url.Parse(in.QueueUrl); err == nil && in.QueueUrl != "" {
		name = lastSegment(u.Path)
	}
	// Batch APIs are authorized as their single-message action.
	action := map[string]string{
		"SendMessage": "SendMessage", "SendMessageBatch": "SendMessage",
		"ReceiveMessage": "ReceiveMessage", "DeleteMessage": "DeleteMessage", "DeleteMessageBatch": "DeleteMessage",
		"ChangeMessageVisibility": "ChangeMessageVisibility", "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
		"GetQueueAttributes": "GetQueueAttributes", "GetQueueUrl": "GetQueueUrl",
	}[op]
	if action == "" || name == "" {
		return nil, fmt.Errorf("no IAM mapping for sqs %s", op)
	}
	return []check{{"sqs:" + action, req.arn("sqs", name), nil}}, nil
}

func ssmChecks(req awsRequest, op string) ([]check, error) {
	var in struct{ Name string }
	if err := json.Unmarshal(req.body, &in); err != nil {
		return nil, fmt.Errorf("ssm %s: %w", op, err)
	}
	if op != "GetParameter" || in.Name == "" {
		return nil, fmt.Errorf("no IAM mapping for ssm %s", op)
	}
	// A SecureString is decrypted by SSM with the AWS managed key, whose key
	// policy lets any principal of the account use it through SSM: no
	// kms:Decrypt check of the caller's policy is modelled.
	return []check{{"ssm:GetParameter", req.arn("ssm", "parameter/"+strings.TrimPrefix(in.Name, "/")), nil}}, nil
}

// logsChecks: writing a log stream authorizes on the stream's ARN (the
// Service Authorization Reference's log-stream resource type, for both
// CreateLogStream and PutLogEvents).
func logsChecks(req awsRequest, op string) ([]check, error) {
	var in struct{ LogGroupName, LogStreamName string }
	if err := json.Unmarshal(req.body, &in); err != nil {
		return nil, fmt.Errorf("logs %s: %w", op, err)
	}
	if op == "CreateLogGroup" && in.LogGroupName != "" { // awslogs-create-group of an ECS task
		return []check{{"logs:CreateLogGroup", req.arn("logs", "log-group:"+in.LogGroupName), nil}}, nil
	}
	if (op != "CreateLogStream" && op != "PutLogEvents") || in.LogGroupName == "" || in.LogStreamName == "" {
		return nil, fmt.Errorf("no IAM mapping for logs %s", op)
	}
	return []check{{"logs:" + op, req.arn("logs", "log-group:"+in.LogGroupName+":log-stream:"+in.LogStreamName), nil}}, nil
}

func s3Checks(req awsRequest) ([]check, error) {
	path := strings.TrimPrefix(req.r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	if (req.r.Method == http.MethodGet || req.r.Method == http.MethodHead) && key != "" && req.r.URL.RawQuery == "" {
		return []check{{"s3:GetObject", "arn:aws:s3:::" + bucket + "/" + key, nil}}, nil
	}
	return nil, fmt.Errorf("no IAM mapping for s3 %s %s", req.r.Method, req.r.URL.Path)
}

func (s *Sandbox) ec2Checks(ctx context.Context, req awsRequest) ([]check, error) {
	form, err := url.ParseQuery(string(req.body))
	if err != nil {
		return nil, fmt.Errorf("ec2: %w", err)
	}
	action := form.Get("Action")
	switch {
	case strings.HasPrefix(action, "Describe"):
		return []check{{"ec2:" + action, "*", nil}}, nil
	case action == "TerminateInstances":
		var out []check
		for _, id := range indexed(form, "InstanceId") {
			tags, err := s.resourceTags(ctx, id)
			if err != nil {
				return nil, err
			}
			out = append(out, check{"ec2:TerminateInstances", req.arn("ec2", "instance/"+id),
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

// lastSegment is what follows the last "/": a role's or a profile's name
// in its ARN, a queue's name in its URL.
func lastSegment(s string) string { return s[strings.LastIndex(s, "/")+1:] }
