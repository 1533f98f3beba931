package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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

// lastSegment is what follows the last "/": a role's or a profile's name
// in its ARN, a queue's name in its URL.
func lastSegment(s string) string { return s[strings.LastIndex(s, "/")+1:] }
