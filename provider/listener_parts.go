package provider

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/image"
)

// The parts of a listener and how apply makes them. Every step takes what
// exists (a repository, a role, a cluster, a service of its name), so an
// apply that failed half way is finished by the next one.

const (
	listenerTaskPolicyName = "ghrunner-listener"
	listenerExecPolicyName = "ghrunner-listener-execution"
	listenerContainer      = "listener"
)

// listenerImage builds the image of the embedded bundle's bootstrap for arch.
func listenerImage(arch string) (v1.Image, error) {
	zipped, err := functionAsset(arch)
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(bytes.NewReader(zipped.data), int64(len(zipped.data)))
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", bundle.FunctionZip(arch), err)
	}
	f, err := zr.Open("bootstrap")
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", bundle.FunctionZip(arch), err)
	}
	defer f.Close()
	bootstrap, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	return image.Build(bootstrap, arch)
}

// plannedDigest is the digest of the image the apply runs: the embedded
// bundle's, or the one image_uri names ("" for an image by tag).
func (r *listenerResource) plannedDigest(m listenerModel) (string, error) {
	if uri := m.ImageURI.ValueString(); uri != "" {
		_, digest, _ := strings.Cut(uri, "@")
		return digest, nil
	}
	arch := m.Architecture.ValueString()
	zipped, err := functionAsset(arch)
	if err != nil {
		return "", err
	}
	// Every plan asks; building the image compresses the whole binary.
	key := arch + "/" + zipped.sha256Hex
	digestCache.Lock()
	defer digestCache.Unlock()
	if d, ok := digestCache.m[key]; ok {
		return d, nil
	}
	img, err := listenerImage(arch)
	if err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	digestCache.m[key] = d.String()
	return d.String(), nil
}

// digestCache holds the listener image's digest per bundle zip.
var digestCache = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// apply brings every part to what plan says; prior is nil on create. save
// records the state once the service exists.
func (r *listenerResource) apply(ctx context.Context, plan, prior *listenerModel, save func(context.Context, any) diag.Diagnostics) diag.Diagnostics {
	var diags diag.Diagnostics
	fail := func(what string, err error) diag.Diagnostics {
		diags.AddError(what+" failed", err.Error())
		return diags
	}
	env := r.c.environment
	tags, d := r.c.resourceTags(ctx, plan.Tags)
	if diags.Append(d...); diags.HasError() {
		return diags
	}
	tableARN, tableKey, err := stateTableARN(ctx, r.c, plan.Table.ValueString())
	if err != nil {
		return fail("Finding the state table", err)
	}
	plan.ID, plan.Environment, plan.LogGroup = types.StringValue(env), types.StringValue(env), types.StringValue(listenerLogGroup(env))
	if err := r.c.ensureLogGroup(ctx, plan.LogGroup.ValueString(), plan.LogRetentionDays.ValueInt64(), tags); err != nil {
		return fail("Creating the log group", err)
	}
	repoARN := ""
	plan.RepositoryURL = types.StringValue("")
	if plan.ImageURI.ValueString() == "" {
		url, arn, err := r.ensureRepository(ctx, tags)
		if err != nil {
			return fail("Creating the image repository", err)
		}
		plan.RepositoryURL, repoARN = types.StringValue(url), arn
	}
	ref, digest, err := r.ensureImage(ctx, *plan)
	if err != nil {
		return fail("Pushing the listener image", err)
	}
	plan.Image, plan.ImageDigest = types.StringValue(ref), types.StringValue(digest)
	taskRole, execRole, err := r.ensureRoles(ctx, *plan, tableARN, tableKey, repoARN, tags)
	if err != nil {
		return fail("Creating the listener roles", err)
	}
	plan.TaskRoleName, plan.ExecutionRoleName = types.StringValue(roleNameOf(taskRole)), types.StringValue(roleNameOf(execRole))
	cluster := plan.ClusterARN.ValueString()
	if cluster == "" {
		out, err := admin.ECS(r.c.aws).CreateCluster(ctx, &ecs.CreateClusterInput{ClusterName: aws.String("ghr-" + env), Tags: ecsTags(tags)})
		if err != nil {
			return fail("Creating the cluster", err)
		}
		cluster = aws.ToString(out.Cluster.ClusterArn)
	}
	plan.Cluster = types.StringValue(cluster)
	if plan.TaskDefinitionARN.IsUnknown() || plan.TaskDefinitionARN.ValueString() == "" {
		arn, err := r.registerTaskDefinition(ctx, *plan, taskRole, execRole, tags)
		if err != nil {
			return fail("Registering the task definition", err)
		}
		plan.TaskDefinitionARN = types.StringValue(arn)
	}
	if prior != nil && prior.Cluster.ValueString() != "" && prior.Cluster.ValueString() != cluster {
		// Moved to another cluster: the old service goes first, so that
		// two listeners never hold a scale set's session at once.
		if err := r.deleteService(ctx, prior.Cluster.ValueString(), listenerName(env)); err != nil {
			return fail("Deleting the service in the previous cluster", err)
		}
	}
	arn, err := r.ensureService(ctx, *plan, tags)
	if err != nil {
		return fail("Creating or updating the service", err)
	}
	plan.ServiceARN = types.StringValue(arn)
	if prior != nil {
		if err := r.retag(ctx, *plan, *prior, repoARN, tags); err != nil {
			return fail("Tagging the listener", err)
		}
		if err := r.dropUnused(ctx, *plan, *prior); err != nil {
			return fail("Deleting what the listener no longer uses", err)
		}
	}
	diags.Append(save(ctx, plan)...)
	return diags
}

