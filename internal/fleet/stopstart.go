package fleet

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// Stop and start serve the stopped tier (state/stopped.go): one instance a
// call, because EC2 refuses a whole StopInstances or StartInstances call
// for one instance it cannot act on (a spot instance of a one-time
// request: UnsupportedOperation; a start without capacity:
// InsufficientInstanceCapacity; a stop while pending, a start while
// stopping: IncorrectInstanceState), and each instance's answer decides
// what the caller does with that instance.

// Stop stops one instance, keeping its EBS volumes. An instance EC2 no
// longer knows is gone (ErrGone).
func (f *Fleet) Stop(ctx context.Context, id string) error {
	_, err := f.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}})
	return stopStartError("stop", id, err)
}

// Start starts one stopped instance. IsEC2CapacityShortage tells a start
// EC2 has no capacity for (InsufficientInstanceCapacity).
func (f *Fleet) Start(ctx context.Context, id string) error {
	_, err := f.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}})
	return stopStartError("start", id, err)
}

// ErrGone is a stop or start of an instance EC2 does not know.
var ErrGone = fmt.Errorf("instance gone from EC2")

func stopStartError(verb, id string, err error) error {
	switch {
	case err == nil:
		return nil
	case awserr.IsNotFound(err):
		return fmt.Errorf("%s %s: %w: %w", verb, id, ErrGone, err)
	}
	return fmt.Errorf("%s %s: %w", verb, id, err)
}
