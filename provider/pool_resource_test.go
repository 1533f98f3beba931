package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

type poolFixture struct {
	table, queue, ami, subnet, sg string
}

// Pool tests run one at a time (resource.Test): every fixture's pool is
// "linux" in environment "acc", and its launch template name is regional.
func newPoolFixture(t *testing.T) poolFixture {
	n := env.Network(t)
	return poolFixture{table: awstest.Name(t, "tbl"), queue: awstest.Name(t, "q"), ami: n.AMI, subnet: n.Subnet, sg: n.SecurityGroup}
}

// config renders a pool with extra attributes spliced in.
func (f poolFixture) config(extra string) string {
	return providerConfig() + fmt.Sprintf(`
resource "ghrunner_table" "state" {
  name   = %q
  stream = true
}
resource "ghrunner_queue" "linux" {
  name = %q
}
resource "ghrunner_pool" "linux" {
  name               = "linux"
  table              = ghrunner_table.state.name
  queue_url          = ghrunner_queue.linux.url
  owner              = "acme"
  image_id           = %q
  instance_types     = ["c7i.large", "m7i.large"]
  subnet_ids         = [%q]
  security_group_ids = [%q]
%s
}
`, f.table, f.queue, f.ami, f.subnet, f.sg, extra)
}

func (f poolFixture) poolConfig() (*state.PoolConfig, error) {
	return state.New(env.Config(&testing.T{}).DynamoDB(), f.table).GetPoolConfig(context.Background(), "linux")
}

