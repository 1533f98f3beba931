package provision

import (
	"context"
	"reflect"
	"strings"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/pool"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Limits of a payload's values that need no pool to check.
const (
	// MaxAllowedInstanceTypes bounds the globs of one request: a pool has
	// a handful of types, and the request is stored in the run item.
	MaxAllowedInstanceTypes = 64
	// MaxPreflightRepositories bounds a preflight's repositories: each
	// costs a GitHub request per organization pool.
	MaxPreflightRepositories = 100
)

// ParsePayload decodes a provision payload and applies every rule that needs
// no pool configuration (the rest — instanceCount against maxInstances, the
// globs against the pool's types, owner against the pool's — is checked once
// the pool is read). It calls nothing: what it accepts is safe to log, store
// and use as a DynamoDB key, a GitHub label and a GitHub API path.
func ParsePayload(payload []byte) (Input, error) {
	var in Input
	if err := controlplane.Decode(payload, &in); err != nil {
		return in, err
	}
	if in.Preflight {
		if alone := (Input{Preflight: true, Repositories: in.Repositories}); !reflect.DeepEqual(in, alone) {
			return in, controlplane.Invalid("preflight", "comes alone, or with repositories: a payload is either {\"preflight\": true, \"repositories\": [...]} or a provision request")
		}
		return in, checkRepositories(in.Repositories)
	}
	if in.Repositories != nil {
		return in, controlplane.Invalid("repositories", "only with preflight: a provision request's repository is its OIDC token's")
	}
	if err := controlplane.CheckRunID(in.RunID); err != nil {
		return in, err
	}
	if in.Pool == "" {
		return in, controlplane.Invalid("pool", "required: the name of a pool of this deployment")
	}
	if !state.ValidPoolName(in.Pool) {
		return in, controlplane.Invalid("pool", "%s %s (a ghrunner_pool name)", controlplane.Quote(in.Pool), state.PoolNameRule)
	}
	if in.UsageClass != "" && !state.ValidUsageClass(in.UsageClass) {
		return in, controlplane.Invalid("usageClass", "%s must be spot or on-demand", controlplane.Quote(in.UsageClass))
	}
	if n := len(in.AllowedInstanceTypes); n > MaxAllowedInstanceTypes {
		return in, controlplane.Invalid("allowedInstanceTypes", "at most %d globs, got %d", MaxAllowedInstanceTypes, n)
	}
	if _, err := pool.NewMatcher(in.UsageClass, in.AllowedInstanceTypes); err != nil {
		field, rule, _ := strings.Cut(err.Error(), ": ")
		return in, controlplane.Invalid(field, "%s", rule)
	}
	if in.Owner != "" {
		if _, err := github.ParseOwner(in.Owner); err != nil {
			return in, controlplane.Invalid("owner", "%s must be an organization (acme) or a repository (acme/api)", controlplane.Quote(in.Owner))
		}
	}
	// Compared in seconds: multiplied first, a huge value would wrap
	// around into the allowed range.
	if t := in.TimeoutSeconds; t != nil && (*t < int(minTimeout.Seconds()) || *t > int(maxTimeout.Seconds())) {
		return in, controlplane.Invalid("timeoutSeconds", "must be %d to %d, got %d", int(minTimeout.Seconds()), int(maxTimeout.Seconds()), *t)
	}
	if w := in.WaitSeconds; w != nil && (*w < 1 || *w > int(maxWait.Seconds())) {
		return in, controlplane.Invalid("waitSeconds", "must be 1 to %d, got %d", int(maxWait.Seconds()), *w)
	}
	return in, nil
}

// parse checks a decoded payload (ParsePayload) against its pool and fills
// in the defaults.
func parse(ctx context.Context, d *controlplane.Deps, in Input) (*request, error) {
	p, err := d.Pool(ctx, in.Pool)
	if state.IsNotFound(err) {
		return nil, controlplane.Invalid("pool", "unknown pool %q%s", in.Pool, knownPools(ctx, d))
	}
	if err != nil {
		return nil, err
	}
	req := &request{Input: in, pool: p, count: 1, timeout: defaultTimeout}
	if in.InstanceCount != nil {
		req.count = *in.InstanceCount
	}
	if req.count < 1 || req.count > p.MaxInstances {
		return nil, controlplane.Invalid("instanceCount", "must be 1 to %d (the pool's maxInstances), got %d", p.MaxInstances, req.count)
	}
	req.min = req.count
	if in.MinInstanceCount != nil {
		req.min = *in.MinInstanceCount
	}
	if req.min < 1 || req.min > req.count {
		return nil, controlplane.Invalid("minInstanceCount", "must be 1 to instanceCount (%d), got %d", req.count, req.min)
	}
	if in.UsageClass == "" {
		req.UsageClass = p.UsageClass
	}
	if !state.ValidUsageClass(req.UsageClass) {
		return nil, controlplane.Invalid("usageClass", "%q must be spot or on-demand", in.UsageClass)
	}
	req.matcher, err = pool.NewMatcher(req.UsageClass, in.AllowedInstanceTypes)
	if err != nil {
		field, rule, _ := strings.Cut(err.Error(), ": ")
		return nil, controlplane.Invalid(field, "%s", rule)
	}
	if req.types = req.matcher.Allowed(p.InstanceTypes); len(req.types) == 0 {
		return nil, controlplane.Invalid("allowedInstanceTypes", "%v match none of the pool's instance types %v", in.AllowedInstanceTypes, p.InstanceTypes)
	}
	if in.Owner == "" {
		req.Owner = p.Owner
	}
	if req.Owner != p.Owner && !(strings.Count(p.Owner, "/") == 0 && strings.HasPrefix(req.Owner, p.Owner+"/") && strings.Count(req.Owner, "/") == 1) {
		return nil, controlplane.Invalid("owner", "%q must be the pool's owner %q or one of its repositories (%s/<repo>)", in.Owner, p.Owner, p.Owner)
	}
	if in.TimeoutSeconds != nil {
		req.timeout = time.Duration(*in.TimeoutSeconds) * time.Second // 30-900: checked by ParsePayload
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl)-rollbackReserve < req.timeout {
		req.timeout = max(time.Until(dl)-rollbackReserve, time.Until(dl)/2)
	}
	return req, nil
}

// checkRepositories: a preflight's repositories are owner/name, at most
// MaxPreflightRepositories of them.
func checkRepositories(repos []string) error {
	if len(repos) > MaxPreflightRepositories {
		return controlplane.Invalid("repositories", "at most %d, got %d", MaxPreflightRepositories, len(repos))
	}
	for _, r := range repos {
		if o, err := github.ParseOwner(r); err != nil || !o.IsRepo() {
			return controlplane.Invalid("repositories", "%s must be a repository, owner/name (acme/app)", controlplane.Quote(r))
		}
	}
	return nil
}
