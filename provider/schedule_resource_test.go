package provider

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// scheduleFunction creates a Lambda function in moto (stored without Docker;
// it is never invoked) and returns its ARN.
func scheduleFunction(t *testing.T, prefix string) string {
	t.Helper()
	ctx, cfg := context.Background(), env.Config(t)
	name := awstest.Name(t, prefix)
	role, err := admin.IAM(cfg).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(trustPolicy("lambda.amazonaws.com", nil))})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "bootstrap", Method: zip.Deflate, Modified: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(w, "#!/bin/sh\necho never run")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	fn, err := admin.Lambda(cfg).CreateFunction(ctx, &lambda.CreateFunctionInput{
		FunctionName: aws.String(name), Role: role.Role.Arn, Runtime: lambdatypes.RuntimeProvidedal2023, Handler: aws.String("bootstrap"),
		Code: &lambdatypes.FunctionCode{ZipFile: buf.Bytes()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(fn.FunctionArn)
}

type scheduleArgs struct {
	name, fn, expr, timezone, payload, description string
	disabled                                       bool
	tags                                           string
}

func scheduleConfig(a scheduleArgs) string {
	var extra []string
	if a.timezone != "" {
		extra = append(extra, fmt.Sprintf("timezone = %q", a.timezone))
	}
	if a.payload != "" {
		extra = append(extra, "payload = "+a.payload)
	}
	if a.description != "" {
		extra = append(extra, fmt.Sprintf("description = %q", a.description))
	}
	if a.disabled {
		extra = append(extra, "enabled = false")
	}
	if a.tags != "" {
		extra = append(extra, "tags = "+a.tags)
	}
	return providerConfig() + fmt.Sprintf(`
resource "ghrunner_schedule" "refresh" {
  name                = %q
  function_arn        = %q
  schedule_expression = %q
  %s
}
`, a.name, a.fn, a.expr, strings.Join(extra, "\n  "))
}

// checkSchedule asserts what Scheduler holds, read with the SDK: what we sent
// and the fixed no-overlap, no-retry settings.
func checkSchedule(a scheduleArgs, wantInput string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		out, err := admin.Scheduler(env.Config(&testing.T{})).GetSchedule(context.Background(), &scheduler.GetScheduleInput{Name: aws.String(a.name)})
		if err != nil {
			return err
		}
		tz := a.timezone
		if tz == "" {
			tz = "UTC"
		}
		state := schedtypes.ScheduleStateEnabled
		if a.disabled {
			state = schedtypes.ScheduleStateDisabled
		}
		var problems []string
		check := func(what string, got, want any) {
			if !reflect.DeepEqual(got, want) {
				problems = append(problems, fmt.Sprintf("%s = %v, want %v", what, got, want))
			}
		}
		check("GroupName", aws.ToString(out.GroupName), "default")
		check("ScheduleExpression", aws.ToString(out.ScheduleExpression), a.expr)
		check("ScheduleExpressionTimezone", aws.ToString(out.ScheduleExpressionTimezone), tz)
		check("State", out.State, state)
		check("Description", aws.ToString(out.Description), a.description)
		if out.FlexibleTimeWindow == nil {
			problems = append(problems, "no FlexibleTimeWindow")
		} else {
			check("FlexibleTimeWindow.Mode", out.FlexibleTimeWindow.Mode, schedtypes.FlexibleTimeWindowModeOff)
		}
		if out.Target == nil || out.Target.RetryPolicy == nil {
			return fmt.Errorf("target or its retry policy missing: %+v", out.Target)
		}
		check("Target.Arn", aws.ToString(out.Target.Arn), a.fn)
		check("Target.Input", aws.ToString(out.Target.Input), wantInput)
		check("Target.RetryPolicy.MaximumRetryAttempts", aws.ToInt32(out.Target.RetryPolicy.MaximumRetryAttempts), int32(0))
		check("Target.RetryPolicy.MaximumEventAgeInSeconds", aws.ToInt32(out.Target.RetryPolicy.MaximumEventAgeInSeconds), int32(60))
		check("Target.RoleArn", roleNameOf(aws.ToString(out.Target.RoleArn)), roleNameIn("acc", awstest.Region, "sched-", a.name))
		if len(problems) > 0 {
			return errors.New(strings.Join(problems, "; "))
		}
		return nil
	}
}

// checkScheduleRole asserts the role of schedule name in environment: trusts
// Scheduler and may invoke fn only.
func checkScheduleRole(environment, name, fn string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx, c := context.Background(), admin.IAM(env.Config(&testing.T{}))
		roleName := roleNameIn(environment, awstest.Region, "sched-", name)
		role, err := c.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(roleName)})
		if err != nil {
			return fmt.Errorf("role %s: %w", roleName, err)
		}
		if !samePolicy(aws.ToString(role.Role.AssumeRolePolicyDocument), scheduleTrustPolicy(fn)) {
			return fmt.Errorf("trust policy of %s: %s", roleName, aws.ToString(role.Role.AssumeRolePolicyDocument))
		}
		if !hasTag(role.Role.Tags, "ghr:environment", environment) || !hasTag(role.Role.Tags, "ghr:schedule", name) || !hasTag(role.Role.Tags, "team", "ci") {
			return fmt.Errorf("role %s tags: %+v", roleName, role.Role.Tags)
		}
		pol, err := c.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(roleName), PolicyName: aws.String(schedulePolicyName)})
		if err != nil {
			return fmt.Errorf("invoke policy of %s: %w", roleName, err)
		}
		doc, _ := url.QueryUnescape(aws.ToString(pol.PolicyDocument))
		var got policyDocument
		if err := json.Unmarshal([]byte(doc), &got); err != nil {
			return err
		}
		if len(got.Statement) != 1 || !reflect.DeepEqual(got.Statement[0].Action, []string{"lambda:InvokeFunction"}) || !reflect.DeepEqual(got.Statement[0].Resource, []string{fn}) {
			return fmt.Errorf("invoke policy of %s: %s", roleName, doc)
		}
		return nil
	}
}