// ensureRepository makes the repository ghr-<environment>-listener, or
// takes the one of that name, and returns its URI and ARN. Tags are
// immutable: the image is pushed under a tag of its digest, which never
// names another image.
func (r *listenerResource) ensureRepository(ctx context.Context, tags map[string]string) (url, arn string, err error) {
	client := admin.ECR(r.c.aws)
	repoName := listenerName(r.c.environment)
	out, err := client.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String(repoName),
		ImageTagMutability: ecrtypes.ImageTagMutabilityImmutable, Tags: ecrTags(tags),
		// The image holds one static Go binary and nothing else to scan.
		ImageScanningConfiguration: &ecrtypes.ImageScanningConfiguration{ScanOnPush: false}})
	if err == nil {
		return aws.ToString(out.Repository.RepositoryUri), aws.ToString(out.Repository.RepositoryArn), nil
	}
	if !awserr.IsAlreadyExists(err) {
		return "", "", err
	}
	repo, err := findRepository(ctx, client, repoName)
	if err != nil {
		return "", "", err
	}
	return aws.ToString(repo.RepositoryUri), aws.ToString(repo.RepositoryArn), nil
}

// ensureImage pushes the embedded bundle's image to the repository unless
// it is there, and returns the reference by digest the task definition
// names. The image goes to the repository's repositoryUri as ECR returns
// it; only the provider's endpoints.ecr_registry (an emulator) changes the
// host it is pushed to.
func (r *listenerResource) ensureImage(ctx context.Context, m listenerModel) (ref, digest string, err error) {
	if uri := m.ImageURI.ValueString(); uri != "" {
		_, digest, _ := strings.Cut(uri, "@")
		return uri, digest, nil
	}
	img, err := listenerImage(m.Architecture.ValueString())
	if err != nil {
		return "", "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", "", err
	}
	url := m.RepositoryURL.ValueString()
	target := url
	if host := r.c.ecrRegistry; host != "" {
		_, repoPath, _ := strings.Cut(url, "/")
		target = host + "/" + repoPath
	}
	auth, _, err := image.ECRAuth(ctx, admin.ECR(r.c.aws))
	if err != nil {
		return "", "", err
	}
	there, err := name.NewDigest(target + "@" + d.String())
	if err != nil {
		return "", "", err
	}
	if _, err := remote.Head(there, remote.WithAuth(auth), remote.WithContext(ctx)); err != nil {
		if _, err := image.Push(ctx, img, target+":"+strings.Replace(d.String(), ":", "-", 1), auth); err != nil {
			return "", "", err
		}
	}
	return url + "@" + d.String(), d.String(), nil
}

// ensureRoles makes the task role (listenerPolicy) and the execution role
// (listenerExecutionPolicy), both assumed by ECS tasks only.
func (r *listenerResource) ensureRoles(ctx context.Context, m listenerModel, tableARN, tableKey, repoARN string, tags map[string]string) (task, exec string, err error) {
	var queues, keys []string
	m.QueueARNs.ElementsAs(ctx, &queues, false)
	m.VolumeKMSKeyARNs.ElementsAs(ctx, &keys, false)
	group := m.LogGroup.ValueString()
	policy, err := listenerPolicy(tableARN, tableKey, queues, m.GitHubParameter.ValueString(), group, r.c.environment, r.c.rolePath, keys)
	if err != nil {
		return "", "", err
	}
	role, err := r.c.ensureRole(ctx, m.Table.ValueString(), roleSpec{name: r.c.roleName("listener-", "task"), kind: "listener", service: "ecs-tasks.amazonaws.com",
		description: "ghrunner listener task", policyName: listenerTaskPolicyName, policy: policy, tags: tags})
	if err != nil {
		return "", "", err
	}
	execPolicy, err := listenerExecutionPolicy(tableARN, repoARN, group)
	if err != nil {
		return "", "", err
	}
	execRole, err := r.c.ensureRole(ctx, m.Table.ValueString(), roleSpec{name: r.c.roleName("listener-", "exec"), kind: "listener", service: "ecs-tasks.amazonaws.com",
		description: "ghrunner listener task execution", policyName: listenerExecPolicyName, policy: execPolicy, tags: tags})
	if err != nil {
		return "", "", err
	}
	return role.arn, execRole.arn, nil
}

