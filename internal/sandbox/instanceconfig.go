package sandbox

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/imdsstub"
	"github.com/ghrunner/terraform-provider-ghrunner/templates"
)

// What an instance gets from the sandbox, as from EC2: the credentials of
// its instance profile's role (the metadata service's), and the agent
// configuration its pool's launch template renders in the user data.

// InstanceCredentials are credentials of the session the metadata service
// gives instance id (its instance profile's role, session name the instance
// id, as EC2's), and the role's name: a test holding them acts as a stolen
// instance credential.
func (s *Sandbox) InstanceCredentials(id string) (role string, creds imdsstub.Credentials, err error) {
	return s.instanceRole(id)
}

// instanceRole gives an instance the credentials of its instance profile's
// role, as EC2 does through the metadata service.
func (s *Sandbox) instanceRole(id string) (string, imdsstub.Credentials, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := s.AWS.EC2().DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return "", imdsstub.Credentials{}, err
	}
	var profile, pool string
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if i.IamInstanceProfile != nil {
				profile = aws.ToString(i.IamInstanceProfile.Arn)
			}
			for _, t := range i.Tags {
				if aws.ToString(t.Key) == fleet.TagPool {
					pool = aws.ToString(t.Value)
				}
			}
		}
	}
	if profile == "" && pool != "" {
		// moto does not copy a launch template's instance profile onto the
		// instances of a fleet; EC2 does: read it from the pool's template.
		if profile, err = s.templateProfile(ctx, pool); err != nil {
			return "", imdsstub.Credentials{}, err
		}
	}
	if profile == "" {
		return "", imdsstub.Credentials{}, fmt.Errorf("instance %s has no instance profile", id)
	}
	role, err := s.profileRole(ctx, profile, "")
	if err != nil {
		return "", imdsstub.Credentials{}, err
	}
	akid, secret, token, err := s.iam.issue(ctx, role, id, id)
	if err != nil {
		return "", imdsstub.Credentials{}, err
	}
	return lastSegment(role), imdsstub.Credentials{AccessKeyID: akid, SecretAccessKey: secret, Token: token, Expiration: time.Now().Add(6 * time.Hour)}, nil
}

// agentConfig is what a real instance would read from its user data: the
// launch template of the instance's pool, as the provider rendered it. Only
// the polling is faster, so the story does not wait on one-second polls.
func (s *Sandbox) agentConfig(id string, tags map[string]string) config.Config {
	cfg, err := s.userDataConfig(context.Background(), tags["ghr:pool"])
	if err != nil {
		fmt.Fprintf(s.opts.Logs, "sandbox: instance %s: %v\n", id, err)
		return config.Config{} // the agent refuses to start and says why
	}
	cfg.IdlePoll = config.Duration{Duration: 200 * time.Millisecond}
	cfg.AssignedPoll = config.Duration{Duration: 300 * time.Millisecond}
	cfg.StopTimeout = config.Duration{Duration: 10 * time.Second}
	// The fake GitHub stands in for github.com: the release's own path, but
	// the fake runner's bytes, so their checksum instead of the pinned one.
	if path, ok := strings.CutPrefix(cfg.RunnerTarballURL, "https://github.com/"); ok {
		cfg.RunnerTarballURL, cfg.RunnerTarballSHA256 = s.GitHub.URL()+"/"+path, s.runnerSHA
	}
	s.mu.Lock()
	skew := s.faults.ClockOffset
	s.mu.Unlock()
	if skew != nil {
		cfg.ClockOffset = config.Duration{Duration: skew(id)}
	}
	return cfg
}

func (s *Sandbox) userDataConfig(ctx context.Context, pool string) (config.Config, error) {
	data, err := s.poolTemplate(ctx, pool)
	if err != nil {
		return config.Config{}, err
	}
	raw, err := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	if err != nil {
		return config.Config{}, err
	}
	u, err := templates.Parse(raw)
	if err != nil {
		return config.Config{}, err
	}
	return u.Agent, nil
}

// templateProfile is the instance profile the pool's launch template gives
// its instances.
func (s *Sandbox) templateProfile(ctx context.Context, pool string) (string, error) {
	data, err := s.poolTemplate(ctx, pool)
	if err != nil || data.IamInstanceProfile == nil {
		return "", err
	}
	return aws.ToString(data.IamInstanceProfile.Arn), nil
}

// poolTemplate reads the launch template version the pool's config names.
func (s *Sandbox) poolTemplate(ctx context.Context, pool string) (*ec2types.ResponseLaunchTemplateData, error) {
	table := s.Table()
	if table == "" {
		return nil, errors.New("no deployment yet")
	}
	p, err := state.New(s.AWS.DynamoDB(), table).GetPoolConfig(ctx, pool)
	if err != nil || p == nil {
		return nil, fmt.Errorf("pool %q: %v", pool, err)
	}
	out, err := s.AWS.EC2().DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateId: aws.String(p.LaunchTemplateID), Versions: []string{p.LaunchTemplateVersion}})
	if err != nil || len(out.LaunchTemplateVersions) != 1 {
		return nil, fmt.Errorf("launch template %s: %v", p.LaunchTemplateID, err)
	}
	return out.LaunchTemplateVersions[0].LaunchTemplateData, nil
}
