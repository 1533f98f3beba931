package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// ghrunner_invoker_role (issue 15: what a team otherwise writes by hand).

func invokerConfig(name, issuer, repos string, create bool) string {
	return providerConfig() + fmt.Sprintf(`
resource "ghrunner_invoker_role" "ci" {
  name                 = %q
  oidc_issuer          = %q
  repositories         = [%s]
  function_arns        = ["arn:aws:lambda:us-east-1:123456789012:function:ghrunner-provision", "arn:aws:lambda:us-east-1:123456789012:function:ghrunner-release"]
  create_oidc_provider = %v
}
`, name, issuer, repos, create)
}

// checkInvokerRole reads the role back from IAM: its trust names exactly
// repos, its policy exactly the two functions.
func checkInvokerRole(name, issuer string, repos ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx, c := context.Background(), env.Config(&testing.T{})
		role := roleNameIn("acc", awstest.Region, "invoke-", name)
		got, err := admin.IAM(c).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
		if err != nil {
			return err
		}
		pol, err := admin.IAM(c).GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(invokerPolicyName)})
		if err != nil {
			return err
		}
		haveRepos, functions, _, ok := invokerGrants(aws.ToString(got.Role.AssumeRolePolicyDocument), aws.ToString(pol.PolicyDocument), issuer)
		if !ok || strings.Join(haveRepos, ",") != strings.Join(sortedCopy(repos), ",") || len(functions) != 2 {
			return fmt.Errorf("role %s grants repositories %v and functions %v (ok %v); want %v and the two functions", role, haveRepos, functions, ok, repos)
		}
		return nil
	}
}

func TestAccInvokerRole_basic_update_import(t *testing.T) {
	name := strings.ToLower(strings.ReplaceAll(awstest.Name(t, "ci"), ".", "-"))
	if len(name) > 32 {
		name = name[len(name)-32:]
	}
	issuer := "ghes-" + name + ".example.com/_services/token" // one OIDC provider per test: the account has one per issuer
	providerARN := func() string { return oidcProviderARN("aws", "123456789012", issuer) }
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: resource.ComposeAggregateTestCheckFunc(checkDestroyed, func(*terraform.State) error {
			_, err := admin.IAM(env.Config(t)).GetOpenIDConnectProvider(context.Background(), &iam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: aws.String(providerARN())})
			if !awserr.IsNotFound(err) {
				return fmt.Errorf("the OIDC provider this resource created is still there (%v)", err)
			}
			return nil
		}),
		Steps: []resource.TestStep{
			{
				Config: invokerConfig(name, issuer, `"octo-org/app"`, true),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkInvokerRole(name, issuer, "octo-org/app"),
					resource.TestCheckResourceAttr("ghrunner_invoker_role.ci", "oidc_provider_created", "true"),
					resource.TestCheckResourceAttr("ghrunner_invoker_role.ci", "oidc_provider_arn", providerARN()),
					resource.TestMatchResourceAttr("ghrunner_invoker_role.ci", "arn", regexp.MustCompile(`:role/ghr-acc-us-east-1-invoke-`)),
				),
			},
			{Config: invokerConfig(name, issuer, `"octo-org/app", "octo-org/infra"`, true), Check: checkInvokerRole(name, issuer, "octo-org/app", "octo-org/infra")},
			{ResourceName: "ghrunner_invoker_role.ci", ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"oidc_issuer", "oidc_provider_arn", "create_oidc_provider", "oidc_provider_created", "repositories"}},
		},
	})
}

// An OIDC provider that existed before is used and never deleted.
func TestAccInvokerRole_keepsAnOIDCProviderItDidNotMake(t *testing.T) {
	name := "kept"
	issuer := githubIssuer
	ctx, c := context.Background(), env.Config(t)
	arn := oidcProviderARN("aws", "123456789012", issuer)
	if _, err := admin.IAM(c).CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String("https://" + issuer),
		ClientIDList: []string{"sts.amazonaws.com"}}); err != nil && !awserr.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: resource.ComposeAggregateTestCheckFunc(checkDestroyed, func(*terraform.State) error {
			_, err := admin.IAM(c).GetOpenIDConnectProvider(ctx, &iam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: aws.String(arn)})
			return err // must still exist
		}),
		Steps: []resource.TestStep{{
			Config: invokerConfig(name, issuer, `"octo-org/app"`, true),
			Check:  resource.TestCheckResourceAttr("ghrunner_invoker_role.ci", "oidc_provider_created", "false"),
		}},
	})
}