// checkScheduleDestroyed is checkDestroyed, and also checks by name that the
// schedule and every role it had (one per environment it lived in) are gone.
func checkScheduleDestroyed(name string, roles ...string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		ctx, c := context.Background(), env.Config(&testing.T{})
		_, err := admin.Scheduler(c).GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name)})
		errs := []error{checkDestroyed(s), gone("schedule "+name, err)}
		for _, r := range roles {
			errs = append(errs, roleGone(ctx, c, r))
		}
		return errors.Join(errs...)
	}
}

const scheduleAddr = "ghrunner_schedule.refresh"

func TestAccSchedule_basic(t *testing.T) {
	a := scheduleArgs{name: awstest.Name(t, "sched"), fn: scheduleFunction(t, "fn"), expr: "cron(0/2 * * * ? *)",
		timezone: "Europe/Berlin", payload: `jsonencode({ mode = "refresh" })`, tags: `{ purpose = "refresh" }`}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkScheduleDestroyed(a.name, roleNameIn("acc", awstest.Region, "sched-", a.name)),
		Steps: []resource.TestStep{
			{
				Config: scheduleConfig(a),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkSchedule(a, `{"mode":"refresh"}`),
					checkScheduleRole("acc", a.name, a.fn),
					resource.TestCheckResourceAttr(scheduleAddr, "id", a.name),
					resource.TestCheckResourceAttr(scheduleAddr, "enabled", "true"),
					resource.TestCheckResourceAttr(scheduleAddr, "payload", `{"mode":"refresh"}`),
					resource.TestMatchResourceAttr(scheduleAddr, "arn", regexp.MustCompile(`^arn:aws:scheduler:us-east-1:\d{12}:schedule/default/`+a.name+`$`)),
					resource.TestMatchResourceAttr(scheduleAddr, "role_arn", regexp.MustCompile(`^arn:aws:iam::\d{12}:role/`+regexp.QuoteMeta(roleNameIn("acc", awstest.Region, "sched-", a.name))+`$`)),
				),
			},
			{ResourceName: scheduleAddr, ImportState: true, ImportStateId: a.name, ImportStateVerify: true, ImportStateVerifyIgnore: []string{"tags"}},
		},
	})
}