// checkPool asserts the pool config item, the launch template's security
// settings, the user data, the uploaded agent and the role's policy.
func (f poolFixture) checkPool(maxInstances int, preRunner string, version string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		ctx := context.Background()
		attrs := s.RootModule().Resources["ghrunner_pool.linux"].Primary.Attributes
		cfg, err := f.poolConfig()
		if err != nil || cfg == nil {
			return fmt.Errorf("pool config item: %v (found %v)", err, cfg != nil)
		}
		if cfg.MaxInstances != maxInstances || cfg.LaunchTemplateID != attrs["launch_template_id"] || cfg.LaunchTemplateVersion != version ||
			cfg.UsageClass != "spot" || !cfg.OnDemandFallback || strings.Join(cfg.InstanceTypes, ",") != "c7i.large,m7i.large" ||
			cfg.Timings.HeartbeatInterval != 15 || len(cfg.IdleWindows) != 1 || cfg.IdleWindows[0].TimeZone != "Europe/Berlin" ||
			cfg.Tags["team"] != "ci" || cfg.Tags["ghr:environment"] != "" {
			return fmt.Errorf("pool config item %+v (want maxInstances %d, template version %s)", cfg, maxInstances, version)
		}
		// A launch names one subnet per AZ: the item carries their AZs.
		if len(cfg.SubnetZones) != 1 || !strings.HasPrefix(cfg.SubnetZones[f.subnet], "us-east-1") {
			return fmt.Errorf("pool config item's subnet zones %v, want the AZ of %s", cfg.SubnetZones, f.subnet)
		}
		// The control plane reads the pool's runner release from the item.
		if want := (state.RunnerSpec{Version: attrs["runner_version"], Arch: "amd64"}); cfg.Runner != want {
			return fmt.Errorf("pool config item's runner %+v, want %+v", cfg.Runner, want)
		}
		c := env.Config(&testing.T{})
		lt, err := c.EC2().DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: aws.String(cfg.LaunchTemplateID), Versions: []string{"$Default"}})
		if err != nil || len(lt.LaunchTemplateVersions) != 1 {
			return fmt.Errorf("launch template: %v", err)
		}
		data := lt.LaunchTemplateVersions[0].LaunchTemplateData
		md := data.MetadataOptions
		if md == nil || md.HttpTokens != "required" || aws.ToInt32(md.HttpPutResponseHopLimit) != 1 || md.InstanceMetadataTags != "disabled" {
			return fmt.Errorf("metadata options %+v: want IMDSv2 required, hop limit 1, tags enabled", md)
		}
		if data.InstanceInitiatedShutdownBehavior != ec2types.ShutdownBehaviorTerminate {
			return fmt.Errorf("shutdown behaviour %q: want terminate (a job's poweroff must not leave a stopped instance)", data.InstanceInitiatedShutdownBehavior)
		}
		specs := map[ec2types.ResourceType]bool{}
		for _, ts := range data.TagSpecifications {
			for _, tg := range ts.Tags {
				if aws.ToString(tg.Key) == "ghr:environment" && aws.ToString(tg.Value) == "acc" {
					specs[ts.ResourceType] = true
				}
			}
		}
		if !specs[ec2types.ResourceTypeVolume] || !specs[ec2types.ResourceTypeNetworkInterface] {
			return fmt.Errorf("template tag specifications %+v: want the environment's tag on volumes and network interfaces", data.TagSpecifications)
		}
		for _, ts := range data.TagSpecifications {
			if ts.ResourceType == ec2types.ResourceTypeSpotInstancesRequest {
				return fmt.Errorf("template tags spot-instances-request: EC2 refuses every on-demand launch from it")
			}
		}
		if ebs := data.BlockDeviceMappings[0].Ebs; !aws.ToBool(ebs.Encrypted) || aws.ToInt32(ebs.VolumeSize) != 30 {
			return fmt.Errorf("root volume %+v: want encrypted 30 GiB", ebs)
		}
		raw, _ := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
		u, err := templates.Parse(raw)
		if err != nil {
			return err
		}
		if u.PreRunnerScript != preRunner || u.Agent.Table != f.table || u.AgentSHA256 != attrs["agent_sha256"] {
			return fmt.Errorf("user data carries script %q, table %q, sum %q", u.PreRunnerScript, u.Agent.Table, u.AgentSHA256)
		}
		// A stock AMI: the agent downloads the pinned runner release (for
		// "latest", the provider's default one, until its record names the
		// pool's target).
		pinned := attrs["runner_version"]
		if pinned == runnerrelease.Latest {
			pinned = runnerrelease.Default
		}
		if url, sum, err := runnerrelease.Tarball(pinned, "amd64"); err != nil || u.Agent.RunnerTarballURL != url || u.Agent.RunnerTarballSHA256 != sum {
			return fmt.Errorf("the agent downloads the runner from %q (sha256 %q), want runner_version %q's %q %q (%v)",
				u.Agent.RunnerTarballURL, u.Agent.RunnerTarballSHA256, attrs["runner_version"], url, sum, err)
		}
		if want := attrs["keep_docker_images"] == "true"; u.Agent.KeepDockerImages != want {
			return fmt.Errorf("the agent's keepDockerImages is %v, the pool's keep_docker_images %v", u.Agent.KeepDockerImages, want)
		}
		obj, err := admin.S3(c).HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(attrs["agent_bucket"]), Key: aws.String("agent/" + u.AgentSHA256 + "/ghrunner-agent")})
		if err != nil {
			return fmt.Errorf("agent object: %v", err)
		}
		want, _ := agentAsset("amd64")
		if aws.ToInt64(obj.ContentLength) != int64(len(want.data)) {
			return fmt.Errorf("agent object has %d bytes, want %d", aws.ToInt64(obj.ContentLength), len(want.data))
		}
		pol, err := admin.IAM(c).GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(attrs["role_name"]), PolicyName: aws.String("ghrunner-agent")})
		if err != nil {
			return fmt.Errorf("role policy: %v", err)
		}
		// IAM answers with the document URL-encoded, on AWS as in moto.
		if doc, _ := url.QueryUnescape(aws.ToString(pol.PolicyDocument)); !strings.Contains(doc, `"aws:ResourceTag/ghr:pool":"linux"`) {
			return fmt.Errorf("role policy %s", doc)
		}
		return nil
	}
}

const poolExtra = `
  pre_runner_script = "#!/bin/bash\necho warm\n"
  max_instances     = %d
  idle_windows = [{
    cron       = "* 8-18 * * 1-5"
    time_zone  = "Europe/Berlin"
    idle_count = 2
  }]
`

const runnerGroupExtra = `
  runner_group = "ci"
  registration = "token"
`

// checkRunnerGroup asserts the pool's runner group and how its runners
// are registered.
func (f poolFixture) checkRunnerGroup(group string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		cfg, err := f.poolConfig()
		if err != nil {
			return err
		}
		if cfg.RunnerGroup != group {
			return fmt.Errorf("pool config item: runnerGroup %q, want %q", cfg.RunnerGroup, group)
		}
		// Just-in-time by default; the runner group step also goes back to tokens.
		if want := map[bool]string{true: state.RegistrationJIT, false: state.RegistrationToken}[group == ""]; cfg.Registration != want {
			return fmt.Errorf("pool config item: registration %q, want %q", cfg.Registration, want)
		}
		return nil
	}
}

