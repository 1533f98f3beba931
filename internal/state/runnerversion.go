package state

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
)

// Runner versions: what each pool's instances install, and what the
// control plane knows of actions/runner's releases.
//
// Who writes what: the pool's spec is the provider's (its configuration);
// the releases item (releasesKey) and a pool's latestTarget are refresh's;
// an instance's runnerTarget is the control plane's (provision at create,
// refresh afterwards) and outside state.AgentAttributes, so an instance
// cannot pick the tarball or checksum it installs; its runnerVersion is its
// agent's report, trusted for that instance alone (shown, and refresh
// retires an idle instance that reports a version GitHub no longer serves).

// RunnerSpec is a pool's runner_version: Version is "latest" (refresh
// resolves it from the releases it learned) or x.y.z, with TarballURL and
// TarballSHA256 for a tarball of the pool's own (a mirror); Arch is the
// pool's architecture (amd64, arm64). Empty Version: a pool written before
// pools had a spec, whose instances keep what their user data installs.
type RunnerSpec struct {
	Version       string `dynamodbav:"version,omitempty" json:"version,omitempty"`
	TarballURL    string `dynamodbav:"tarballUrl,omitempty" json:"tarballUrl,omitempty"`
	TarballSHA256 string `dynamodbav:"tarballSha256,omitempty" json:"tarballSha256,omitempty"`
	Arch          string `dynamodbav:"arch,omitempty" json:"arch,omitempty"`
}

func (r RunnerSpec) validate() error {
	switch {
	case r.Version == "":
		return nil
	case r.Arch != "amd64" && r.Arch != "arm64":
		return fmt.Errorf("runner.arch: %q must be amd64 or arm64", r.Arch)
	case r.Version == runnerrelease.Latest && r.TarballURL != "":
		return fmt.Errorf("runner.tarballUrl: a pool following %q downloads from github.com; pin a version to use a mirror", runnerrelease.Latest)
	case (r.TarballURL == "") != (r.TarballSHA256 == ""):
		return fmt.Errorf("runner.tarballSha256: set tarballUrl and tarballSha256 together")
	}
	return runnerrelease.ValidateSpec(r.Version, r.TarballURL != "")
}

// RunnerTarget is what the pool's instances are to install now: its pinned
// release, or what refresh last resolved "latest" to; nil when there is no
// target yet (a pool without a spec, or "latest" before refresh learned a
// release): instances then keep what their user data installs.
func (p *PoolConfig) RunnerTarget() *runnerrelease.Target {
	switch p.Runner.Version {
	case "":
		return nil
	case runnerrelease.Latest:
		return p.LatestTarget
	}
	t, ok, err := runnerrelease.Resolve(p.Runner.Version, p.Runner.TarballURL, p.Runner.TarballSHA256, p.Runner.Arch, nil, runnerrelease.GitHubRepo)
	if err != nil || !ok {
		return nil
	}
	return &t
}

// releasesKey is the item of the actions/runner releases refresh learned.
const releasesKey = "runner#releases"

// Releases is what the control plane knows of actions/runner releases:
// the newest it learned first, and when it last asked GitHub.
type Releases struct {
	Releases  []runnerrelease.Release `dynamodbav:"releases"`
	FetchedAt int64                   `dynamodbav:"fetchedAt"`
	// Error is why the last lookup failed ("" when it did not).
	Error string `dynamodbav:"error,omitempty"`
}

// Stale says whether the releases are older than every.
func (r *Releases) Stale(now time.Time, every time.Duration) bool {
	return now.Unix()-r.FetchedAt >= int64(every/time.Second)
}

// GetReleases reads the releases item; none yet is an empty one.
func (s *RunnerReleases) GetReleases(ctx context.Context) (*Releases, error) {
	var it Releases
	if _, err := s.getItem(ctx, releasesKey, &it); err != nil {
		return nil, err
	}
	return &it, nil
}

// PutReleases writes the releases item (refresh, one at a time).
func (s *RunnerReleases) PutReleases(ctx context.Context, r Releases) error {
	item, err := attributevalue.MarshalMap(struct {
		Key  string `dynamodbav:"pk"`
		Kind string `dynamodbav:"kind"`
		Releases
	}{releasesKey, "releases", r})
	if err != nil {
		return err
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	if err != nil {
		return fmt.Errorf("write %s: %w", releasesKey, err)
	}
	return nil
}

// SetLatestTarget records what "latest" resolves to for a pool, beside its
// configuration; a pool that is gone is ErrNotFound.
func (s *Pools) SetLatestTarget(ctx context.Context, pool string, t runnerrelease.Target) error {
	b := newBuilder()
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(PoolKey(pool)),
		UpdateExpression:          aws.String("SET " + b.name("latestTarget") + " = " + b.value(t)),
		ConditionExpression:       aws.String("attribute_exists(" + b.name(AttrPK) + ")"),
		ExpressionAttributeNames:  b.attrNames(),
		ExpressionAttributeValues: b.attrValues(),
	})
	if err != nil {
		return fmt.Errorf("pool %s: set its runner target: %w", pool, err)
	}
	return nil
}

// SetRunnerTarget points an instance at the release it is to run (the
// control plane's write: the agent brings its install to it between
// assignments). Bound to the pool only: the target outlives assignments.
func (s *Instances) SetRunnerTarget(ctx context.Context, key Key, pool string, t runnerrelease.Target) (*Instance, error) {
	return s.apply(ctx, change{
		transition: "set runner target",
		key:        key,
		checks:     []check{exists(), attrIs(ClausePool, "pool", pool), notTerminated()},
		set:        map[string]any{"runnerTarget": t},
		applied: func(cur *Instance) bool {
			return cur.Pool == pool && cur.State != Terminated && cur.RunnerTarget != nil && *cur.RunnerTarget == t
		},
	})
}

// SetRunnerVersion is the agent's report of the runner version installed.
func (s *Instances) SetRunnerVersion(ctx context.Context, key Key, version string) error {
	_, err := s.apply(ctx, change{
		transition: "set runner version",
		key:        key,
		checks:     agentBound(""),
		set:        map[string]any{"runnerVersion": version},
	})
	return err
}