func TestAccSchedule_update(t *testing.T) {
	a := scheduleArgs{name: awstest.Name(t, "sched"), fn: scheduleFunction(t, "fn"), expr: "rate(2 minutes)"}
	b := a
	b.fn, b.expr, b.payload, b.disabled, b.description = scheduleFunction(t, "fn2"), "cron(0 8 ? * MON-FRI *)", `"{\"mode\": \"scale-down\"}"`, true, "weekday mornings"
	b.timezone = "America/New_York"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkScheduleDestroyed(a.name, roleNameIn("acc", awstest.Region, "sched-", a.name)),
		Steps: []resource.TestStep{
			{
				Config: scheduleConfig(a),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkSchedule(a, "{}"),
					checkScheduleRole("acc", a.name, a.fn),
					resource.TestCheckResourceAttr(scheduleAddr, "timezone", "UTC"),
					resource.TestCheckResourceAttr(scheduleAddr, "payload", "{}"),
				),
			},
			{
				Config:           scheduleConfig(b),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(scheduleAddr, plancheck.ResourceActionUpdate)}},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkSchedule(b, `{"mode": "scale-down"}`),
					checkScheduleRole("acc", a.name, b.fn), // same role, now for the new function only
					resource.TestCheckResourceAttr(scheduleAddr, "enabled", "false"),
					resource.TestCheckResourceAttr(scheduleAddr, "payload", `{"mode": "scale-down"}`),
				),
			},
			{ResourceName: scheduleAddr, ImportState: true, ImportStateId: a.name, ImportStateVerify: true, ImportStateVerifyIgnore: []string{"tags"}},
			// Back to the defaults: description, time zone and payload are cleared.
			{Config: scheduleConfig(a), Check: checkSchedule(a, "{}")},
		},
	})
}

func TestAccSchedule_disappears(t *testing.T) {
	a := scheduleArgs{name: awstest.Name(t, "sched"), fn: scheduleFunction(t, "fn"), expr: "rate(5 minutes)"}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkScheduleDestroyed(a.name, roleNameIn("acc", awstest.Region, "sched-", a.name)),
		Steps: []resource.TestStep{
			{
				Config: scheduleConfig(a),
				Check: func(*terraform.State) error {
					_, err := admin.Scheduler(env.Config(&testing.T{})).DeleteSchedule(context.Background(), &scheduler.DeleteScheduleInput{Name: aws.String(a.name)})
					return err
				},
				ExpectNonEmptyPlan: true,
			},
			// Recreating takes over the role the lost schedule left behind.
			{Config: scheduleConfig(a), Check: resource.ComposeAggregateTestCheckFunc(checkSchedule(a, "{}"), checkScheduleRole("acc", a.name, a.fn))},
		},
	})
}

