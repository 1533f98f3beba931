package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// testRegistry is a registry (go-containerregistry's) standing in for the
// one ECR serves at a repository's repositoryUri, which moto does not: the
// provider pushes to it through endpoints.ecr_registry. It counts the
// manifests pushed.
type testRegistry struct {
	host      string
	net       awstest.Network
	manifests atomic.Int64
	// ecs is a recorder in front of moto's ECS, which drops a service's
	// deploymentConfiguration: the test reads what the provider sent.
	ecs      string
	mu       sync.Mutex
	services []map[string]any // CreateService and UpdateService requests
}

func startRegistry(t *testing.T) *testRegistry {
	reg := &testRegistry{net: env.Network(t)}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			reg.manifests.Add(1)
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	reg.host = strings.TrimPrefix(srv.URL, "http://")
	target, _ := url.Parse(env.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if op := r.Header.Get("X-Amz-Target"); strings.HasSuffix(op, ".CreateService") || strings.HasSuffix(op, ".UpdateService") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var in map[string]any
			if json.Unmarshal(body, &in) == nil {
				reg.mu.Lock()
				reg.services = append(reg.services, in)
				reg.mu.Unlock()
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)
	reg.ecs = rec.URL
	return reg
}

// lastDeployment is the deploymentConfiguration of the last CreateService
// or UpdateService the provider sent.
func (reg *testRegistry) lastDeployment() string {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if len(reg.services) == 0 {
		return "none"
	}
	b, _ := json.Marshal(reg.services[len(reg.services)-1]["deploymentConfiguration"])
	return string(b)
}

// withListenerBundle swaps the embedded bundle for zips of a small
// stand-in bootstrap: the image the provider builds is of what it embeds.
func withListenerBundle(t *testing.T, bootstrap string) {
	saved := assets
	t.Cleanup(func() { assets = saved })
	fs := fstest.MapFS{}
	for _, arch := range bundle.Architectures {
		z, err := bundle.Zip("bootstrap", []byte(bootstrap+" "+arch))
		if err != nil {
			t.Fatal(err)
		}
		fs[bundle.FunctionZip(arch)] = &fstest.MapFile{Data: z}
	}
	assets = fs
}

func listenerConfig(reg *testRegistry, table, extra string) string {
	provider := strings.Replace(providerConfig(), "  endpoints {\n", fmt.Sprintf("  endpoints {\n    ecr_registry = %q\n", reg.host), 1)
	provider = strings.Replace(provider, fmt.Sprintf("ecs       = %q", env.URL), fmt.Sprintf("ecs       = %q", reg.ecs), 1)
	return provider + fmt.Sprintf(`
resource "ghrunner_table" "state" {
  name = %q
}
resource "ghrunner_queue" "linux" {
  name = %q
}
resource "ghrunner_listener" "l" {
  table              = ghrunner_table.state.name
  github_parameter   = "/ghrunner/acc/github"
  queue_arns         = [ghrunner_queue.linux.arn]
  subnet_ids         = [%q]
  security_group_ids = [%q]
%s
}
`, table, table+"-q", reg.net.Subnet, reg.net.SecurityGroup, extra)
}

// checkListener reads every part back and compares it with what the
// embedded bundle and the attributes say.
func checkListener(reg *testRegistry, arch, logLevel string, cpu, memory string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		ctx, c := context.Background(), env.Config(&testing.T{})
		attrs := s.RootModule().Resources["ghrunner_listener.l"].Primary.Attributes
		img, err := listenerImage(arch)
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

// listenerGone: the service, the task definitions, the roles, the log
// group, the repository and the cluster the provider made.
func listenerGone(ctx context.Context, c awsconf.Config, id string, attrs map[string]string) error {
	errs := []error{roleGone(ctx, c, attrs["task_role_name"]), roleGone(ctx, c, attrs["execution_role_name"])}
	_, err := findRepository(ctx, admin.ECR(c), "ghr-"+id+"-listener")
	errs = append(errs, goneOrMissing("repository", err))
	if _, err := findService(ctx, admin.ECS(c), attrs["cluster"], "ghr-"+id+"-listener"); !isGone(err) {
		errs = append(errs, fmt.Errorf("service left behind (%v)", err))
	}
	defs, err := admin.ECS(c).ListTaskDefinitions(ctx, &ecs.ListTaskDefinitionsInput{FamilyPrefix: aws.String("ghr-" + id + "-listener"), Status: ecstypes.TaskDefinitionStatusActive})
	if err != nil || len(defs.TaskDefinitionArns) > 0 {
		errs = append(errs, fmt.Errorf("task definitions left: %v %v", defs, err))
	}
	groups, err := admin.Logs(c).DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{LogGroupNamePrefix: aws.String("/ghrunner/" + id + "/listener")})
	if err != nil || len(groups.LogGroups) > 0 {
		errs = append(errs, fmt.Errorf("log group left (%v)", err))
	}
	clusters, err := admin.ECS(c).DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{"ghr-" + id}})
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, cl := range clusters.Clusters {
			if aws.ToString(cl.Status) == "ACTIVE" {
				errs = append(errs, fmt.Errorf("cluster %s left", aws.ToString(cl.ClusterArn)))
			}
		}
	}
	return errors.Join(errs...)
}

func goneOrMissing(what string, err error) error {
	if isGone(err) {
		return nil
	}
	return fmt.Errorf("%s left behind (%v)", what, err)
}

func init() { objectsGone["ghrunner_listener"] = listenerGone }