func TestAccPool_basic_update_import(t *testing.T) {
	f := newPoolFixture(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             resource.ComposeAggregateTestCheckFunc(checkDestroyed, f.checkNothingLeft),
		Steps: []resource.TestStep{
			{
				Config: f.config(fmt.Sprintf(poolExtra, 5)),
				Check: resource.ComposeAggregateTestCheckFunc(
					f.checkPool(5, "#!/bin/bash\necho warm\n", "1"),
					f.checkRunnerGroup(""),
					resource.TestCheckNoResourceAttr("ghrunner_pool.linux", "runner_group"),
					resource.TestCheckResourceAttr("ghrunner_pool.linux", "architecture", "amd64"),
					resource.TestCheckResourceAttr("ghrunner_pool.linux", "runner_version", runnerrelease.Latest),
					resource.TestCheckResourceAttr("ghrunner_pool.linux", "role_name", "ghr-acc-us-east-1-pool-linux"),
					resource.TestMatchResourceAttr("ghrunner_pool.linux", "agent_sha256", regexp.MustCompile(`^[0-9a-f]{64}$`)),
				),
			},
			// Only the config item changes: same template version. An
			// operator's drain (ghrunner drain) outlives the apply.
			{
				PreConfig: func() {
					if err := state.New(env.Config(t).DynamoDB(), f.table).SetDraining(context.Background(), "linux", true); err != nil {
						t.Fatal(err)
					}
				},
				Config: f.config(fmt.Sprintf(poolExtra, 8) + runnerGroupExtra),
				Check: resource.ComposeAggregateTestCheckFunc(
					f.checkPool(8, "#!/bin/bash\necho warm\n", "1"), f.checkRunnerGroup("ci"),
					func(*terraform.State) error {
						if cfg, err := f.poolConfig(); err != nil || !cfg.Draining {
							return fmt.Errorf("the apply ended the operator's drain: %+v, %v", cfg, err)
						}
						return nil
					}),
			},
			// The script, the docker choice, the runner release and the
			// proxy are in the user data, the root volume's IOPS in its
			// mapping: a new template version (and the import reads the
			// IOPS and the proxy back).
			{
				Config: f.config(strings.Replace(fmt.Sprintf(poolExtra, 8), "echo warm", "echo hot", 1) + runnerGroupExtra + "  keep_docker_images = true\n  runner_version = \"2.335.1\"\n" +
					"  root_volume_type = \"io2\"\n  root_volume_iops = 3000\n" +
					"  proxy = { url = \"http://proxy.internal:3128\", no_proxy = [\".corp.example\"] }\n"),
				Check: resource.ComposeAggregateTestCheckFunc(f.checkPool(8, "#!/bin/bash\necho hot\n", "2"),
					resource.TestCheckResourceAttr("ghrunner_pool.linux", "proxy.url", "http://proxy.internal:3128"),
					resource.TestCheckResourceAttr("ghrunner_pool.linux", "proxy.no_proxy.0", ".corp.example"),
					resource.TestCheckResourceAttr("ghrunner_pool.linux", "keep_docker_images", "true"),
					resource.TestCheckResourceAttr("ghrunner_pool.linux", "runner_version", "2.335.1"),
					resource.TestCheckResourceAttr("ghrunner_pool.linux", "root_volume_iops", "3000"), f.checkRootVolume("io2", 3000)),
			},
			{ResourceName: "ghrunner_pool.linux", ImportState: true, ImportStateIdFunc: func(*terraform.State) (string, error) { return f.table + ":linux", nil },
				ImportStateVerify: true},
		},
	})
}

