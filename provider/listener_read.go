package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// Drift of a listener: Read looks at every part. The listener is gone
// (Read removes it from state) when its service, its task definition and
// its task role all are. A part gone outside Terraform reads as its
// identity "" — service_arn, task_definition_arn (deregistered), cluster,
// repository_url, task_role_name, execution_role_name — or, for the log
// group, log_retention_days 0, so the plan shows a change and the apply
// makes the part again (ModifyPlan marks what the apply sets).

// errNotFound is what the finders return for a part that does not exist.
var errNotFound = errors.New("not found")

// findRepository is the repository of that name.
func findRepository(ctx context.Context, client *ecr.Client, name string) (*ecrtypes.Repository, error) {
	out, err := client.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{RepositoryNames: []string{name}})
	if err != nil {
		return nil, err
	}
	if len(out.Repositories) == 0 {
		return nil, fmt.Errorf("repository %s: %w", name, errNotFound)
	}
	return &out.Repositories[0], nil
}

// findService is the service of that name while it is active (a deleted
// one stays INACTIVE for a while, or draining while its task stops).
func findService(ctx context.Context, client *ecs.Client, cluster, name string) (*ecstypes.Service, error) {
	out, err := client.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(cluster), Services: []string{name}})
	if err != nil {
		return nil, err
	}
	for _, s := range out.Services {
		if aws.ToString(s.ServiceName) == name && aws.ToString(s.Status) == "ACTIVE" {
			return &s, nil
		}
	}
	return nil, fmt.Errorf("service %s: %w", name, errNotFound)
}

// isGone says whether err says a part does not exist.
func isGone(err error) bool { return errors.Is(err, errNotFound) || awserr.IsNotFound(err) }

// read refreshes m from AWS; it reports false when the listener is gone.
func (r *listenerResource) read(ctx context.Context, m *listenerModel) (bool, error) {
	env := m.ID.ValueString()
	name := listenerName(env)
	m.Environment, m.LogGroup = types.StringValue(env), types.StringValue(listenerLogGroup(env))
	days, found, err := r.c.logRetention(ctx, m.LogGroup.ValueString())
	if err != nil {
		return false, err
	}
	m.LogRetentionDays = types.Int64Value(0)
	if found {
		m.LogRetentionDays = types.Int64Value(days)
	}
	if m.ImageURI.IsNull() {
		m.RepositoryURL = types.StringValue("")
		repo, err := findRepository(ctx, admin.ECR(r.c.aws), name)
		if err != nil && !isGone(err) {
			return false, err
		}
		if repo != nil {
			m.RepositoryURL = types.StringValue(aws.ToString(repo.RepositoryUri))
		}
	}
	for _, role := range []struct {
		attr *types.String
		name string
	}{{&m.TaskRoleName, r.c.roleName("listener-", "task")}, {&m.ExecutionRoleName, r.c.roleName("listener-", "exec")}} {
		*role.attr = types.StringValue("")
		_, err := admin.IAM(r.c.aws).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role.name)})
		if err != nil && !awserr.IsNotFound(err) {
			return false, err
		}
		if err == nil {
			*role.attr = types.StringValue(role.name)
		}
	}
	client := admin.ECS(r.c.aws)
	cluster := m.ClusterARN.ValueString()
	if cluster == "" {
		out, err := client.DescribeClusters(ctx, &ecs.DescribeClustersInput{Clusters: []string{"ghr-" + env}})
		if err != nil {
			return false, err
		}
		for _, c := range out.Clusters {
			if aws.ToString(c.Status) == "ACTIVE" {
				cluster = aws.ToString(c.ClusterArn)
			}
		}
	}
	m.Cluster, m.ServiceARN = types.StringValue(cluster), types.StringValue("")
	if cluster != "" {
		svc, err := findService(ctx, client, cluster, name)
		if err != nil && !isGone(err) {
			return false, err
		}
		if svc != nil {
			m.ServiceARN, m.TaskDefinitionARN = types.StringValue(aws.ToString(svc.ServiceArn)), types.StringValue(aws.ToString(svc.TaskDefinition))
			readNetwork(ctx, svc, m)
		}
	}
	if err := r.readTaskDefinition(ctx, m); err != nil {
		return false, err
	}
	gone := m.ServiceARN.ValueString() == "" && m.TaskDefinitionARN.ValueString() == "" && m.TaskRoleName.ValueString() == ""
	return !gone, nil
}

