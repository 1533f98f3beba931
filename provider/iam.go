package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// Roles. The provider makes three kinds — a function's execution role, a
// pool's instance role, a schedule's invoker role — and makes, adopts and
// deletes all of them with ensureRole and deleteRole.

// roleSpec is a role as its resource wants it.
type roleSpec struct {
	name        string // iamName of the resource's role name
	kind        string // "function", "pool" or "schedule", for messages
	service     string // the AWS service that, alone, may assume the role
	trust       string // the trust policy, when more than trustPolicy(service)
	description string
	// policyName and policy are the role's one inline policy.
	policyName, policy string
	// tags are all the tags the role carries: the deployment's, the
	// resource's own and, for a pool or a schedule, its owner tag
	// (ownerTagKeys).
	tags map[string]string
	// drop are keys the role was tagged with before and no longer is.
	drop []string
	// path ("" is "/") and boundary (a managed policy ARN, or none) are the
	// provider's iam_role_path and iam_permissions_boundary.
	path, boundary string
}

// rolePath is spec's path, "/" when unset.
func (spec roleSpec) rolePath() string {
	if spec.path == "" {
		return "/"
	}
	return spec.path
}

// ensureRole makes the role spec describes exist, with its trust, tags and
// policy, and returns its ARN and whether this call created it (a caller
// whose next step fails removes a role it created).
//
// Ownership, one rule for every kind: a role of that name that exists
// already is adopted — its trust policy restored, its tags set, its policy
// replaced — only when its tags say it is this resource's: ghr:environment
// is this deployment's environment, and each owner tag (ghr:pool,
// ghr:schedule) has the value spec.tags gives it, or is absent as it is from
// spec.tags (ghr:table, for a function's or a pool's role, names the
// deployment's table). Role names are made of the environment, the region
// and the resource's name (clients.roleName), so a role that fails this
// belongs to something else — another kind of resource (pool "fn-x" and
// function "x" both name their role ghr-<env>-<region>-fn-x), another
// deployment of the environment in the region, or a person — and ensureRole changes
// nothing and fails, naming the role and what to do.
func ensureRole(ctx context.Context, svc *iam.Client, environment string, spec roleSpec) (role ensuredRole, err error) {
	trust := spec.trust
	if trust == "" {
		trust = trustPolicy(spec.service, nil)
	}
	got, err := svc.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(spec.name)})
	switch {
	case awserr.IsNotFound(err):
		in := &iam.CreateRoleInput{RoleName: aws.String(spec.name), AssumeRolePolicyDocument: aws.String(trust), Path: aws.String(spec.rolePath()),
			Description: aws.String(spec.description), Tags: iamTags(spec.tags)}
		if spec.boundary != "" {
			in.PermissionsBoundary = aws.String(spec.boundary)
		}
		out, err := svc.CreateRole(ctx, in)
		if err != nil {
			return ensuredRole{}, fmt.Errorf("create role %s: %w", spec.name, err)
		}
		// CreateRole's answer holds the id: a GetRole right after it may
		// not find the role yet (IAM is eventually consistent).
		role = ensuredRole{arn: aws.ToString(out.Role.Arn), id: aws.ToString(out.Role.RoleId), created: true}
	case err != nil:
		return ensuredRole{}, fmt.Errorf("get role %s: %w", spec.name, err)
	default:
		if want, ok := ownsRole(got.Role.Tags, environment, spec.tags); !ok {
			return ensuredRole{}, fmt.Errorf("role %s already exists but is not this %s's (a %s's role carries %s). "+
				"It belongs to another resource or deployment, or was made by hand: delete or rename it, then apply again; "+
				"if it is this %s's own role, tag it so instead", spec.name, spec.kind, spec.kind, want, spec.kind)
		}
		if have := aws.ToString(got.Role.Path); have != spec.rolePath() {
			return ensuredRole{}, fmt.Errorf("role %s is this %s's but has path %s, and iam_role_path is %s: IAM cannot move a role to another path. "+
				"Set iam_role_path back to %s, or delete the role (and, for a pool, its instance profile) and apply again", spec.name, spec.kind, have, spec.rolePath(), have)
		}
		role = ensuredRole{arn: aws.ToString(got.Role.Arn), id: aws.ToString(got.Role.RoleId)}
		if err := adoptRole(ctx, svc, got.Role, trust, spec); err != nil {
			return ensuredRole{}, err
		}
	}
	if _, err := svc.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(spec.name), PolicyName: aws.String(spec.policyName),
		PolicyDocument: aws.String(spec.policy)}); err != nil {
		return role, fmt.Errorf("put policy %s on role %s: %w", spec.policyName, spec.name, err)
	}
	return role, nil
}

// ensuredRole is the role ensureRole made or took over.
type ensuredRole struct {
	arn, id string
	created bool // made now (a failed apply removes it again)
}