// checkNothingLeft adds to checkDestroyed a search by name: destroy leaves no
// template, role, profile, agent bucket or instance of the pool, even one
// the state never recorded.
func (f poolFixture) checkNothingLeft(*terraform.State) error {
	ctx := context.Background()
	c := env.Config(&testing.T{})
	lts, err := c.EC2().DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"ghr-acc-linux"}})
	if err == nil && len(lts.LaunchTemplates) > 0 {
		return fmt.Errorf("launch template ghr-acc-linux left behind")
	}
	if _, err := admin.IAM(c).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("ghr-acc-us-east-1-pool-linux")}); err == nil {
		return fmt.Errorf("role ghr-acc-us-east-1-pool-linux left behind")
	}
	if _, err := admin.IAM(c).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("ghr-acc-us-east-1-pool-linux")}); err == nil {
		return fmt.Errorf("instance profile ghr-acc-us-east-1-pool-linux left behind")
	}
	if days, found, err := (&clients{aws: c}).logRetention(ctx, "/ghrunner/acc/linux"); err != nil || found {
		return fmt.Errorf("log group /ghrunner/acc/linux left behind (%d days, %v)", days, err)
	}
	buckets, err := admin.S3(c).ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		return err
	}
	for _, b := range buckets.Buckets {
		if strings.HasPrefix(aws.ToString(b.Name), "ghr-acc-agent-") {
			return fmt.Errorf("bucket %s left behind", aws.ToString(b.Name))
		}
	}
	live, err := c.EC2().DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:ghr:pool"), Values: []string{"linux"}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	if err != nil {
		return err
	}
	for _, r := range live.Reservations {
		for _, in := range r.Instances {
			return fmt.Errorf("instance %s of the pool still %s", aws.ToString(in.InstanceId), in.State.Name)
		}
	}
	return nil
}

// launchInPool starts an instance as provision would, so destroy must
// terminate it.
func (f poolFixture) launchInPool(*terraform.State) error {
	_, err := env.Config(&testing.T{}).EC2().RunInstances(context.Background(), &ec2.RunInstancesInput{
		ImageId: aws.String(f.ami), MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: ec2types.InstanceTypeC7iLarge,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String("ghr:environment"), Value: aws.String("acc")}, {Key: aws.String("ghr:pool"), Value: aws.String("linux")}}}},
	})
	return err
}

func TestAccPool_destroyTerminatesInstances(t *testing.T) {
	f := newPoolFixture(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             resource.ComposeAggregateTestCheckFunc(checkDestroyed, f.checkNothingLeft),
		Steps:                    []resource.TestStep{{Config: f.config(""), Check: f.launchInPool}},
	})
}

// Drift: a changed config item shows in the plan.
func TestAccPool_drift(t *testing.T) {
	f := newPoolFixture(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{{
			Config: f.config(""),
			Check: func(*terraform.State) error {
				cfg, err := f.poolConfig()
				if err != nil {
					return err
				}
				cfg.MaxInstances = 99
				return state.New(env.Config(&testing.T{}).DynamoDB(), f.table).PutPoolConfig(context.Background(), *cfg)
			},
			ExpectNonEmptyPlan: true,
		}},
	})
}

func TestAccPool_validation(t *testing.T) {
	f := newPoolFixture(t)
	big, _ := json.Marshal("#!/bin/bash\n" + strings.Repeat("echo 0123456789abcdef\n", 700))
	for _, c := range []struct{ extra, want string }{
		{`owner = "acme/api/x"`, `must be an organization`},
		{`usage_class = "reserved"`, `value must be one of`},
		{`owner = "acme/api"` + "\n" + `runner_group = "ci"`, `Runner groups belong to organizations`},
		{`stale_after_seconds = 40`, `An argument named "stale_after_seconds" is not expected here`},
		{`idle_windows = [{ cron = "every minute", idle_count = 1 }]`, `not a 5-field cron`},
		{`idle_windows = [{ cron = "* * * * *", time_zone = "Mars/Olympus", idle_count = 1 }]`, `not an IANA time zone`},
		{`pre_runner_script = "echo no interpreter"`, `must start with an interpreter line`},
		{`pre_runner_script = ` + string(big), `over EC2's limit of 16384`},
		{`runner_tarball_url = "https://example.com/r.tgz"`, `set runner_tarball_url and runner_tarball_sha256 together`},
		{`runner_version = "2.330.0"`, `"2.330.0" is not a release this provider pins`},
		{`runner_version = "2.300.0"`, `2.300.0 is below ` + runnerrelease.Minimum},
		{`runner_version = "next"`, `runner_version: "next" must be "latest" or a release version`},
		{`agent_path = "relative/agent"`, `agent_path must be an absolute file path`},
		{`max_instances = 0`, `between 1 and 10000`},
		{`max_provisions_per_repository = 0`, `max_provisions_per_repository value must be between 1 and 10000`},
		{`max_queued_per_repository = 20000`, `max_queued_per_repository value must be between 1 and 10000`},
		{`max_provisions_per_repository = 2` + "\n" + `max_queued_per_repository = 3`, `More queue places than provisions in flight`},
		{`timings = { max_runtime_seconds = 30000 }`, `timings.runtime_cap_seconds (21600) must be at least`},
		{`timings = { max_runtime_seconds = 600, runtime_cap_seconds = 300 }`, `timings.runtime_cap_seconds (300) must be at least`},
	} {
		t.Run(c.want, func(t *testing.T) {
			cfg := strings.Replace(f.config(c.extra), `owner              = "acme"`, "", strings.Count(c.extra, "owner"))
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				CheckDestroy:             checkDestroyed,
				Steps:                    []resource.TestStep{{Config: cfg, PlanOnly: true, ExpectError: regexp.MustCompile(regexp.QuoteMeta(c.want))}},
			})
		})
	}
	t.Run("bad image", func(t *testing.T) {
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: factories,
			CheckDestroy:             checkDestroyed,
			Steps: []resource.TestStep{{Config: strings.Replace(f.config(""), f.ami, "ami-00000000000000000", 1),
				ExpectError: regexp.MustCompile(`image_id "ami-00000000000000000": not found`)}},
		})
	})
}

