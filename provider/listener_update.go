package provider

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// What an update of a listener does besides making its parts: tags, and
// the parts it no longer uses.

// dropUnused deletes what the provider made and the listener no longer
// uses: its repository once it runs a user's image, its cluster once it
// runs in a user's (the service there is gone already).
func (r *listenerResource) dropUnused(ctx context.Context, plan, prior listenerModel) error {
	if prior.ImageURI.IsNull() && !plan.ImageURI.IsNull() {
		_, err := admin.ECR(r.c.aws).DeleteRepository(ctx, &ecr.DeleteRepositoryInput{RepositoryName: aws.String(listenerName(r.c.environment)), Force: true})
		if awserr.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if prior.ClusterARN.IsNull() && !plan.ClusterARN.IsNull() && prior.Cluster.ValueString() != "" {
		_, err := admin.ECS(r.c.aws).DeleteCluster(ctx, &ecs.DeleteClusterInput{Cluster: aws.String(prior.Cluster.ValueString())})
		if awserr.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// retag brings the tags of the repository, the cluster the provider made
// and the service to tags (the roles' are set by ensureRole; a task
// definition revision keeps the tags it was registered with).
func (r *listenerResource) retag(ctx context.Context, plan, prior listenerModel, repoARN string, tags map[string]string) error {
	old, _ := r.c.resourceTags(ctx, prior.Tags)
	drop := droppedTags(old, tags)
	ecsArns := []string{plan.ServiceARN.ValueString()}
	if plan.ClusterARN.IsNull() {
		ecsArns = append(ecsArns, plan.Cluster.ValueString())
	}
	client := admin.ECS(r.c.aws)
	for _, arn := range ecsArns {
		if len(drop) > 0 {
			if _, err := client.UntagResource(ctx, &ecs.UntagResourceInput{ResourceArn: aws.String(arn), TagKeys: drop}); err != nil {
				return err
			}
		}
		if _, err := client.TagResource(ctx, &ecs.TagResourceInput{ResourceArn: aws.String(arn), Tags: ecsTags(tags)}); err != nil {
			return err
		}
	}
	if repoARN == "" {
		return nil
	}
	if len(drop) > 0 {
		if _, err := admin.ECR(r.c.aws).UntagResource(ctx, &ecr.UntagResourceInput{ResourceArn: aws.String(repoARN), TagKeys: drop}); err != nil {
			return err
		}
	}
	_, err := admin.ECR(r.c.aws).TagResource(ctx, &ecr.TagResourceInput{ResourceArn: aws.String(repoARN), Tags: ecrTags(tags)})
	return err
}

func ecsTags(tags map[string]string) []ecstypes.Tag {
	return tagList(tags, func(k, v *string) ecstypes.Tag { return ecstypes.Tag{Key: k, Value: v} })
}

func ecrTags(tags map[string]string) []ecrtypes.Tag {
	return tagList(tags, func(k, v *string) ecrtypes.Tag { return ecrtypes.Tag{Key: k, Value: v} })
}
