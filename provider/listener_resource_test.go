package provider

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/image"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// checkListener reads every part back and compares it with what the
// embedded bundle and the attributes say.
func checkListener(reg *testRegistry, arch, logLevel string, cpu, memory string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		ctx, c := context.Background(), env.Config(&testing.T{})
		attrs := s.RootModule().Resources["ghrunner_listener.l"].Primary.Attributes
		// The image of the bootstrap the bundle holds, built here.
		img, err := image.Build([]byte(standIn+" "+arch), arch)
		if err != nil {
			return err
		}
		digest, _ := img.Digest()
		repo, err := findRepository(ctx, admin.ECR(c), "ghr-acc-listener")
		if err != nil {
			return err
		}
		url := aws.ToString(repo.RepositoryUri)
		if attrs["repository_url"] != url || attrs["image"] != url+"@"+digest.String() || attrs["image_digest"] != digest.String() {
			return fmt.Errorf("repository_url %s image %s, want %s@%s", attrs["repository_url"], attrs["image"], url, digest)
		}
		_, path, _ := strings.Cut(url, "/")
		ref, _ := name.NewDigest(reg.host + "/" + path + "@" + digest.String())
		if _, err := remote.Head(ref); err != nil {
			return fmt.Errorf("the image of the embedded bootstrap is not in the registry: %w", err)
		}
		ecsc := admin.ECS(c)
		td, err := ecsc.DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(attrs["task_definition_arn"])})
		if err != nil {
			return err
		}
		d := td.TaskDefinition
		wantArch := map[string]ecstypes.CPUArchitecture{"arm64": ecstypes.CPUArchitectureArm64, "amd64": ecstypes.CPUArchitectureX8664}[arch]
		if aws.ToString(d.Cpu) != cpu || aws.ToString(d.Memory) != memory || d.NetworkMode != ecstypes.NetworkModeAwsvpc ||
			len(d.RequiresCompatibilities) != 1 || d.RequiresCompatibilities[0] != ecstypes.CompatibilityFargate ||
			d.RuntimePlatform == nil || d.RuntimePlatform.CpuArchitecture != wantArch || d.RuntimePlatform.OperatingSystemFamily != ecstypes.OSFamilyLinux {
			return fmt.Errorf("task definition cpu %s memory %s mode %s compat %v platform %+v", aws.ToString(d.Cpu), aws.ToString(d.Memory), d.NetworkMode, d.RequiresCompatibilities, d.RuntimePlatform)
		}
		if roleNameOf(aws.ToString(d.TaskRoleArn)) != attrs["task_role_name"] || roleNameOf(aws.ToString(d.ExecutionRoleArn)) != attrs["execution_role_name"] {
			return fmt.Errorf("task role %s execution role %s", aws.ToString(d.TaskRoleArn), aws.ToString(d.ExecutionRoleArn))
		}
		if len(d.ContainerDefinitions) != 1 {
			return fmt.Errorf("%d containers", len(d.ContainerDefinitions))
		}
		ct := d.ContainerDefinitions[0]
		vars := map[string]string{}
		for _, kv := range ct.Environment {
			vars[aws.ToString(kv.Name)] = aws.ToString(kv.Value)
		}
		if aws.ToString(ct.Name) != "listener" || !aws.ToBool(ct.Essential) || aws.ToString(ct.Image) != attrs["image"] || aws.ToInt32(ct.StopTimeout) != 30 {
			return fmt.Errorf("container %s essential %v image %s stop %d", aws.ToString(ct.Name), aws.ToBool(ct.Essential), aws.ToString(ct.Image), aws.ToInt32(ct.StopTimeout))
		}
		if vars["GHRUNNER_HANDLER"] != "listener" || vars["GHRUNNER_TABLE"] != attrs["table"] || vars["GHRUNNER_ENVIRONMENT"] != "acc" ||
			vars["GHRUNNER_GITHUB_PARAMETER"] != "/ghrunner/acc/github" || vars["GHRUNNER_LOG_LEVEL"] != logLevel {
			return fmt.Errorf("environment %v", vars)
		}
		if lc := ct.LogConfiguration; lc == nil || lc.LogDriver != ecstypes.LogDriverAwslogs || lc.Options["awslogs-group"] != "/ghrunner/acc/listener" ||
			lc.Options["awslogs-region"] != "us-east-1" || lc.Options["awslogs-stream-prefix"] != "listener" {
			return fmt.Errorf("log configuration %+v", lc)
		}
		svc, err := findService(ctx, ecsc, attrs["cluster"], "ghr-acc-listener")
		if err != nil {
			return err
		}
		if svc.DesiredCount != 1 || svc.LaunchType != ecstypes.LaunchTypeFargate || aws.ToString(svc.TaskDefinition) != attrs["task_definition_arn"] {
			return fmt.Errorf("service desired %d launch %s task definition %s", svc.DesiredCount, svc.LaunchType, aws.ToString(svc.TaskDefinition))
		}
		const deployment = `{"deploymentCircuitBreaker":{"enable":true,"rollback":true},"maximumPercent":100,"minimumHealthyPercent":0}`
		if got := reg.lastDeployment(); got != deployment {
			return fmt.Errorf("deploymentConfiguration sent %s, want %s", got, deployment)
		}
		if n := svc.NetworkConfiguration; n == nil || n.AwsvpcConfiguration == nil || fmt.Sprint(n.AwsvpcConfiguration.Subnets) != "["+reg.net.Subnet+"]" ||
			n.AwsvpcConfiguration.AssignPublicIp != ecstypes.AssignPublicIpDisabled {
			return fmt.Errorf("network %+v", n)
		}
		return checkListenerRoles(ctx, c, attrs, aws.ToString(repo.RepositoryArn))
	}
}