// ensureRole is ensureRole for a role of this deployment: under the
// provider's iam_role_path, with its iam_permissions_boundary, and, when
// table is not "", tagged ghr:table with the state table the role serves
// (a function's or a pool's; the ownership rule then checks it).
func (c *clients) ensureRole(ctx context.Context, table string, spec roleSpec) (ensuredRole, error) {
	spec.path, spec.boundary = c.rolePath, c.boundary
	if table != "" {
		tags := map[string]string{tagTable: table}
		maps.Copy(tags, spec.tags)
		spec.tags = tags
	}
	return ensureRole(ctx, admin.IAM(c.aws), c.environment, spec)
}

// ownsRole applies ensureRole's ownership rule to the tags an existing role
// carries; want lists, for the message, what the tags of a role of this
// resource are.
func ownsRole(have []iamtypes.Tag, environment string, tags map[string]string) (want string, ok bool) {
	ok = hasTag(have, tagEnvironment, environment)
	need := []string{tagEnvironment + "=" + environment}
	for _, key := range ownerTagKeys {
		v, wanted := tags[key]
		got, has := tagValue(have, key)
		if wanted {
			need = append(need, key+"="+v)
		} else if has {
			need = append(need, "no "+key+" tag")
		}
		ok = ok && wanted == has && got == v
	}
	return strings.Join(need, ", "), ok
}

// adoptRole brings a role that is the resource's own back to what ensureRole
// makes: the trust policy, the permissions boundary, and the tags spec gives it.
func adoptRole(ctx context.Context, svc *iam.Client, role *iamtypes.Role, trust string, spec roleSpec) error {
	if !samePolicy(aws.ToString(role.AssumeRolePolicyDocument), trust) {
		if _, err := svc.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(spec.name), PolicyDocument: aws.String(trust)}); err != nil {
			return fmt.Errorf("restore the trust policy of role %s: %w", spec.name, err)
		}
	}
	var have string
	if role.PermissionsBoundary != nil {
		have = aws.ToString(role.PermissionsBoundary.PermissionsBoundaryArn)
	}
	switch {
	case have == spec.boundary:
	case spec.boundary == "":
		if _, err := svc.DeleteRolePermissionsBoundary(ctx, &iam.DeleteRolePermissionsBoundaryInput{RoleName: aws.String(spec.name)}); err != nil {
			return fmt.Errorf("remove the permissions boundary of role %s: %w", spec.name, err)
		}
	default:
		if _, err := svc.PutRolePermissionsBoundary(ctx, &iam.PutRolePermissionsBoundaryInput{RoleName: aws.String(spec.name), PermissionsBoundary: aws.String(spec.boundary)}); err != nil {
			return fmt.Errorf("set the permissions boundary of role %s: %w", spec.name, err)
		}
	}
	if len(spec.drop) > 0 {
		if _, err := svc.UntagRole(ctx, &iam.UntagRoleInput{RoleName: aws.String(spec.name), TagKeys: spec.drop}); err != nil {
			return fmt.Errorf("untag role %s: %w", spec.name, err)
		}
	}
	if len(spec.tags) > 0 {
		if _, err := svc.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String(spec.name), Tags: iamTags(spec.tags)}); err != nil {
			return fmt.Errorf("tag role %s: %w", spec.name, err)
		}
	}
	return nil
}

// deleteRole removes a role's inline policy and the role; either may
// already be gone.
func deleteRole(ctx context.Context, svc *iam.Client, role, policy string) error {
	if _, err := svc.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(policy)}); awserr.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete policy %s of role %s: %w", policy, role, err)
	}
	if _, err := svc.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(role)}); awserr.IgnoreNotFound(err) != nil {
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

// roleName is the name of a role the provider makes: kind ("fn-" for a
// function's, "sched-" for a schedule's, "pool-" for a pool's, "invoke-",
// "listener-": none is the start of another) and the resource's
// name, after the deployment's environment and region. IAM names are global
// to the account while everything else the provider makes is regional, so
// without the region a second region's deployment of the same environment
// would take the first one's roles over (rewriting their policies, deleting
// them on destroy). Two deployments of one environment in one region still
// share names; the ghr:table tag (ownerTagKeys) makes the second one's
// apply fail instead of adopting the first one's roles.
func (c *clients) roleName(kind, name string) string {
	return roleNameIn(c.environment, c.aws.AWS.Region, kind, name)
}

// roleNameIn is clients.roleName for a given environment and region.
func roleNameIn(environment, region, kind, name string) string {
	return iamName("ghr-" + environment + "-" + region + "-" + kind + name)
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

// roleNameOf takes the name out of a role or instance profile ARN (the part
// after the path), or "" for what is not an ARN.
func roleNameOf(arn string) string {
	if !strings.HasPrefix(arn, "arn:") {
		return ""
	}
	return arn[strings.LastIndex(arn, "/")+1:]
}

// caller is the partition and account of the provider's credentials.
func (c *clients) caller(ctx context.Context) (partition, account string, err error) {
	who, err := admin.STS(c.aws).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", "", fmt.Errorf("sts:GetCallerIdentity: %w. Check the provider's credentials", err)
	}
	a, err := parseARN(aws.ToString(who.Arn))
	if err != nil {
		return "", "", err
	}
	return a.partition, aws.ToString(who.Account), nil
}
