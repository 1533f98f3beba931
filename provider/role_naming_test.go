package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// Role names carry the region (issue 15 item 2): IAM is global, so two
// regions' deployments of one environment must not share, rewrite or delete
// each other's roles.

// Two deployments of one environment in one region share role names; the
// second one's table is not the first one's, so it is refused, not adopted.
func TestEnsureRole_refusesTheRoleOfAnotherTable(t *testing.T) {
	ctx, svc := context.Background(), admin.IAM(env.Config(t))
	name := roleNameIn("acc", awstest.Region, "fn-", awstest.Name(t, "fn"))
	spec := roleSpec{name: name, kind: "function", service: "lambda.amazonaws.com", description: "test",
		policyName: functionPolicyName, policy: scheduleInvokePolicy("arn:aws:lambda:us-east-1:123456789012:function:f"),
		tags: map[string]string{tagEnvironment: "acc", tagTable: "ghr-first"}}
	if _, err := ensureRole(ctx, svc, "acc", spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = deleteRole(ctx, svc, name, functionPolicyName) })
	spec.tags = map[string]string{tagEnvironment: "acc", tagTable: "ghr-second"}
	second, err := ensureRole(ctx, svc, "acc", spec)
	if err == nil || second.created || !strings.Contains(err.Error(), "ghr:table=ghr-second") {
		t.Fatalf("the second table's function took the first one's role: created %v, err %v", second.created, err)
	}
}

// A pool's role name is never another resource's: pools whose names are
// another kind's role name after its kind (the listener's task role, a
// function's, a schedule's, an invoker role's) get a name of their own.
// Checked: with the pool's kind "" (as before), "listener-task" is the
// listener's task role and this fails.
func TestAPoolsRoleNameIsNeverAnotherResourcesRoleName(t *testing.T) {
	c := &clients{environment: "prod"}
	c.aws.AWS.Region = "us-east-1"
	others := map[string]string{
		c.roleName("listener-", "task"): "the listener's task role", c.roleName("listener-", "exec"): "the listener's execution role",
		c.roleName("fn-", "provision"): "a function's", c.roleName("sched-", "refresh"): "a schedule's", c.roleName("invoke-", "ci"): "an invoker role's",
	}
	for _, pool := range []string{"listener-task", "listener-exec", "fn-provision", "sched-refresh", "invoke-ci", "linux"} {
		r := &poolResource{configured{c}}
		name := r.roleName(poolModel{Name: types.StringValue(pool)})
		if what, ok := others[name]; ok {
			t.Errorf("pool %s's role %s is %s", pool, name, what)
		}
	}
}