// registerTaskDefinition registers a revision of ghr-<environment>-listener.
func (r *listenerResource) registerTaskDefinition(ctx context.Context, m listenerModel, taskRole, execRole string, tags map[string]string) (string, error) {
	arch := ecstypes.CPUArchitectureArm64
	if m.Architecture.ValueString() == "amd64" {
		arch = ecstypes.CPUArchitectureX8664
	}
	env := map[string]string{"GHRUNNER_HANDLER": bundle.HandlerListener, "GHRUNNER_TABLE": m.Table.ValueString(), "GHRUNNER_ENVIRONMENT": r.c.environment,
		"GHRUNNER_GITHUB_PARAMETER": m.GitHubParameter.ValueString(), "GHRUNNER_LOG_LEVEL": m.LogLevel.ValueString()}
	var vars []ecstypes.KeyValuePair
	for _, k := range []string{"GHRUNNER_HANDLER", "GHRUNNER_TABLE", "GHRUNNER_ENVIRONMENT", "GHRUNNER_GITHUB_PARAMETER", "GHRUNNER_LOG_LEVEL"} {
		vars = append(vars, ecstypes.KeyValuePair{Name: aws.String(k), Value: aws.String(env[k])})
	}
	out, err := admin.ECS(r.c.aws).RegisterTaskDefinition(ctx, &ecs.RegisterTaskDefinitionInput{
		Family: aws.String(listenerName(r.c.environment)), RequiresCompatibilities: []ecstypes.Compatibility{ecstypes.CompatibilityFargate},
		NetworkMode: ecstypes.NetworkModeAwsvpc, Cpu: aws.String(fmt.Sprint(m.CPU.ValueInt64())), Memory: aws.String(fmt.Sprint(m.Memory.ValueInt64())),
		TaskRoleArn: aws.String(taskRole), ExecutionRoleArn: aws.String(execRole), Tags: ecsTags(tags),
		RuntimePlatform: &ecstypes.RuntimePlatform{CpuArchitecture: arch, OperatingSystemFamily: ecstypes.OSFamilyLinux},
		ContainerDefinitions: []ecstypes.ContainerDefinition{{
			Name: aws.String(listenerContainer), Image: aws.String(m.Image.ValueString()), Essential: aws.Bool(true), Environment: vars,
			// The listener ends its session and hands its runs over on SIGTERM.
			StopTimeout: aws.Int32(30),
			LogConfiguration: &ecstypes.LogConfiguration{LogDriver: ecstypes.LogDriverAwslogs, Options: map[string]string{
				"awslogs-group": m.LogGroup.ValueString(), "awslogs-region": r.c.aws.AWS.Region, "awslogs-stream-prefix": listenerContainer}},
		}},
	})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.TaskDefinition.TaskDefinitionArn), nil
}

// listenerDeployment keeps one listener at most: GitHub gives a scale set
// one message session at a time, so a new task must not start before the
// old one is gone (minimum 0 %, maximum 100 %: ECS stops the old task, then
// starts the new one; a short gap in which jobs wait is the price). The
// circuit breaker rolls a revision that never gets a task running (an image
// ECS cannot pull, a crash at start) back to the last one that did, instead
// of retrying it forever while no listener runs.
func listenerDeployment() *ecstypes.DeploymentConfiguration {
	return &ecstypes.DeploymentConfiguration{MinimumHealthyPercent: aws.Int32(0), MaximumPercent: aws.Int32(100),
		DeploymentCircuitBreaker: &ecstypes.DeploymentCircuitBreaker{Enable: true, Rollback: true}}
}

func (r *listenerResource) network(ctx context.Context, m listenerModel) *ecstypes.NetworkConfiguration {
	var subnets, groups []string
	m.SubnetIDs.ElementsAs(ctx, &subnets, false)
	m.SecurityGroupIDs.ElementsAs(ctx, &groups, false)
	public := ecstypes.AssignPublicIpDisabled
	if m.AssignPublicIP.ValueBool() {
		public = ecstypes.AssignPublicIpEnabled
	}
	return &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{Subnets: subnets, SecurityGroups: groups, AssignPublicIp: public}}
}

// ensureService creates the service, or points the one there at the task
// definition and settings of m.
func (r *listenerResource) ensureService(ctx context.Context, m listenerModel, tags map[string]string) (string, error) {
	client, cluster, svc := admin.ECS(r.c.aws), m.Cluster.ValueString(), listenerName(r.c.environment)
	have, err := findService(ctx, client, cluster, svc)
	if err != nil && !isGone(err) {
		return "", err
	}
	if have != nil {
		out, err := client.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String(cluster), Service: aws.String(svc),
			TaskDefinition: m.TaskDefinitionARN.ValueStringPointer(), DesiredCount: aws.Int32(1),
			DeploymentConfiguration: listenerDeployment(), NetworkConfiguration: r.network(ctx, m)})
		if err != nil {
			return "", err
		}
		return aws.ToString(out.Service.ServiceArn), nil
	}
	out, err := client.CreateService(ctx, &ecs.CreateServiceInput{Cluster: aws.String(cluster), ServiceName: aws.String(svc),
		TaskDefinition: m.TaskDefinitionARN.ValueStringPointer(), DesiredCount: aws.Int32(1), LaunchType: ecstypes.LaunchTypeFargate,
		DeploymentConfiguration: listenerDeployment(), NetworkConfiguration: r.network(ctx, m), Tags: ecsTags(tags)})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.Service.ServiceArn), nil
}
