package provision

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Preflight: `aws lambda invoke --function-name <prefix>-provision --payload
// '{"preflight": true}'` checks, with provision's own role and GitHub
// credentials, what a first real provision would need, and changes nothing:
// per pool, that EC2 would let it launch from the pool's template with the
// pool's tags (CreateFleet with DryRun) and terminate one of the pool's
// instances (TerminateInstances with DryRun, when one is live); per owner,
// that the GitHub credentials may list its runners; per organization pool
// with a runner group, that the organization has the group, and, given
// the repositories that will invoke provision ({"preflight": true,
// "repositories": [...]}), that the pool's group (the Default group when
// it names none) admits those of its organization (groupaccess.go); per
// pool, whether its maximum fits the account's vCPU quota (a warning:
// quota.go). A denied request comes
// back as the check's detail, naming the action, instead of as a failed
// workflow after the first deploy.

// Check is one preflight finding.
type Check struct {
	Check string `json:"check"` // "launch", "terminate", "start", "quota", "github", "runner-group" or "scale-set-group"
	Pool  string `json:"pool,omitempty"`
	Owner string `json:"owner,omitempty"`
	OK    bool   `json:"ok"`
	// Warning marks a finding that does not fail preflight (a pool's
	// maximum past the account's vCPU quota: quota.go).
	Warning bool   `json:"warning,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// preflight runs the checks; its status is preflight-ok when every check
// passed, preflight-failed otherwise.
func preflight(ctx context.Context, deps Deps, repos []string, start time.Time) (*Output, error) {
	d := deps.Deps
	pools, err := storeOf(d).ListPoolConfigs(ctx)
	if err != nil {
		return nil, fmt.Errorf("preflight: read the pool configs: %w", err)
	}
	out := &Output{Status: "preflight-ok", Checks: []Check{}}
	add := func(c Check, err error) {
		c.OK = err == nil
		if err != nil {
			c.Detail = err.Error()
			out.Status = "preflight-failed"
		}
		out.Checks = append(out.Checks, c)
	}
	owners := map[string]bool{}
	public := map[string]bool{} // repositories' visibility, read once (groupaccess.go)
	for i := range pools {
		p := &pools[i]
		owners[p.Owner] = true
		if gr, ok := d.GitHub.(groupReader); ok {
			for _, c := range groupChecks(ctx, gr, p, repos, public) {
				if !c.OK {
					out.Status = "preflight-failed"
				}
				out.Checks = append(out.Checks, c)
			}
		} else if p.RunnerGroup != "" {
			_, err := d.GitHub.RunnerGroupID(ctx, p.Owner, p.RunnerGroup)
			add(Check{Check: "runner-group", Pool: p.Name, Owner: p.Owner}, err)
		}
		add(Check{Check: "launch", Pool: p.Name}, deps.EC2.CanLaunch(ctx, LaunchSpec{Pool: p, Types: p.InstanceTypes, UsageClass: p.UsageClass,
			Count: 1, Owner: p.Owner, Assignment: "preflight"}))
		if deps.Quotas != nil {
			out.Checks = append(out.Checks, quotaCheck(ctx, deps.Quotas, p))
		}
		// The instance checks: terminate, and start for a pool with a
		// stopped tier. Stopping is scale-down's (provider/policy.go
		// gives ec2:StopInstances to its role alone): provision's
		// credentials cannot tell whether that role may.
		checks := []instanceCheck{{"terminate", deps.EC2.CanTerminate}}
		if p.Stopped != nil {
			checks = append(checks, instanceCheck{"start", deps.EC2.CanStart})
		}
		live, err := deps.EC2.Live(ctx, p.Name)
		ids := make([]string, 0, len(live))
		for id := range live {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, c := range checks {
			switch {
			case err != nil:
				add(Check{Check: c.name, Pool: p.Name}, fmt.Errorf("list the pool's instances: %w", err))
			case len(ids) == 0:
				out.Checks = append(out.Checks, Check{Check: c.name, Pool: p.Name, OK: true, Detail: "not tried: the pool has no live instance"})
			default:
				add(Check{Check: c.name, Pool: p.Name, Detail: ids[0]}, c.dryRun(ctx, ids[0]))
			}
		}
	}
	names := make([]string, 0, len(owners))
	for o := range owners {
		names = append(names, o)
	}
	sort.Strings(names)
	for _, owner := range names {
		_, err := d.GitHub.ListRunners(ctx, owner)
		add(Check{Check: "github", Owner: owner}, err)
	}
	if len(pools) == 0 {
		out.Status = "preflight-failed"
		out.Checks = append(out.Checks, Check{Check: "pools", Detail: "no pool in the table: apply the pools first"})
	}
	out.ElapsedSeconds = time.Since(start).Seconds()
	return out, nil
}

// instanceCheck is a dry run on one of a pool's instances.
type instanceCheck struct {
	name   string
	dryRun func(ctx context.Context, id string) error
}