// readNetwork takes the service's subnets, groups and public IP setting.
func readNetwork(ctx context.Context, svc *ecstypes.Service, m *listenerModel) {
	if svc.NetworkConfiguration == nil || svc.NetworkConfiguration.AwsvpcConfiguration == nil {
		return
	}
	v := svc.NetworkConfiguration.AwsvpcConfiguration
	m.SubnetIDs, _ = types.SetValueFrom(ctx, types.StringType, v.Subnets)
	m.SecurityGroupIDs = types.SetNull(types.StringType)
	if len(v.SecurityGroups) > 0 {
		m.SecurityGroupIDs, _ = types.SetValueFrom(ctx, types.StringType, v.SecurityGroups)
	}
	m.AssignPublicIP = types.BoolValue(v.AssignPublicIp == ecstypes.AssignPublicIpEnabled)
}

// readTaskDefinition fills the settings the task definition holds; a
// deregistered one reads as task_definition_arn "".
func (r *listenerResource) readTaskDefinition(ctx context.Context, m *listenerModel) error {
	arn := m.TaskDefinitionARN.ValueString()
	if arn == "" {
		m.TaskDefinitionARN = types.StringValue("")
		return nil
	}
	out, err := admin.ECS(r.c.aws).DescribeTaskDefinition(ctx, &ecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(arn)})
	if awserr.IsNotFound(err) || awserr.Code(err) == "ClientException" {
		m.TaskDefinitionARN = types.StringValue("")
		return nil
	}
	if err != nil {
		return err
	}
	td := out.TaskDefinition
	if td.Status != ecstypes.TaskDefinitionStatusActive || len(td.ContainerDefinitions) == 0 {
		m.TaskDefinitionARN = types.StringValue("")
		return nil
	}
	var cpu, memory int64
	fmt.Sscan(aws.ToString(td.Cpu), &cpu)
	fmt.Sscan(aws.ToString(td.Memory), &memory)
	m.CPU, m.Memory = types.Int64Value(cpu), types.Int64Value(memory)
	if p := td.RuntimePlatform; p != nil {
		m.Architecture = types.StringValue(map[ecstypes.CPUArchitecture]string{ecstypes.CPUArchitectureArm64: "arm64", ecstypes.CPUArchitectureX8664: "amd64"}[p.CpuArchitecture])
	}
	c := td.ContainerDefinitions[0]
	for _, kv := range c.Environment {
		switch v := types.StringValue(aws.ToString(kv.Value)); aws.ToString(kv.Name) {
		case "GHRUNNER_TABLE":
			m.Table = v
		case "GHRUNNER_GITHUB_PARAMETER":
			m.GitHubParameter = v
		case "GHRUNNER_LOG_LEVEL":
			m.LogLevel = v
		}
	}
	img := aws.ToString(c.Image)
	m.Image = types.StringValue(img)
	_, digest, _ := strings.Cut(img, "@")
	m.ImageDigest = types.StringValue(digest)
	if url := m.RepositoryURL.ValueString(); m.ImageURI.IsNull() && (url == "" || !strings.HasPrefix(img, url+"@")) && !strings.Contains(img, "/"+listenerName(m.ID.ValueString())+"@") {
		m.ImageURI = types.StringValue(img) // imported: an image of the user's
	}
	return nil
}