// A provider built without `make build` says so at plan time.
func TestAccPool_withoutBundle(t *testing.T) {
	f := newPoolFixture(t)
	saved := assets
	assets = fstest.MapFS{}
	defer func() { assets = saved }()
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps:                    []resource.TestStep{{Config: f.config(""), PlanOnly: true, ExpectError: regexp.MustCompile(`built without bundle: run make build`)}},
	})
}

// A provision that read the pool's config just before destroy began is
// still running while the pool is destroyed (issue 15 item 16). It launches
// after each step of Delete: what it launched before the template went is
// terminated, and once the template is gone it cannot launch at all. With
// the old order (instances listed and terminated, then the template
// deleted) the launch after the termination stayed running.
func TestAccPool_destroyLeavesNothingARunningProvisionLaunched(t *testing.T) {
	f := newPoolFixture(t)
	var template string
	launched := map[string]error{}
	poolDeleteStage = func(stage string) {
		_, err := fleet.New(env.Config(t).EC2(), "acc").Launch(context.Background(), fleet.LaunchRequest{
			LaunchTemplateID: template, LaunchTemplateVersion: "$Default", InstanceTypes: []string{"c7i.large"},
			SubnetIDs: []string{f.subnet}, Count: 1, UsageClass: "on-demand", Pool: "linux", Owner: "octo", Assignment: "run-1"})
		launched[stage] = err
	}
	t.Cleanup(func() { poolDeleteStage = func(string) {} })
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: resource.ComposeAggregateTestCheckFunc(checkDestroyed, f.checkNothingLeft, func(*terraform.State) error {
			if err := launched["config deleted"]; err != nil {
				return fmt.Errorf("the launch before the template went failed (%v): the test proves nothing", err)
			}
			for _, stage := range []string{"template deleted", "instances terminated"} {
				if err, ok := launched[stage]; !ok || err == nil {
					return fmt.Errorf("a launch after %q: called %v, error %v; want refused", stage, ok, err)
				}
			}
			return nil
		}),
		Steps: []resource.TestStep{{Config: f.config(""), Check: func(s *terraform.State) error {
			template = s.RootModule().Resources["ghrunner_pool.linux"].Primary.Attributes["launch_template_id"]
			return nil
		}}},
	})
}

// checkScaleSet asserts the pool config item's scale set (nil: none).
func (f poolFixture) checkScaleSet(want *state.ScaleSetConfig) resource.TestCheckFunc {
	return func(*terraform.State) error {
		cfg, err := f.poolConfig()
		if err != nil {
			return err
		}
		switch {
		case want == nil && cfg.ScaleSet != nil:
			return fmt.Errorf("pool config item's scale set %+v, want none", *cfg.ScaleSet)
		case want != nil && (cfg.ScaleSet == nil || *cfg.ScaleSet != *want):
			return fmt.Errorf("pool config item's scale set %+v, want %+v", cfg.ScaleSet, *want)
		}
		return nil
	}
}