// checkListenerRoles compares the roles' policies with the generated ones.
func checkListenerRoles(ctx context.Context, c awsconf.Config, attrs map[string]string, repoARN string) error {
	tableARN, _, err := stateTableARN(ctx, &clients{aws: c}, attrs["table"])
	if err != nil {
		return err
	}
	task, _ := listenerPolicy(tableARN, "", []string{attrs["queue_arns.0"]}, "/ghrunner/acc/github", "/ghrunner/acc/listener", "acc", "/", nil)
	exec, _ := listenerExecutionPolicy(tableARN, repoARN, "/ghrunner/acc/listener")
	for role, want := range map[string][2]string{attrs["task_role_name"]: {listenerTaskPolicyName, task}, attrs["execution_role_name"]: {listenerExecPolicyName, exec}} {
		got, err := admin.IAM(c).GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(want[0])})
		if err != nil {
			return err
		}
		if !samePolicy(aws.ToString(got.PolicyDocument), want[1]) {
			return fmt.Errorf("role %s policy %s, want %s", role, aws.ToString(got.PolicyDocument), want[1])
		}
		r, err := admin.IAM(c).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
		if err != nil {
			return err
		}
		if !samePolicy(aws.ToString(r.Role.AssumeRolePolicyDocument), trustPolicy("ecs-tasks.amazonaws.com", nil)) {
			return fmt.Errorf("role %s trust %s", role, aws.ToString(r.Role.AssumeRolePolicyDocument))
		}
	}
	return nil
}

func TestAccListener_basic(t *testing.T) {
	withListenerBundle(t, "listener-basic")
	reg := startRegistry(t)
	table := awstest.Name(t, "lsn")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: listenerConfig(reg, table, ""),
				Check: resource.ComposeAggregateTestCheckFunc(
					checkListener(reg, "arm64", "info", "256", "512"),
					resource.TestCheckResourceAttr("ghrunner_listener.l", "id", "acc"),
					resource.TestCheckResourceAttr("ghrunner_listener.l", "log_group", "/ghrunner/acc/listener"),
					resource.TestCheckResourceAttr("ghrunner_listener.l", "log_retention_days", "30"),
					resource.TestMatchResourceAttr("ghrunner_listener.l", "cluster", regexp.MustCompile(`:cluster/ghr-acc$`)),
				),
			},
			{
				ResourceName: "ghrunner_listener.l", ImportState: true, ImportStateId: "acc", ImportStateVerify: true,
				// Only in the role's policy and the tags.
				ImportStateVerifyIgnore: []string{"queue_arns", "volume_kms_key_arns", "tags"},
			},
		},
	})
	if n := reg.manifests.Load(); n != 1 {
		t.Errorf("%d manifests pushed, want 1", n)
	}
}

func TestAccListener_update(t *testing.T) {
	withListenerBundle(t, "listener-update")
	reg := startRegistry(t)
	table := awstest.Name(t, "lsn")
	var first string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{
				Config: listenerConfig(reg, table, ""),
				Check: func(s *terraform.State) error {
					first = s.RootModule().Resources["ghrunner_listener.l"].Primary.Attributes["task_definition_arn"]
					return nil
				},
			},
			{
				Config: listenerConfig(reg, table, `log_level = "debug"
  cpu       = 512
  memory    = 2048`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("ghrunner_listener.l", plancheck.ResourceActionUpdate)}},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkListener(reg, "arm64", "debug", "512", "2048"),
					func(s *terraform.State) error {
						return checkRevisionAfter(s, first, 1)
					},
				),
			},
			// Unchanged: no new revision, nothing pushed.
			{Config: listenerConfig(reg, table, `log_level = "debug"
  cpu       = 512
  memory    = 2048`), PlanOnly: true},
			// A provider with a new bundle: a new image, pushed, and a
			// revision that runs it.
			{
				PreConfig: func() {
					if n := reg.manifests.Load(); n != 1 {
						t.Errorf("%d manifests pushed, want 1 (the same image for both revisions)", n)
					}
					withListenerBundle(t, "listener-update-newer")
				},
				Config: listenerConfig(reg, table, `log_level = "debug"
  cpu       = 512
  memory    = 2048`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("ghrunner_listener.l", plancheck.ResourceActionUpdate)}},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkListener(reg, "arm64", "debug", "512", "2048"),
					func(s *terraform.State) error { return checkRevisionAfter(s, first, 2) },
				),
			},
		},
	})
	if n := reg.manifests.Load(); n != 2 {
		t.Errorf("%d manifests pushed, want 2 (one per bundle)", n)
	}
}