// deleteService scales the service to 0, deletes it and waits until ECS
// says it is inactive (its task stopped), within ten minutes.
func (r *listenerResource) deleteService(ctx context.Context, cluster, name string) error {
	client := admin.ECS(r.c.aws)
	if _, err := client.UpdateService(ctx, &ecs.UpdateServiceInput{Cluster: aws.String(cluster), Service: aws.String(name), DesiredCount: aws.Int32(0)}); err != nil {
		if awserr.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("scale service %s to 0: %w", name, err)
	}
	if _, err := client.DeleteService(ctx, &ecs.DeleteServiceInput{Cluster: aws.String(cluster), Service: aws.String(name), Force: aws.Bool(true)}); awserr.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete service %s: %w", name, err)
	}
	// Not the SDK's waiter: it fails on a service ECS no longer lists
	// (MISSING), which is as gone as INACTIVE.
	deadline := time.Now().Add(10 * time.Minute)
	for {
		out, err := client.DescribeServices(ctx, &ecs.DescribeServicesInput{Cluster: aws.String(cluster), Services: []string{name}})
		if awserr.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("wait for service %s to be inactive: %w", name, err)
		}
		status := "MISSING"
		for _, s := range out.Services {
			status = aws.ToString(s.Status)
		}
		if status == "INACTIVE" || status == "MISSING" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("service %s still %s after 10 minutes: its task has not stopped; delete it in the ECS console and apply again", name, status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
}

// destroy deletes every part: the service first (its task stops), then
// the task definitions, the cluster the provider made, the roles, the log
// group and the repository with its images.
func (r *listenerResource) destroy(ctx context.Context, st listenerModel) error {
	env := st.ID.ValueString()
	name := listenerName(env)
	client := admin.ECS(r.c.aws)
	cluster := st.ClusterARN.ValueString()
	if cluster == "" {
		cluster = "ghr-" + env
	}
	if err := r.deleteService(ctx, cluster, name); err != nil {
		return err
	}
	p := ecs.NewListTaskDefinitionsPaginator(client, &ecs.ListTaskDefinitionsInput{FamilyPrefix: aws.String(name), Status: ecstypes.TaskDefinitionStatusActive})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list task definitions: %w", err)
		}
		for _, arn := range page.TaskDefinitionArns {
			if !strings.Contains(arn, ":task-definition/"+name+":") {
				continue // another family with this prefix
			}
			if _, err := client.DeregisterTaskDefinition(ctx, &ecs.DeregisterTaskDefinitionInput{TaskDefinition: aws.String(arn)}); err != nil {
				return fmt.Errorf("deregister %s: %w", arn, err)
			}
		}
	}
	if st.ClusterARN.IsNull() {
		err := retryWhile(ctx, 5*time.Second, 2*time.Minute, func(err error) bool { return strings.HasPrefix(awserr.Code(err), "ClusterContains") }, func() error {
			_, err := client.DeleteCluster(ctx, &ecs.DeleteClusterInput{Cluster: aws.String(cluster)})
			return awserr.IgnoreNotFound(err)
		})
		if err != nil {
			return fmt.Errorf("delete cluster %s: %w", cluster, err)
		}
	}
	for role, policy := range map[string]string{r.c.roleName("listener-", "task"): listenerTaskPolicyName, r.c.roleName("listener-", "exec"): listenerExecPolicyName} {
		if err := deleteRole(ctx, admin.IAM(r.c.aws), role, policy); err != nil {
			return err
		}
	}
	if err := r.c.deleteLogGroup(ctx, listenerLogGroup(env)); err != nil {
		return fmt.Errorf("delete log group: %w", err)
	}
	if st.ImageURI.IsNull() {
		_, err := admin.ECR(r.c.aws).DeleteRepository(ctx, &ecr.DeleteRepositoryInput{RepositoryName: aws.String(name), Force: true})
		if awserr.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete repository %s: %w", name, err)
		}
	}
	return nil
}