// A pool's scale set goes into its config item, changes with it, is read
// back by an import and leaves the item when the attribute goes.
func TestAccPool_scaleSet_basic_update_import(t *testing.T) {
	f := newPoolFixture(t)
	const pool = "ghrunner_pool.linux"
	// A pinned release: an import reads "latest" back as the release it is.
	const pinned = "runner_version = \"2.335.1\"\n"
	importStep := resource.TestStep{ResourceName: pool, ImportState: true, ImportStateVerify: true,
		ImportStateIdFunc: func(*terraform.State) (string, error) { return f.table + ":linux", nil }}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             resource.ComposeAggregateTestCheckFunc(checkDestroyed, f.checkNothingLeft),
		Steps: []resource.TestStep{
			{
				// With a stopped tier (pool_stopped.go), read back by the import.
				Config: f.config(pinned + "max_instances = 5\nscale_set = { name = \"Linux-Big\", max_runners = 3 }\nstopped = { max = 2, keep_seconds = 3600 }"),
				Check: resource.ComposeAggregateTestCheckFunc(f.checkScaleSet(&state.ScaleSetConfig{Name: "Linux-Big", MaxRunners: 3}),
					f.checkStopped(&state.StoppedTier{Max: 2, KeepSeconds: 3600}), resource.TestCheckResourceAttr(pool, "stopped.max", "2"),
					resource.TestCheckResourceAttr(pool, "scale_set.name", "Linux-Big"), resource.TestCheckResourceAttr(pool, "scale_set.max_runners", "3")),
			},
			importStep,
			// Only the config item changes: the template keeps its version.
			{
				Config: f.config(pinned + "max_instances = 5\nscale_set = { name = \"Linux-Big\", max_runners = 5 }"),
				Check: resource.ComposeAggregateTestCheckFunc(f.checkScaleSet(&state.ScaleSetConfig{Name: "Linux-Big", MaxRunners: 5}),
					f.checkStopped(nil), resource.TestCheckResourceAttr(pool, "launch_template_version", "1")),
			},
			// Without max_runners the listener uses max_instances (0 in the item).
			{
				Config: f.config(pinned + "max_instances = 5\nscale_set = { name = \"linux.big_2\" }"),
				Check: resource.ComposeAggregateTestCheckFunc(f.checkScaleSet(&state.ScaleSetConfig{Name: "linux.big_2"}),
					resource.TestCheckNoResourceAttr(pool, "scale_set.max_runners")),
			},
			importStep,
			{
				Config: f.config(pinned + "max_instances = 5"),
				Check:  resource.ComposeAggregateTestCheckFunc(f.checkScaleSet(nil), resource.TestCheckNoResourceAttr(pool, "scale_set.name")),
			},
			importStep,
		},
	})
}

// A second pool of the same owner cannot serve a scale set another pool
// of the table serves (the apply checks: the plan sees one pool at a
// time); another name is fine.
func TestAccPool_scaleSet_taken(t *testing.T) {
	f := newPoolFixture(t)
	other := func(name string) string {
		return fmt.Sprintf(`
resource "ghrunner_pool" "other" {
  name               = "other"
  table              = ghrunner_table.state.name
  queue_url          = ghrunner_queue.linux.url
  owner              = "ACME"
  image_id           = %q
  instance_types     = ["c7i.large"]
  subnet_ids         = [%q]
  security_group_ids = [%q]
  scale_set          = { name = %q }
  depends_on         = [ghrunner_pool.linux]
}
`, f.ami, f.subnet, f.sg, name)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             resource.ComposeAggregateTestCheckFunc(checkDestroyed, f.checkNothingLeft),
		Steps: []resource.TestStep{
			{
				Config:      f.config(`scale_set = { name = "Linux-Big" }`) + other("linux-BIG"),
				ExpectError: regexp.MustCompile(attrError("Scale set already served by another pool", `pool "linux" already serves scale set "Linux-Big" of acme`)),
			},
			{
				Config: f.config(`scale_set = { name = "Linux-Big" }`) + other("linux-small"),
				Check: func(*terraform.State) error {
					cfg, err := state.New(env.Config(&testing.T{}).DynamoDB(), f.table).GetPoolConfig(context.Background(), "other")
					if err != nil || cfg.ScaleSet == nil || cfg.ScaleSet.Name != "linux-small" {
						return fmt.Errorf("pool other's config item %+v (%v), want scale set linux-small", cfg, err)
					}
					return nil
				},
			},
		},
	})
}

// Drift: a scale set removed from the config item outside Terraform shows
// in the plan.
func TestAccPool_scaleSet_drift(t *testing.T) {
	f := newPoolFixture(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy:             checkDestroyed,
		Steps: []resource.TestStep{{
			Config: f.config(`scale_set = { name = "linux-big" }`),
			Check: func(*terraform.State) error {
				cfg, err := f.poolConfig()
				if err != nil {
					return err
				}
				cfg.ScaleSet = nil
				return state.New(env.Config(&testing.T{}).DynamoDB(), f.table).PutPoolConfig(context.Background(), *cfg)
			},
			ExpectNonEmptyPlan: true,
		}},
	})
}