// A user's image, on amd64, after the provider's: the repository deleted,
// nothing pushed, the execution role without ECR; tags reach the service
// and the cluster.
func TestAccListener_imageURI(t *testing.T) {
	withListenerBundle(t, "listener-image-uri")
	reg := startRegistry(t)
	table := awstest.Name(t, "lsn")
	uri := "public.ecr.aws/acme/listener@sha256:" + strings.Repeat("ab", 32)
	config := func(team string) string {
		return listenerConfig(reg, table, fmt.Sprintf(`image_uri    = %q
  architecture = "amd64"
  tags         = { team = %q }`, uri, team))
	}
	check := func(team string) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			ctx, c := context.Background(), env.Config(&testing.T{})
			attrs := s.RootModule().Resources["ghrunner_listener.l"].Primary.Attributes
			if _, err := findRepository(ctx, admin.ECR(c), "ghr-acc-listener"); !isGone(err) {
				return fmt.Errorf("a repository was made for a user's image (%v)", err)
			}
			if n := reg.manifests.Load(); n != 1 {
				return fmt.Errorf("%d manifests pushed, want 1: the built image's, none for a user's", n)
			}
			td, err := admin.ECS(c).DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(attrs["task_definition_arn"])})
			if err != nil {
				return err
			}
			if aws.ToString(td.TaskDefinition.ContainerDefinitions[0].Image) != uri || td.TaskDefinition.RuntimePlatform.CpuArchitecture != ecstypes.CPUArchitectureX8664 {
				return fmt.Errorf("image %s platform %+v", aws.ToString(td.TaskDefinition.ContainerDefinitions[0].Image), td.TaskDefinition.RuntimePlatform)
			}
			exec, err := admin.IAM(c).GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(attrs["execution_role_name"]), PolicyName: aws.String(listenerExecPolicyName)})
			if err != nil {
				return err
			}
			if doc, _ := url.QueryUnescape(aws.ToString(exec.PolicyDocument)); strings.Contains(doc, "ecr:") {
				return fmt.Errorf("execution role grants ECR for a user's image: %s", doc)
			}
			for _, arn := range []string{attrs["service_arn"], attrs["cluster"]} {
				out, err := admin.ECS(c).ListTagsForResource(ctx, &ecs.ListTagsForResourceInput{ResourceArn: aws.String(arn)})
				if err != nil {
					return err
				}
				got := map[string]string{}
				for _, tag := range out.Tags {
					got[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
				}
				if got["team"] != team || got[tagEnvironment] != "acc" {
					return fmt.Errorf("%s tags %v, want team=%s", arn, got, team)
				}
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			// First the provider's image, then the user's: the repository goes.
			{Config: listenerConfig(reg, table, `architecture = "amd64"`), Check: checkListener(reg, "amd64", "info", "256", "512")},
			{Config: config("ci"), Check: resource.ComposeAggregateTestCheckFunc(check("ci"),
				resource.TestCheckResourceAttr("ghrunner_listener.l", "image", uri),
				resource.TestCheckResourceAttr("ghrunner_listener.l", "repository_url", ""))},
			{Config: config("platform"), Check: check("platform")},
		},
	})
}

// checkRevisionAfter: the service runs the revision n after first's (moto
// numbers a family's revisions across the tests of the binary).
func checkRevisionAfter(s *terraform.State, first string, n int) error {
	now := s.RootModule().Resources["ghrunner_listener.l"].Primary.Attributes["task_definition_arn"]
	var a, b int
	fmt.Sscan(first[strings.LastIndex(first, ":")+1:], &a)
	fmt.Sscan(now[strings.LastIndex(now, ":")+1:], &b)
	if a == 0 || b != a+n {
		return fmt.Errorf("task definition %s after %s: want the revision %d later", now, first, n)
	}
	return nil
}

func TestAccListener_disappears(t *testing.T) {
	withListenerBundle(t, "listener-disappears")
	reg := startRegistry(t)
	table := awstest.Name(t, "lsn")
	deleteService := func(s *terraform.State) error {
		attrs := s.RootModule().Resources["ghrunner_listener.l"].Primary.Attributes
		r := &listenerResource{configured{c: &clients{aws: env.Config(&testing.T{}), environment: "acc"}}}
		if err := r.c.deleteLogGroup(context.Background(), "/ghrunner/acc/listener"); err != nil {
			return err
		}
		return r.deleteService(context.Background(), attrs["cluster"], "ghr-acc-listener")
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{
			{Config: listenerConfig(reg, table, ""), Check: deleteService, ExpectNonEmptyPlan: true},
			{
				Config:           listenerConfig(reg, table, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("ghrunner_listener.l", plancheck.ResourceActionUpdate)}},
				Check: resource.ComposeAggregateTestCheckFunc(checkListener(reg, "arm64", "info", "256", "512"),
					resource.TestCheckResourceAttr("ghrunner_listener.l", "log_retention_days", "30")),
			},
		},
	})
}
