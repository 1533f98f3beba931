package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/smithy-go"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// Role and profile names fit IAM's 64 characters without two long names
// colliding, and the same input always gives the same name.
func TestIAMName(t *testing.T) {
	if got := iamName("ghr-prod-fn-provision"); got != "ghr-prod-fn-provision" {
		t.Errorf("short name changed: %q", got)
	}
	long := "ghr-" + strings.Repeat("platform-", 8)
	a, b := iamName(long+"linux-x64"), iamName(long+"linux-arm64")
	if len(a) != 64 || len(b) != 64 || a == b || !strings.HasPrefix(a, long[:55]) {
		t.Errorf("long names: %q %q", a, b)
	}
	if iamName(long+"linux-x64") != a {
		t.Error("not deterministic")
	}
}

// ownsRole is ensureRole's ownership rule: the deployment's environment and
// exactly the owner tags the resource gives its role.
func TestOwnsRole(t *testing.T) {
	tags := func(kv ...string) []iamtypes.Tag {
		var out []iamtypes.Tag
		for i := 0; i < len(kv); i += 2 {
			out = append(out, iamtypes.Tag{Key: aws.String(kv[i]), Value: aws.String(kv[i+1])})
		}
		return out
	}
	function := map[string]string{tagEnvironment: "acc", "team": "ci"}
	pool := map[string]string{tagEnvironment: "acc", tagPool: "linux"}
	schedule := map[string]string{tagEnvironment: "acc", tagSchedule: "refresh"}
	cases := []struct {
		name string
		have []iamtypes.Tag
		want map[string]string
		ok   bool
	}{
		{"function role", tags(tagEnvironment, "acc", "team", "other"), function, true},
		{"pool role", tags(tagEnvironment, "acc", tagPool, "linux"), pool, true},
		{"schedule role", tags(tagEnvironment, "acc", tagSchedule, "refresh"), schedule, true},
		{"untagged", nil, function, false},
		{"another environment", tags(tagEnvironment, "prod"), function, false},
		{"a pool's role taken for a function's", tags(tagEnvironment, "acc", tagPool, "fn-x"), function, false},
		{"a function's role taken for a pool's", tags(tagEnvironment, "acc"), pool, false},
		{"another pool's role", tags(tagEnvironment, "acc", tagPool, "gpu"), pool, false},
		{"a schedule's role taken for a pool's", tags(tagEnvironment, "acc", tagPool, "linux", tagSchedule, "linux"), pool, false},
		{"schedule role without its tag", tags(tagEnvironment, "acc"), schedule, false},
	}
	for _, c := range cases {
		want, ok := ownsRole(c.have, "acc", c.want)
		if ok != c.ok {
			t.Errorf("%s: ownsRole = %v, want %v", c.name, ok, c.ok)
		}
		if !strings.HasPrefix(want, "ghr:environment=acc") {
			t.Errorf("%s: the message's tags %q do not start with the environment", c.name, want)
		}
	}
}

// ensureRole against moto: it creates a missing role, adopts (and repairs)
// its own, and refuses, changing nothing, a role of its name that is not its.
func TestEnsureRole(t *testing.T) {
	ctx, svc := context.Background(), admin.IAM(env.Config(t))
	name := iamName("ghr-acc-fn-" + awstest.Name(t, "role"))
	spec := roleSpec{name: name, kind: "function", service: "lambda.amazonaws.com", description: "test",
		policyName: functionPolicyName, policy: scheduleInvokePolicy("arn:aws:lambda:us-east-1:123456789012:function:f"),
		tags: map[string]string{tagEnvironment: "acc", "team": "ci", "old": "x"}}
	made, err := ensureRole(ctx, svc, "acc", spec)
	if err != nil || !made.created || !strings.HasSuffix(made.arn, "/"+name) || !strings.HasPrefix(made.id, "AROA") {
		t.Fatalf("create: %+v, %v", made, err)
	}

	// Its own role, with its trust changed outside Terraform: adopted, the
	// trust restored, the tags set and the dropped one removed.
	if _, err := svc.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(name), PolicyDocument: aws.String(trustPolicy("ec2.amazonaws.com", nil))}); err != nil {
		t.Fatal(err)
	}
	spec.tags = map[string]string{tagEnvironment: "acc", "team": "infra"}
	spec.drop = []string{"old"}
	again, err := ensureRole(ctx, svc, "acc", spec)
	if err != nil || again != (ensuredRole{arn: made.arn, id: made.id}) {
		t.Fatalf("adopt: %+v, %v; want the role made first, not created", again, err)
	}
	got, err := svc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if !samePolicy(aws.ToString(got.Role.AssumeRolePolicyDocument), trustPolicy("lambda.amazonaws.com", nil)) {
		t.Errorf("trust not restored: %s", aws.ToString(got.Role.AssumeRolePolicyDocument))
	}
	if _, has := tagValue(got.Role.Tags, "old"); has || !hasTag(got.Role.Tags, "team", "infra") {
		t.Errorf("tags %+v: want team=infra and no old", got.Role.Tags)
	}

	// A role of the name that is not this resource's: refused, untouched.
	foreign := iamName("ghr-acc-fn-" + awstest.Name(t, "foreign"))
	if _, err := svc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(foreign), AssumeRolePolicyDocument: aws.String(trustPolicy("ec2.amazonaws.com", nil)),
		Tags: iamTags(map[string]string{tagEnvironment: "acc", tagPool: "fn-x"})}); err != nil {
		t.Fatal(err)
	}
	spec.name = foreign
	refused, err := ensureRole(ctx, svc, "acc", spec)
	if err == nil || refused.created || !strings.Contains(err.Error(), "role "+foreign+" already exists but is not this function's") ||
		!strings.Contains(err.Error(), "no ghr:pool tag") || !strings.Contains(err.Error(), "delete or rename it") {
		t.Fatalf("foreign role: created %v, err %v", refused.created, err)
	}
	_, err = svc.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(foreign), PolicyName: aws.String(functionPolicyName)})
	if !awserr.IsNotFound(err) {
		t.Errorf("the foreign role got a policy (%v)", err)
	}
	kept, err := svc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(foreign)})
	if err != nil || !samePolicy(aws.ToString(kept.Role.AssumeRolePolicyDocument), trustPolicy("ec2.amazonaws.com", nil)) || hasTag(kept.Role.Tags, "team", "infra") {
		t.Errorf("the foreign role changed: %+v, %v", kept, err)
	}

	if err := deleteRole(ctx, svc, name, functionPolicyName); err != nil {
		t.Fatal(err)
	}
	if err := deleteRole(ctx, svc, name, functionPolicyName); err != nil {
		t.Errorf("deleting a role already gone: %v", err)
	}
}

func TestAddingARoleToAProfileWaitsOnlyForIAMsOwnDelay(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&smithy.GenericAPIError{Code: "NoSuchEntity", Message: "The role with name ghr-x cannot be found."}, true},
		{&smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "Value (ghr-x) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"}, true},
		{&smithy.GenericAPIError{Code: "NoSuchEntity", Message: "Instance Profile ghr-x cannot be found."}, true},
		{&smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "Value (x) for parameter roleName is invalid."}, false},
		{&smithy.GenericAPIError{Code: "LimitExceeded", Message: "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1"}, false},
		{errors.New("connection refused"), false},
	} {
		if got := profileNotReady(fmt.Errorf("add role: %w", c.err)); got != c.want {
			t.Errorf("profileNotReady(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