// A role damaged outside Terraform, or retries turned on, shows as an update
// that restores them.
func TestAccSchedule_roleDrift(t *testing.T) {
	a := scheduleArgs{name: awstest.Name(t, "sched"), fn: scheduleFunction(t, "fn"), expr: "rate(5 minutes)"}
	roleName := roleNameIn("acc", awstest.Region, "sched-", a.name)
	iamc := func() *iam.Client { return admin.IAM(env.Config(&testing.T{})) }
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkScheduleDestroyed(a.name, roleName),
		Steps: []resource.TestStep{
			{
				Config: scheduleConfig(a),
				Check: func(*terraform.State) error { // widen the policy
					_, err := iamc().PutRolePolicy(context.Background(), &iam.PutRolePolicyInput{RoleName: aws.String(roleName), PolicyName: aws.String(schedulePolicyName),
						PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"lambda:*","Resource":"*"}]}`)})
					return err
				},
				ExpectNonEmptyPlan: true,
			},
			{
				Config:           scheduleConfig(a),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(scheduleAddr, plancheck.ResourceActionUpdate)}},
				Check: resource.ComposeAggregateTestCheckFunc(checkScheduleRole("acc", a.name, a.fn), func(*terraform.State) error { // now remove the role
					ctx := context.Background()
					if _, err := iamc().DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(roleName), PolicyName: aws.String(schedulePolicyName)}); err != nil {
						return err
					}
					_, err := iamc().DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(roleName)})
					return err
				}),
				ExpectNonEmptyPlan: true,
			},
			{
				Config:           scheduleConfig(a),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(scheduleAddr, plancheck.ResourceActionUpdate)}},
				Check: resource.ComposeAggregateTestCheckFunc(checkSchedule(a, "{}"), checkScheduleRole("acc", a.name, a.fn), func(*terraform.State) error {
					// now let Scheduler retry (its default) and spread the runs
					ctx, c := context.Background(), admin.Scheduler(env.Config(&testing.T{}))
					cur, err := c.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(a.name)})
					if err != nil {
						return err
					}
					cur.Target.RetryPolicy.MaximumRetryAttempts = aws.Int32(185)
					_, err = c.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{Name: cur.Name, ScheduleExpression: cur.ScheduleExpression, Target: cur.Target,
						FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeFlexible, MaximumWindowInMinutes: aws.Int32(15)}})
					return err
				}),
				ExpectNonEmptyPlan: true,
			},
			{
				Config:           scheduleConfig(a),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(scheduleAddr, plancheck.ResourceActionUpdate)}},
				Check:            resource.ComposeAggregateTestCheckFunc(checkSchedule(a, "{}"), checkScheduleRole("acc", a.name, a.fn)),
			},
		},
	})
}

// Renaming the environment moves the schedule to a role of the new name and
// removes the old one.
func TestAccSchedule_environmentMovesRole(t *testing.T) {
	a := scheduleArgs{name: awstest.Name(t, "sched"), fn: scheduleFunction(t, "fn"), expr: "rate(5 minutes)"}
	renamed := strings.Replace(scheduleConfig(a), `environment = "acc"`, `environment = "acc2"`, 1)
	if renamed == scheduleConfig(a) {
		t.Fatal("providerConfig no longer sets environment = \"acc\"")
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkScheduleDestroyed(a.name, roleNameIn("acc", awstest.Region, "sched-", a.name), roleNameIn("acc2", awstest.Region, "sched-", a.name)),
		Steps: []resource.TestStep{
			{Config: scheduleConfig(a), Check: checkScheduleRole("acc", a.name, a.fn)},
			{
				Config:           renamed,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(scheduleAddr, plancheck.ResourceActionUpdate)}},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkScheduleRole("acc2", a.name, a.fn),
					resource.TestMatchResourceAttr(scheduleAddr, "role_arn", regexp.MustCompile(`role/`+regexp.QuoteMeta(roleNameIn("acc2", awstest.Region, "sched-", a.name))+`$`)),
					func(*terraform.State) error {
						return roleGone(context.Background(), env.Config(&testing.T{}), roleNameIn("acc", awstest.Region, "sched-", a.name))
					},
				),
			},
		},
	})
}

// words matches a phrase however terraform wraps the diagnostic.
func words(phrase string) *regexp.Regexp {
	parts := strings.Fields(phrase)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(strings.Join(parts, `\s+`))
}

func TestAccSchedule_validation(t *testing.T) {
	ok := scheduleArgs{name: "valid", fn: "arn:aws:lambda:us-east-1:123456789012:function:ghrunner-refresh", expr: "rate(5 minutes)"}
	with := func(change func(*scheduleArgs)) string {
		a := ok
		change(&a)
		return scheduleConfig(a)
	}
	steps := []struct {
		config string
		want   string
	}{
		{with(func(a *scheduleArgs) { a.expr = "rate(5 hourz)" }), `unit "hourz" is not one of minute, minutes, hour, hours, day, days`},
		{with(func(a *scheduleArgs) { a.expr = "rate(1 minutes)" }), "the value 1 takes the singular unit"},
		{with(func(a *scheduleArgs) { a.expr = "rate(5 minute)" }), "takes the plural unit"},
		{with(func(a *scheduleArgs) { a.expr = "cron(*/5 * * * *)" }), "cron() takes 6 fields"},
		{with(func(a *scheduleArgs) { a.expr = "cron(0 12 1 * MON *)" }), "exactly one of day-of-month (3rd field) and day-of-week (5th field) must be ?"},
		{with(func(a *scheduleArgs) { a.expr = "cron(0 12 ? * ? *)" }), "are both ?"},
		{with(func(a *scheduleArgs) { a.expr = "cron(0 25 * * ? *)" }), `"25" is not a valid hours value (0-23)`},
		{with(func(a *scheduleArgs) { a.expr = "every 5 minutes" }), "is not a rate(), cron() or at() expression"},
		{with(func(a *scheduleArgs) { a.timezone = "Mars/Olympus_Mons" }), `"Mars/Olympus_Mons" is not an IANA time zone name`},
		{with(func(a *scheduleArgs) { a.payload = `"not json"` }), "the payload must be a JSON object"},
		{with(func(a *scheduleArgs) { a.payload = `jsonencode([1, 2])` }), "the payload must be a JSON object"},
		{with(func(a *scheduleArgs) { a.fn = "arn:aws:lambda:us-east-1:123456789012:layer:tools" }), "must be a Lambda function ARN"},
		{with(func(a *scheduleArgs) { a.fn = "ghrunner-refresh" }), "must be a Lambda function ARN"},
		{with(func(a *scheduleArgs) { a.name = "has space" }), "must be 1-64 characters"},
	}
	var ts []resource.TestStep
	for _, s := range steps {
		ts = append(ts, resource.TestStep{Config: s.config, PlanOnly: true, ExpectError: words(s.want)})
	}
	resource.ParallelTest(t, resource.TestCase{ProtoV6ProviderFactories: factories, CheckDestroy: checkDestroyed, Steps: ts})
}

func TestScheduleExpressions(t *testing.T) {
	valid := []string{
		"rate(1 minute)", "rate(5 minutes)", "rate(1 hour)", "rate(12 hours)", "rate(1 day)", "rate(7 days)",
		"cron(0/5 * * * ? *)", "cron(0 8 ? * MON-FRI *)", "cron(15 10 ? * 6L 2030-2040)", "cron(0 18 L * ? *)",
		"cron(0 9 15W * ? *)", "cron(0 12 ? * 2#1 *)", "cron(0,30 8-17 ? JAN,JUL mon-fri *)", "cron(* * LW * ? *)",
		"at(2030-01-31T09:00:00)",
	}
	for _, e := range valid {
		if err := checkScheduleExpression(e); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
	invalid := map[string]string{
		"":                           "is not a rate(), cron() or at() expression",
		"rate(0 minutes)":            "at least 1",
		"rate(-5 minutes)":           "at least 1",
		"rate(5)":                    "takes a number and a unit",
		"rate(5 weeks)":              `unit "weeks" is not one of`,
		"rate(2 hour)":               "e.g. rate(2 hours)",
		"rate(1 days)":               "e.g. rate(1 day)",
		"cron(0 12 * * ?)":           "takes 6 fields",
		"cron(0 12 * * ? * *)":       "got 7",
		"cron(0 12 * * * *)":         "exactly one of day-of-month",
		"cron(0 12 ? * ? *)":         "both ?",
		"cron(60 * * * ? *)":         `"60" is not a valid minutes value (0-59)`,
		"cron(0 * 32 * ? *)":         "day-of-month",
		"cron(0 * ? 13 * *)":         "(1-12 or JAN-DEC)",
		"cron(0 * ? * 8 *)":          "(1-7 or SUN-SAT)",
		"cron(0 * ? * 2#6 *)":        "week number after # must be 1-5",
		"cron(0 * * * ? 1900)":       "year value (1970-2199)",
		"cron(0/0 * * * ? *)":        "increment after /",
		"cron(? * * * ? *)":          "? is allowed only in day-of-month or day-of-week",
		"cron(0 * 1,? * MON *)":      "? must stand alone",
		"cron(0 * ? * 1W *)":         "day-of-week",
		"cron(0,,5 * * * ? *)":       "empty list entry",
		"at(2030-01-31 09:00:00)":    "yyyy-mm-ddThh:mm:ss",
		"at(2030-02-30T09:00:00)":    "yyyy-mm-ddThh:mm:ss",
		"RATE(5 minutes)":            "is not a rate(), cron() or at() expression",
		"rate(5 minutes) ":           "is not a rate(), cron() or at() expression",
		"cron(0 12 * * ? *) extra)":  "takes 6 fields",
		"cron(0 12 * JANUARY ? *)":   "month value",
		"cron(0 12 * * ? 2030/abc)":  "increment after /",
		"cron(0 12-x * * ? *)":       "hours value",
		"cron(0 12 * * ? +2030)":     "year value",
		"cron(5-60 12 * * ? *)":      `"60" is not a valid minutes value`,
		"rate(+5 minutes)":           "at least 1",
		"at()":                       "yyyy-mm-ddThh:mm:ss",
		"cron(0 12 * * ? *)(":        "is not a rate(), cron() or at() expression",
		"cron(0 12 L-2 * ? *)":       "day-of-month",
		"rate(5 minutes, 1 minute)":  "takes a number and a unit",
		"cron(0 12 ? * MON#1,L# *)":  "day-of-week",
		"cron(0 12 ? * FRIL *)":      "", // FRIL: a named weekday with L is accepted below
		"cron(0 12 ? * 6L,7#2,1 *)":  "", // lists may mix the forms
		"cron(0 12 ? * SUN-SAT/2 *)": "",
	}
	for e, want := range invalid {
		err := checkScheduleExpression(e)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", e, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to say %q", e, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), "(") {
			t.Errorf("%q: error %q shows no example", e, err)
		}
	}
}

func TestSchedulePolicies(t *testing.T) {
	fn := "arn:aws:lambda:eu-west-1:123456789012:function:ghrunner-prod-refresh"
	var invoke policyDocument
	if err := json.Unmarshal([]byte(scheduleInvokePolicy(fn)), &invoke); err != nil {
		t.Fatal(err)
	}
	if invoke.Version != "2012-10-17" || len(invoke.Statement) != 1 {
		t.Fatalf("invoke policy: %+v", invoke)
	}
	st := invoke.Statement[0]
	if st.Effect != "Allow" || !reflect.DeepEqual(st.Action, []string{"lambda:InvokeFunction"}) || !reflect.DeepEqual(st.Resource, []string{fn}) ||
		st.Principal != nil || st.Condition != nil {
		t.Errorf("invoke statement: %+v", st)
	}
	var trust policyDocument
	if err := json.Unmarshal([]byte(scheduleTrustPolicy(fn)), &trust); err != nil {
		t.Fatal(err)
	}
	if len(trust.Statement) != 1 {
		t.Fatalf("trust policy: %+v", trust)
	}
	tr := trust.Statement[0]
	if tr.Effect != "Allow" || !reflect.DeepEqual(tr.Action, []string{"sts:AssumeRole"}) ||
		!reflect.DeepEqual(tr.Principal, map[string]string{"Service": "scheduler.amazonaws.com"}) || tr.Resource != nil {
		t.Errorf("trust statement: %+v", tr)
	}
	for _, doc := range []string{scheduleInvokePolicy(fn), scheduleTrustPolicy(fn)} {
		if strings.Contains(doc, "*") {
			t.Errorf("wildcard in %s", doc)
		}
	}
	// IAM returns documents URL-encoded and may space them differently.
	if !samePolicy(url.QueryEscape("{ \"Version\": \"2012-10-17\",\n \"Statement\": "+strings.TrimPrefix(scheduleInvokePolicy(fn), `{"Version":"2012-10-17","Statement":`)), scheduleInvokePolicy(fn)) {
		t.Error("an encoded, re-spaced copy of the invoke policy does not compare equal")
	}
	if samePolicy(url.QueryEscape(scheduleInvokePolicy(fn+"-other")), scheduleInvokePolicy(fn)) {
		t.Error("policies for different functions compare equal")
	}
}

func TestScheduleRoleName(t *testing.T) {
	if got := roleNameIn("prod", "us-east-1", "sched-", "refresh"); got != "ghr-prod-us-east-1-sched-refresh" {
		t.Errorf("short name: %s", got)
	}
	// IAM is global: the same environment in two regions must not share a role (issue 15 item 2).
	if roleNameIn("prod", "us-east-1", "sched-", "refresh") == roleNameIn("prod", "eu-west-1", "sched-", "refresh") {
		t.Error("two regions' schedules of one environment share a role name")
	}
	long1 := strings.Repeat("a", 60) + "-one"
	long2 := strings.Repeat("a", 60) + "-two"
	n1, n2 := roleNameIn("production-environment-30chars", awstest.Region, "sched-", long1), roleNameIn("production-environment-30chars", awstest.Region, "sched-", long2)
	if len(n1) != 64 || len(n2) != 64 || n1 == n2 {
		t.Errorf("long names %q (%d), %q (%d): want 64 characters each and different", n1, len(n1), n2, len(n2))
	}
	if n1 != roleNameIn("production-environment-30chars", awstest.Region, "sched-", long1) {
		t.Error("not deterministic")
	}
	if !regexp.MustCompile(`^[\w+=,.@-]{1,64}$`).MatchString(n1) {
		t.Errorf("%q is not a valid IAM role name", n1)
	}
	if got := roleNameOf("arn:aws:iam::123456789012:role/some/path/ghr-prod-sched-refresh"); got != "ghr-prod-sched-refresh" {
		t.Errorf("role name of a pathed ARN: %q", got)
	}
}

func TestScheduleRetryRoleNotReady(t *testing.T) {
	notReady := &schedtypes.ValidationException{Message: aws.String("The execution role you provide must allow AWS EventBridge Scheduler to assume the role.")}
	calls := 0
	err := scheduleRetryRoleNotReady(context.Background(), time.Millisecond, time.Second, func() error {
		if calls++; calls < 3 {
			return notReady
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("err %v after %d calls, want success on the 3rd", err, calls)
	}
	calls = 0
	other := &schedtypes.ValidationException{Message: aws.String("Invalid Schedule Expression")}
	if err := scheduleRetryRoleNotReady(context.Background(), time.Millisecond, time.Second, func() error { calls++; return other }); !errors.Is(err, other) || calls != 1 {
		t.Errorf("another validation error: %v after %d calls, want it at once", err, calls)
	}
	calls = 0
	if err := scheduleRetryRoleNotReady(context.Background(), 10*time.Millisecond, 35*time.Millisecond, func() error { calls++; return notReady }); !errors.Is(err, notReady) || calls > 4 {
		t.Errorf("past the limit: %v after %d calls", err, calls)
	}
}
