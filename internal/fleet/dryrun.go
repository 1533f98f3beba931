package fleet

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// Dry runs: EC2 checks a request's permissions (and most of its
// parameters) without acting, and answers DryRunOperation when the request
// would have succeeded, UnauthorizedOperation when IAM refuses it. Preflight
// uses them with the functions' own credentials.

// CanLaunch asks EC2 whether the launch req describes, of one instance,
// would be allowed: the same CreateFleet request, tags and template as a
// launch, with DryRun set. nil means it would.
func (f *Fleet) CanLaunch(ctx context.Context, req LaunchRequest) error {
	req.Count = 1
	if err := req.Validate(); err != nil {
		return err
	}
	in := fleetInput(req, subnetRounds(req.SubnetIDs, req.SubnetZones, 0)[0], req.UsageClass, 1, req.instanceTags(f.environment))
	in.DryRun = aws.Bool(true)
	_, err := f.ec2.CreateFleet(ctx, in)
	return dryRunResult("CreateFleet", err)
}

// CanTerminate asks EC2 whether terminating instance id would be allowed.
func (f *Fleet) CanTerminate(ctx context.Context, id string) error {
	_, err := f.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}, DryRun: aws.Bool(true)})
	return dryRunResult("TerminateInstances", err)
}

// CanStart asks EC2 whether starting instance id would be allowed (the
// stopped tier's start). EC2 checks the permission whatever the
// instance's state, so a running instance answers too.
func (f *Fleet) CanStart(ctx context.Context, id string) error {
	_, err := f.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}, DryRun: aws.Bool(true)})
	return dryRunResult("StartInstances", err)
}

// dryRunResult reads a dry run's answer: DryRunOperation is success, and a
// dry run that returned no error at all did not dry-run.
func dryRunResult(op string, err error) error {
	switch {
	case err == nil:
		return fmt.Errorf("%s with DryRun acted instead of answering DryRunOperation", op)
	case awserr.Code(err) == "DryRunOperation":
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}
