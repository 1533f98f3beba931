package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
)

// Helpers the resources that own roles and tagged objects share.

func iamTags(tags map[string]string) []iamtypes.Tag {
	out := make([]iamtypes.Tag, 0, len(tags))
	for k, v := range tags {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return out
}

func ec2Tags(tags map[string]string) []ec2types.Tag {
	out := make([]ec2types.Tag, 0, len(tags))
	for k, v := range tags {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return out
}

// deleteRole removes a role's inline policy and the role; either may
// already be gone.
func deleteRole(ctx context.Context, svc *iam.Client, role, policy string) error {
	var nf *iamtypes.NoSuchEntityException
	if _, err := svc.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(policy)}); err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("delete policy %s of role %s: %w", policy, role, err)
	}
	if _, err := svc.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(role)}); err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("delete role %s: %w", role, err)
	}
	return nil
}

// retryWhile calls call until it succeeds, fails with an error transient
// does not accept, or limit has passed. It covers IAM propagation: a role
// created moments ago is not yet usable by the service that assumes it.
func retryWhile(ctx context.Context, every, limit time.Duration, transient func(error) bool, call func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := call()
		if err == nil || !transient(err) || time.Now().Add(every).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(every):
		}
	}
}

// iamName bounds a role or instance profile name to IAM's 64 characters: a
// longer one keeps its first 55 and ends in a hash of the whole, so it stays
// deterministic and two long names that share a beginning do not collide.
func iamName(n string) string {
	if len(n) <= 64 {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return n[:55] + "-" + hex.EncodeToString(sum[:])[:8]
}