func TestInvokerRole_refusesWildcardsAndBadARNs(t *testing.T) {
	for _, c := range []struct{ repos, want string }{
		{`"octo-org/*"`, `repositories.*must be\s+owner/name`},
		{`"octo-org"`, `repositories.*must be\s+owner/name`},
		{`"https://github.com/octo-org/app"`, `repositories.*must be\s+owner/name`},
	} {
		t.Run(c.repos, func(t *testing.T) {
			resource.UnitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				Steps:                    []resource.TestStep{{Config: invokerConfig("ci", githubIssuer, c.repos, false), PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)` + c.want)}},
			})
		})
	}
}

// The documents, asked of the evaluator: a workflow of a listed repository
// may assume the role, nothing else may; the role invokes provision and
// release, nothing else.
func TestInvokerRole_trustsTheListedRepositoriesOnly(t *testing.T) {
	e := evaluator(t)
	provision, release := catARN("lambda", "function:ghrunner-provision"), catARN("lambda", "function:ghrunner-release")
	runCatalogue(t, e, catSTS("assumed-role/ghr-prod-eu-west-1-invoke-ci/GitHubActions"), invokerPolicy([]string{provision, release}), nil, []ask{
		{"invoke provision", "lambda:InvokeFunction", provision, nil, true},
		{"invoke release", "lambda:InvokeFunction", release, nil, true},
		{"invoke refresh", "lambda:InvokeFunction", catARN("lambda", "function:ghrunner-refresh"), nil, false},
		{"change provision's code", "lambda:UpdateFunctionCode", provision, nil, false},
	})
	// The trust cannot be asked of the evaluator: its data has no generic
	// OIDC keys (<issuer>:sub, <issuer>:aud) for sts:AssumeRoleWithWebIdentity
	// and drops them from the request, so every request would fail on a
	// missing key. Its conditions are checked as written instead: the audience
	// must be STS, and the subject match exactly the listed repositories'
	// prefixes, which GitHub ends with ':' (repo:octo-org/app:…), so
	// octo-org/app-fork does not match octo-org/app.
	var trust struct {
		Statement []struct {
			Principal map[string]string
			Action    []string
			Condition map[string]map[string]json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(invokerTrustPolicy("aws", catAccount, githubIssuer, []string{"octo-org/infra", "octo-org/app"})), &trust); err != nil {
		t.Fatal(err)
	}
	st := trust.Statement[0]
	if len(trust.Statement) != 1 || st.Principal["Federated"] != oidcProviderARN("aws", catAccount, githubIssuer) ||
		strings.Join(st.Action, ",") != "sts:AssumeRoleWithWebIdentity" || len(st.Condition) != 2 {
		t.Fatalf("trust statement %+v", trust.Statement)
	}
	if got := stringOrList(st.Condition["StringEquals"][githubIssuer+":aud"]); strings.Join(got, ",") != "sts.amazonaws.com" {
		t.Errorf("audience %v, want sts.amazonaws.com only", got)
	}
	if got := stringOrList(st.Condition["StringLike"][githubIssuer+":sub"]); strings.Join(got, ",") != "repo:octo-org/app:*,repo:octo-org/infra:*" {
		t.Errorf("subjects %v", got)
	}
}

// Issue 30, item 11: a role's trust policy holds 2,048 characters unless
// the account's quota was raised (to at most 4,096). Past the most IAM
// allows, plan fails on repositories and says what to do; past the default
// it warns (an apply would fail in an account that did not raise it).
func TestAccInvokerRole_plansNoTrustPolicyIAMWouldRefuse(t *testing.T) {
	repos := func(n int) string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, fmt.Sprintf("%q", fmt.Sprintf("an-organization/repository-number-%03d", i)))
		}
		return strings.Join(out, ", ")
	}
	if n := len(invokerTrustPolicy("aws", "123456789012", githubIssuer, strings.Split(strings.ReplaceAll(repos(40), `"`, ""), ", "))); n <= trustPolicyDefault {
		t.Fatalf("40 repositories make %d characters: the warning case does not pass the default quota", n)
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{
			Config: invokerConfig("many", githubIssuer, repos(120), false), PlanOnly: true,
			ExpectError: regexp.MustCompile(`(?s)Too many repositories for one role.*repositories.*IAM\s+holds\s+at\s+most\s+4096`),
		}},
	})
}
