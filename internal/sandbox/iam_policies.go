package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/iamsim"
)

// The policies the IAM gate evaluates a role's requests against: its inline
// and attached policies and its permissions boundary, read from moto's IAM
// as the deployer and kept at most PolicyTTL.

type rolePolicies struct {
	read       time.Time
	policies   []iamsim.Policy
	boundaries []iamsim.Policy
}

// PolicyTTL bounds how stale the endpoint's copy of a role's policies is:
// IAM itself takes seconds to propagate a change.
const PolicyTTL = 2 * time.Second

// rolePolicies reads the role's inline and attached policies and its
// permissions boundary from IAM, at most PolicyTTL old.
func (g *iamGate) rolePolicies(ctx context.Context, role string) (rolePolicies, error) {
	g.mu.Lock()
	cached, ok := g.policies[role]
	g.mu.Unlock()
	if ok && time.Since(cached.read) < PolicyTTL {
		return cached, nil
	}
	out := rolePolicies{read: time.Now()}
	names, err := g.iam.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: aws.String(role)})
	if err != nil {
		return out, fmt.Errorf("read the policies of role %s: %w", role, err)
	}
	for _, n := range names.PolicyNames {
		p, err := g.iam.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(n)})
		if err != nil {
			return out, fmt.Errorf("read policy %s of role %s: %w", n, role, err)
		}
		doc, err := decodePolicy(aws.ToString(p.PolicyDocument))
		if err != nil {
			return out, fmt.Errorf("policy %s of role %s: %w", n, role, err)
		}
		out.policies = append(out.policies, iamsim.Policy{Name: n, Document: doc})
	}
	attached, err := g.iam.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(role)})
	if err != nil {
		return out, fmt.Errorf("read the attached policies of role %s: %w", role, err)
	}
	for _, a := range attached.AttachedPolicies {
		doc, err := g.managedPolicy(ctx, aws.ToString(a.PolicyArn))
		if err != nil {
			return out, err
		}
		out.policies = append(out.policies, iamsim.Policy{Name: aws.ToString(a.PolicyName), Document: doc})
	}
	r, err := g.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role)})
	if err != nil {
		return out, fmt.Errorf("read role %s: %w", role, err)
	}
	if b := r.Role.PermissionsBoundary; b != nil {
		doc, err := g.managedPolicy(ctx, aws.ToString(b.PermissionsBoundaryArn))
		if err != nil {
			return out, err
		}
		out.boundaries = []iamsim.Policy{{Name: "boundary", Document: doc}}
	}
	g.mu.Lock()
	g.policies[role] = out
	g.mu.Unlock()
	return out, nil
}

func (g *iamGate) managedPolicy(ctx context.Context, arn string) (json.RawMessage, error) {
	p, err := g.iam.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String(arn)})
	if err != nil {
		return nil, fmt.Errorf("read policy %s: %w", arn, err)
	}
	v, err := g.iam.GetPolicyVersion(ctx, &iam.GetPolicyVersionInput{PolicyArn: aws.String(arn), VersionId: p.Policy.DefaultVersionId})
	if err != nil {
		return nil, fmt.Errorf("read policy %s: %w", arn, err)
	}
	return decodePolicy(aws.ToString(v.PolicyVersion.Document))
}

// decodePolicy takes a document as IAM returns it (URL-encoded).
func decodePolicy(s string) (json.RawMessage, error) {
	if d, err := url.QueryUnescape(s); err == nil {
		s = d
	}
	if !json.Valid([]byte(s)) {
		return nil, errors.New("not JSON")
	}
	return json.RawMessage(s), nil
}
