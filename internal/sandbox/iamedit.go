package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
)

// WithoutStatement removes the statement sid from the one inline policy of
// the function's role, as an account's administrator might, and returns a
// func that puts the policy back. Each waits PolicyTTL, by which the
// endpoint sees the change (as IAM does within seconds).
func (s *Sandbox) WithoutStatement(ctx context.Context, function, sid string) (restore func() error, err error) {
	got, err := admin.Lambda(s.AWS).GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(function)})
	if err != nil {
		return nil, err
	}
	role := aws.ToString(got.Configuration.Role)
	role = role[strings.LastIndex(role, "/")+1:]
	svc := admin.IAM(s.AWS)
	names, err := svc.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: aws.String(role)})
	if err != nil {
		return nil, err
	}
	if len(names.PolicyNames) != 1 {
		return nil, fmt.Errorf("role %s has %d inline policies, want one", role, len(names.PolicyNames))
	}
	name := names.PolicyNames[0]
	pol, err := svc.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	original, err := url.QueryUnescape(aws.ToString(pol.PolicyDocument))
	if err != nil {
		return nil, err
	}
	var doc struct {
		Version   string
		Statement []map[string]any
	}
	if err := json.Unmarshal([]byte(original), &doc); err != nil {
		return nil, fmt.Errorf("policy %s of %s: %w", name, role, err)
	}
	n := len(doc.Statement)
	doc.Statement = slices.DeleteFunc(doc.Statement, func(st map[string]any) bool { return st["Sid"] == sid })
	if len(doc.Statement) != n-1 {
		return nil, fmt.Errorf("policy %s of %s has no statement %s", name, role, sid)
	}
	put := func(d string) error {
		if _, err := svc.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(name), PolicyDocument: aws.String(d)}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(PolicyTTL):
			return nil
		}
	}
	cut, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if err := put(string(cut)); err != nil {
		return nil, err
	}
	return func() error { return put(original) }, nil
}
